"""What sustained load does over time, as robust slopes with intervals: memory growth per 1,000
requests in each process, and the slowdown of throughput and latency over a load's windows (or
over a run's cycles). Pure functions of numbers (numpy; the same figures as ``scipy.stats.theilslopes``): the worker
judges each cycle with them (``verdicts.classify_growth``), analysis reads a run's cycles with
them too.

Why Theil-Sen: the median of every pairwise slope, so one stray sample (a window that a noisy
neighbour slowed, an allocator that returned an arena) moves it little, and its interval comes
with it (Sen's, from Kendall's tau). A least-squares slope, as the rig had, follows the outlier.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import numpy as np

CONFIDENCE = 0.95  # the intervals' level
MIN_POINTS = 4  # fewer points after the warm-up: no slope (not measured)
MAX_POINTS = 500  # more are thinned, evenly, first: the pairwise slopes grow as the square
WARMUP_FRACTION = 0.2  # of the load, when it has no windows to say where the warm-up ends


@dataclasses.dataclass(frozen=True)
class Slope:
    """A Theil-Sen slope with its interval (``low`` <= ``slope`` <= ``high``) over ``n`` points."""

    slope: float
    low: float
    high: float
    intercept: float
    n: int
    span: float = 0.0  # the x it covers (max - min)


def theil_sen(x, y, confidence: float = CONFIDENCE) -> Slope | None:
    """The Theil-Sen slope of ``y`` over ``x`` with Sen's ``confidence`` interval (as
    ``scipy.stats.theilslopes`` gives them: the same figures, checked in tests/common/test_trends.py);
    None with fewer than ``MIN_POINTS`` finite points or no spread in ``x``. Written here in
    numpy: importing scipy.stats took 2.2-4.7 s in each fresh worker on a busy 2-core machine
    (measured with ``python -X importtime``), a cost every cycle of a fresh-process soak paid."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) > MAX_POINTS:  # an hour's load sampled 4 times a second: 14,400 points, 10^8 pairs
        pick = np.unique(np.linspace(0, len(x) - 1, MAX_POINTS).round().astype(int))
        x, y = x[pick], y[pick]
    n = len(x)
    if n < MIN_POINTS or np.ptp(x) <= 0:
        return None
    i, j = np.triu_indices(n, 1)
    dx = x[j] - x[i]
    keep = dx != 0
    slopes = np.sort((y[j] - y[i])[keep] / dx[keep])
    slope = float(np.median(slopes))

    # Sen (1968), eq. 2.6: the variance of Kendall's S, less the ties in x and in y
    def ties(v):
        _, counts = np.unique(v, return_counts=True)
        return sum(k * (k - 1) * (2 * k + 5) for k in counts if k > 1)

    sigma = math.sqrt((n * (n - 1) * (2 * n + 5) - ties(x) - ties(y)) / 18.0)
    z = statistics.NormalDist().inv_cdf((1 + confidence) / 2)
    m = len(slopes)
    upper = min(int(round((m + z * sigma) / 2.0)), m - 1)
    lower = max(int(round((m - z * sigma) / 2.0)) - 1, 0)
    low, high = float(slopes[lower]), float(slopes[upper])
    intercept = float(np.median(y) - slope * np.median(x))
    return Slope(slope, min(low, slope), max(high, slope), intercept, int(n), float(np.ptp(x)))


# ------------------------------------------------------------------ memory growth per request


def requests_at(times, window_ends, window_requests, t_start: float, t_end: float, total: float | None):
    """Requests completed at each of ``times`` (monotonic seconds): read off the windows'
    cumulative counts (each window's requests at its end, linear inside it), or, without windows,
    ``total`` spread evenly over [``t_start``, ``t_end``]. None where neither is known."""
    times = np.asarray(times, float)
    if len(window_ends):
        xs = np.concatenate([[t_start], np.asarray(window_ends, float)])
        ys = np.concatenate([[0.0], np.cumsum(np.asarray(window_requests, float))])
        order = np.argsort(xs)
        return np.interp(times, xs[order], ys[order])
    if total and t_end > t_start:
        return np.clip((times - t_start) / (t_end - t_start), 0, 1) * float(total)
    return None


