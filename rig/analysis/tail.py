"""p99 at loads a sweep did not measure, two ways, and which of them predicts better here.

*Interpolation* (``usl.p99_at``): p99 log-linear between the two measured loads around, nothing
beyond them. *The queue*: a node is ``servers`` requests served at once; a closed loop keeps
``load`` requests in flight (a new one the moment one is answered); each request takes a service
time drawn from the latencies measured at the least load (where nothing queues: its merged
histogram), and waits first-come first-served for a server. The simulated latencies' shape, with
their mean set by Little's law to ``load / X(load)`` (X from the USL, or the measured throughputs
interpolated), give p99 at any load, beyond the sweep too. ``servers`` is how many requests the
node serves at once: its peak throughput times the mean service time, at least 1.

Which is kept is measured on the sweep itself (``assess``): each measured load between the least
and the largest is predicted from the others (left out of the fit and of the interpolation), and
the method with the smaller mean absolute error is the one used between the loads; beyond the
largest load only the queue answers, and its error there (the largest load predicted from the
others) is stated beside it.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from rig.analysis import usl

SIMULATED = 20_000  # requests simulated a load (after a warm-up of as many as are in flight)


def simulate(values: np.ndarray, weights: np.ndarray, servers: int, load: int, seed: int = 0) -> np.ndarray:
    """Latencies of a closed loop of ``load`` requests in flight over ``servers`` first-come
    first-served servers, service times drawn from ``values`` with ``weights``."""
    rng = np.random.default_rng(seed)
    n = SIMULATED + load
    service = rng.choice(values, size=n, p=weights / weights.sum())
    free = [0.0] * max(1, servers)
    arrivals = [0.0] * load
    heapq.heapify(arrivals)
    out = np.empty(n)
    for i in range(n):
        arrived = heapq.heappop(arrivals)
        start = max(arrived, heapq.heappop(free))
        end = start + service[i]
        heapq.heappush(free, end)
        heapq.heappush(arrivals, end)
        out[i] = end - arrived
    return out[load:]


class Queue:
    """The queue model of one sweep: service times from the least load's latencies, the node's
    servers from its peak throughput, the mean latency at a load from ``throughput_at``."""

    def __init__(self, values: np.ndarray, weights: np.ndarray, throughput_at, peak: float):
        self.values, self.weights = values, weights
        self.mean_service = float(np.average(values, weights=weights)) / 1e6  # seconds
        self.servers = max(1, round(peak * self.mean_service))
        self.throughput_at = throughput_at
        self._memo: dict[int, float] = {}

    def p99(self, load: float) -> float | None:
        """p99 (us) at ``load``: the simulated tail over the mean, times Little's mean latency;
        between whole loads, log-linear."""
        lo, hi = math.floor(load), math.ceil(load)
        if lo < 1:
            return None
        a = self._whole(lo)
        if hi == lo or a is None:
            return a
        b = self._whole(hi)
        if b is None:
            return None
        return float(math.exp(math.log(a) + (load - lo) * (math.log(b) - math.log(a))))

    def _whole(self, load: int) -> float | None:
        if load not in self._memo:
            x = self.throughput_at(load)
            if x is None or not x > 0:
                return None
            lat = simulate(self.values, self.weights, self.servers, load)
            ratio = float(np.percentile(lat, 99) / lat.mean())
            self._memo[load] = ratio * load / x * 1e6
        return self._memo[load]


def _throughput_at(loads: np.ndarray, throughput: np.ndarray, law):
    """X at a load: the law where it is usable, else the measured throughputs interpolated (the
    last one held beyond)."""
    if law is not None and law.usable:
        return lambda n: float(law.at(n))
    return lambda n: float(np.interp(n, loads, throughput))


def queue_of(loads, throughput, p99_hist: list, law) -> Queue | None:
    """The queue model over a sweep: ``p99_hist`` per load, (values, weights) of its merged
    latencies (None where a load has no histograms); None without the least load's."""
    loads, throughput = np.asarray(loads, float), np.asarray(throughput, float)
    if not len(loads) or p99_hist[0] is None:
        return None
    values, weights = p99_hist[0]
    at = _throughput_at(loads, throughput, law)
    peak = float(law.at(min(law.peak, 1e6))) if law is not None and law.usable else float(np.nanmax(throughput))
    return Queue(values, weights, at, peak)


def assess(loads, throughput, p99, hists: list, fit_law) -> dict:
    """Each method's leave-one-out error on this sweep. ``fit_law(keep)``: the USL fitted on the
    loads at indices ``keep`` (None where it cannot be). {interpolation_error, queue_error: the mean
    absolute error in % over the inner loads (None where there are none), compared: how many,
    beyond_error: the queue's error in % at the largest load predicted from the others, chosen:
    ``queue`` or ``interpolation``, queue: the ``Queue`` over every load}."""
    loads, throughput, p99 = np.asarray(loads, float), np.asarray(throughput, float), np.asarray(p99, float)
    errs: dict[str, list[float]] = {"interpolation": [], "queue": []}
    beyond = None
    for i in range(1, len(loads)):
        keep = [j for j in range(len(loads)) if j != i]
        if not math.isfinite(p99[i]):
            continue
        q = queue_of(loads[keep], throughput[keep], [hists[j] for j in keep], fit_law(keep))
        got = q.p99(loads[i]) if q is not None else None
        if i == len(loads) - 1:
            beyond = None if got is None else (got - p99[i]) / p99[i] * 100
            continue
        interp = usl.p99_at(loads[i], loads[keep], p99[keep])
        if interp is not None and got is not None and math.isfinite(interp):
            errs["interpolation"].append(abs(interp - p99[i]) / p99[i] * 100)
            errs["queue"].append(abs(got - p99[i]) / p99[i] * 100)
    mean = {k: (float(np.mean(v)) if v else None) for k, v in errs.items()}
    queue_better = (
        mean["queue"] is not None and mean["interpolation"] is not None and mean["queue"] < mean["interpolation"]
    )
    return {
        "interpolation_error": mean["interpolation"],
        "queue_error": mean["queue"],
        "compared": len(errs["queue"]),
        "beyond_error": beyond,
        "chosen": "queue" if queue_better else "interpolation",
        "queue": queue_of(loads, throughput, hists, fit_law(list(range(len(loads))))),
    }


def p99_at(tail: dict | None, load: float, loads, p99) -> tuple[float | None, str]:
    """p99 at ``load`` by the kept method (``assess``): at a load measured, its p99 (monotone, as
    interpolation reads it); between the loads measured, the chosen one;
    beyond the largest, the queue (``extrapolated``); (None, why) where neither answers."""
    loads = np.asarray(loads, float)
    q = tail.get("queue") if tail else None
    if len(loads) and load > loads[-1] + 1e-9:
        got = q.p99(load) if q is not None else None
        return got, "the queue, beyond the loads measured" if got is not None else "beyond the loads measured"
    if len(loads) and np.isclose(loads, load).any():  # a load measured: its own p99
        return usl.p99_at(load, loads, p99), "measured"
    if tail and tail["chosen"] == "queue" and q is not None:
        got = q.p99(load)
        if got is not None:
            return got, "the queue"
    return usl.p99_at(load, loads, p99), "interpolated"