def warmup_end(t_start: float, t_end: float, window_ends) -> float:
    """Where the warm-up ends: the first window's end (the stubs' shared-memory pool touched for
    the first time, allocator arenas grown, Locust's users started), or without windows the first
    ``WARMUP_FRACTION`` of the load."""
    ends = sorted(float(e) for e in window_ends)
    if len(ends) >= 2:
        return ends[0]
    return t_start + WARMUP_FRACTION * max(t_end - t_start, 0.0)


def growth_per_1k(requests, bytes_) -> Slope | None:
    """Bytes per 1,000 requests: the Theil-Sen slope of memory over requests completed."""
    s = theil_sen(np.asarray(requests, float) / 1000.0, bytes_)
    return s


def process_growth(samples: list[dict], after_t: float) -> dict[str, Slope]:
    """Each process kind's growth per 1,000 requests from the samples taken after ``after_t``
    (``t`` monotonic): ``worker``, ``stub <model>`` (its instances summed, sample by sample) and
    ``gpu`` (every process's GPU memory summed, or the devices' used memory where the PIDs could not
    match: ``device_gpu_bytes``, ``probes.Gpu.memory_of``). A sample is a dict ``t``, ``requests``,
    ``process``, ``model``, ``pid``, ``rss_bytes``, ``gpu_bytes``; the measure is RSS
    (``probes.rss_of`` says why). A process kind whose set of processes changed mid-load (a stub
    that died and came back) is read over its samples that are complete."""
    series: dict[str, dict[int, list[float]]] = {}
    req: dict[int, float] = {}
    for s in samples:
        if s["t"] < after_t or s.get("requests") is None:
            continue
        req[s["sample"]] = float(s["requests"])
        key = "worker" if s["process"] == "worker" else f"stub {s.get('model') or '?'}"
        value = s.get("rss_bytes")
        if value is not None:
            series.setdefault(key, {}).setdefault(s["sample"], []).append(float(value))
        gpu = s.get("gpu_bytes") if s.get("gpu_bytes") is not None else s.get("device_gpu_bytes")
        if gpu is not None:
            series.setdefault("gpu", {}).setdefault(s["sample"], []).append(float(gpu))
    out: dict[str, Slope] = {}
    for key, by_sample in series.items():
        common = max((len(v) for v in by_sample.values()), default=0)
        points = sorted((req[k], sum(v)) for k, v in by_sample.items() if len(v) == common)
        slope = growth_per_1k([p[0] for p in points], [p[1] for p in points])
        if slope is not None:
            out[key] = slope
    return out


def growth_columns(growth: dict[str, Slope], rate: float | None = None) -> dict:
    """The cycle row's growth columns (``CycleRow``) from ``process_growth``; ``rate``: the
    load's requests per second, for the worker's growth per second."""
    out: dict = {}
    w = growth.get("worker")
    if w is not None:
        out.update(
            worker_growth_per_1k_b=w.slope,
            worker_growth_low_b=w.low,
            worker_growth_high_b=w.high,
            worker_growth_per_s_b=w.slope * rate / 1000.0 if rate else None,
        )
    stubs = {k[len("stub ") :]: v for k, v in growth.items() if k.startswith("stub ")}
    if stubs:
        model, s = max(stubs.items(), key=lambda kv: kv[1].low)
        out.update(
            stub_growth_per_1k_b=s.slope, stub_growth_low_b=s.low, stub_growth_high_b=s.high, stub_growth_model=model
        )
    if "gpu" in growth:
        out["gpu_growth_per_1k_b"] = growth["gpu"].slope
    if growth:
        out["growth_requests"] = max(v.span for v in growth.values()) * 1000.0
        out["growth_by_process"] = json.dumps(
            {k: [round(v.slope, 1), round(v.low, 1), round(v.high, 1)] for k, v in sorted(growth.items())}
        )
    return out


# ------------------------------------------------------------------ slowdown over windows


def change(x, y) -> tuple[float, float, float] | None:
    """The trend's change of ``y`` from the first ``x`` to the last, in % of its start: (point,
    low, high). Read as a ratio, end over start, from the Theil-Sen slope of log ``y`` and its
    interval: a latency that explodes (2 ms to 350 ms within a load) is read whole, where a
    straight line through it would start below zero, and a fall is never past -100 %. None where
    there is no slope (values that are not positive are left out)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(y) & (y > 0)
    s = theil_sen(x[keep], np.log(y[keep]))
    if s is None:
        return None
    span = s.span
    return tuple(100.0 * math.expm1(min(v * span, 50.0)) for v in (s.slope, s.low, s.high))  # type: ignore[return-value]


def slower(p50: tuple | None, throughput: tuple | None) -> tuple[float, float] | None:
    """How much slower the end is than the start, in %: p50's rise, or throughput's fall read as
    the same (a fall of 1/3 is 50 % slower), whichever is larger; (point, the lower bound of its
    interval). None where neither is known."""
    best = None
    if p50 is not None:
        best = (p50[0], p50[1])
    if throughput is not None:

        def as_slower(pct):
            end = max(1.0 + pct / 100.0, 1e-9)  # a ratio from a log fit: never 0
            return 100.0 * (1.0 / end - 1.0)

        # a fall's upper bound (the smallest fall) is the conservative slowdown
        t = (as_slower(throughput[0]), as_slower(throughput[2]))
        if best is None or t[1] > best[1]:
            best = t
    return best


def window_trend(windows: list[dict], skip: int = 0) -> dict:
    """The load's trend over its windows, the first ``skip`` left out (and the last where it is
    much shorter or longer than the others: it holds the drain of the requests in flight). The
    first window is kept by default: its warm-up makes it slower, if anything, which leans
    against a slowdown, never toward one, and a 5 s load has only five windows to read.
    Columns of the cycle row: ``throughput_change_pct``, ``p50_change_pct``,
    ``p99_change_pct``, ``slowdown_pct``, ``slowdown_low_pct``, ``p50_us_per_1k``,
    ``trend_windows``."""
    rows = [w for w in windows if (w.get("requests") or 0) > 0]
    rows = sorted(rows, key=lambda w: w.get("start_s") or 0.0)[skip:]
    if len(rows) >= 2:
        lengths = [float(w.get("length_s") or 0) for w in rows[:-1]]
        typical = float(np.median(lengths))
        if typical > 0 and not 0.5 * typical <= float(rows[-1].get("length_s") or 0) <= 1.5 * typical:
            rows = rows[:-1]
    out: dict = {"trend_windows": len(rows)}
    if len(rows) < MIN_POINTS:
        return out
    t = np.array([float(w["start_s"]) + float(w["length_s"]) / 2 for w in rows])
    cum = np.cumsum([float(w["requests"]) for w in rows])

    def col(name):
        return np.array([np.nan if w.get(name) is None else float(w[name]) for w in rows])

    thr, p50, p99 = change(t, col("throughput")), change(t, col("p50_us")), change(t, col("p99_us"))
    out.update(
        throughput_change_pct=thr[0] if thr else None,
        p50_change_pct=p50[0] if p50 else None,
        p99_change_pct=p99[0] if p99 else None,
    )
    s = slower(p50, thr)
    if s is not None:
        out.update(slowdown_pct=s[0], slowdown_low_pct=s[1])
    per_1k = theil_sen(cum / 1000.0, col("p50_us"))
    if per_1k is not None:
        out["p50_us_per_1k"] = per_1k.slope
    return out


def run_trend(load_s, throughput, p50_us) -> dict:
    """The same trend across a run's cycles (each a point at the load run so far, ``load_s``):
    ``throughput_change_pct``, ``p50_change_pct``, ``slowdown_pct``, ``slowdown_low_pct``,
    ``pct_per_min`` (the slowdown per minute of load), ``cycles``."""
    x = np.asarray(load_s, float)
    thr, p50 = change(x, throughput), change(x, p50_us)
    out: dict = {
        "cycles": int(np.isfinite(x).sum()),
        "throughput_change_pct": thr[0] if thr else None,
        "p50_change_pct": p50[0] if p50 else None,
    }
    s = slower(p50, thr)
    if s is not None:
        span_min = float(np.nanmax(x) - np.nanmin(x)) / 60.0
        out.update(slowdown_pct=s[0], slowdown_low_pct=s[1], pct_per_min=s[0] / span_min if span_min > 0 else None)
    return out
