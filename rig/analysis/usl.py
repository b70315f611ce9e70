"""The Universal Scalability Law (Gunther): throughput against load, or against nodes, fitted with
intervals, beside the linear model it contains.

    X(N) = λN / (1 + σ(N − 1) + κN(N − 1))

λ is the throughput of one unit (one request in flight, one node) with nothing to share; σ the
contention (the share that serializes: Amdahl's law alone); κ the coherency cost (each unit
waiting on each other), which makes X peak at N* = sqrt((1 − σ) / κ) and fall beyond. σ = κ = 0
is the linear model, X = λN: the baseline, and what ``rig capacity`` assumed of nodes before.

Why this model: a bench sweep of an in-process server shows the three regimes it has and no
other: throughput that grows with load, flattens once the node's CPUs are busy (σ), and falls
when more requests in flight only add switching between threads and stubs (κ). Amdahl's law
(κ = 0) cannot fall; a queueing network would need each stage's service time, which the rig does
not observe. Three parameters, fitted by least squares on relative residuals
(``scipy.optimize.curve_fit``), every throughput counting for its share.

Pure functions over numbers; ``rig.analysis.capacity.plan`` applies them to the stored sweeps.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

MIN_POINTS = 3  # distinct loads for σ and κ both (2: σ alone, κ = 0)
FIT_TOLERANCE = 0.10  # a fit whose relative rms residual is above this is not used for an answer


def throughput(n, lam: float, sigma: float, kappa: float):
    """X(N) (scalar or array)."""
    n = np.asarray(n, dtype=float)
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


@dataclasses.dataclass(frozen=True)
class Fit:
    """A fitted law over loads ``n_min``..``n_max``; ``rms_rel``: the relative rms residual."""

    lam: float
    sigma: float
    kappa: float
    rms_rel: float
    n_min: float
    n_max: float
    points: int  # distinct loads fitted

    def at(self, n):
        return throughput(n, self.lam, self.sigma, self.kappa)

    @property
    def peak(self) -> float:
        """N* where X peaks (inf where κ = 0: X only flattens, towards λ/σ)."""
        return math.sqrt((1 - self.sigma) / self.kappa) if self.kappa > 0 else math.inf

    @property
    def usable(self) -> bool:
        return self.points >= MIN_POINTS and self.rms_rel <= FIT_TOLERANCE


def fit(n, x, kappa: bool = True, start: Fit | None = None) -> Fit | None:
    """The law fitted to loads ``n`` and throughputs ``x`` (one pair per repeat; several per
    load). κ is fitted only where ``kappa`` and 3 loads or more were measured; σ needs 2. None
    where fewer loads, no positive throughput, or no convergence. ``start``: a fit to start from
    (a bootstrap's resamples start from the estimate: fewer iterations, the same optimum)."""
    from scipy.optimize import OptimizeWarning, curve_fit

    n, x = np.asarray(n, dtype=float), np.asarray(x, dtype=float)
    keep = np.isfinite(n) & np.isfinite(x) & (n > 0) & (x > 0)
    n, x = n[keep], x[keep]
    loads = np.unique(n)
    if loads.size < 2:
        return None
    lam0 = float(np.median(x[n == loads[0]]) / loads[0])
    both = kappa and loads.size >= MIN_POINTS
    k = 3 if both else 2
    p0 = ([start.lam, max(start.sigma, 1e-6), max(start.kappa, 1e-9)] if start is not None else [lam0, 0.05, 1e-4])[:k]

    def squared(n, lam, s, c=0.0):  # σ = s², κ = c²: never negative, and MINPACK's LM needs no bounds
        return throughput(n, lam, s * s, c * c)

    p = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        try:
            q, _ = curve_fit(squared, n, x, p0=[p0[0], *np.sqrt(p0[1:])], sigma=x, maxfev=5000)
            if q[0] > 0 and q[1] ** 2 <= 1:
                p = [q[0], q[1] ** 2, *(q[2:] ** 2)]
        except (RuntimeError, ValueError):
            pass
        if p is None:  # LM left the law's domain (σ > 1): the bounded trust-region fit instead
            try:
                p, _ = curve_fit(
                    lambda n, lam, s, c=0.0: throughput(n, lam, s, c),
                    n,
                    x,
                    p0=p0,
                    sigma=x,
                    bounds=([0.0] * k, [np.inf, 1.0, np.inf][:k]),
                    maxfev=5000,
                )
            except (RuntimeError, ValueError):
                return None
    lam, sigma, kap = (float(p[0]), float(p[1]), float(p[2]) if both else 0.0)
    pred = throughput(n, lam, sigma, kap)
    rms = float(np.sqrt(np.mean(((x - pred) / x) ** 2)))
    return Fit(lam, sigma, kap, rms, float(loads[0]), float(loads[-1]), int(loads.size))


def fit_nodes(nodes, efficiency) -> tuple[float, float] | None:
    """σ and κ of nodes that add up as the law says, from fleets measured at ``nodes`` with
    ``efficiency`` = their throughput / (nodes x one node's): 1/e - 1 = σ(n−1) + κn(n−1), linear
    in σ and κ (Gunther's transform), fitted by non-negative least squares. κ only with 2 node
    counts or more besides 1 (else 0); None without a count above 1."""
    from scipy.optimize import nnls

    n, e = np.asarray(nodes, dtype=float), np.asarray(efficiency, dtype=float)
    keep = np.isfinite(n) & np.isfinite(e) & (n > 1) & (e > 0)
    n, e = n[keep], e[keep]
    if not n.size:
        return None
    y = 1 / e - 1
    if np.unique(n).size >= 2:
        (sigma, kappa), _ = nnls(np.column_stack([n - 1, n * (n - 1)]), y)
    else:
        sigma, kappa = max(0.0, float(np.sum(y * (n - 1)) / np.sum((n - 1) ** 2))), 0.0
    return float(sigma), float(kappa)


def linear(n, x) -> float | None:
    """λ of the linear model, X = λN: the throughput per unit at the least load measured."""
    n, x = np.asarray(n, dtype=float), np.asarray(x, dtype=float)
    keep = np.isfinite(n) & np.isfinite(x) & (n > 0)
    if not keep.any():
        return None
    least = n[keep].min()
    return float(np.median(x[keep][n[keep] == least]) / least)


def _monotone(p99) -> np.ndarray:
    """p99 over increasing loads, made non-decreasing (a later, lower p99 is noise: the load at
    the bound is the first crossing)."""
    return np.maximum.accumulate(np.asarray(p99, dtype=float))


def load_at(bound: float, n, p99) -> tuple[float | None, str]:
    """The load where p99 reaches ``bound``, p99 interpolated log-linearly between the measured
    loads ``n`` (increasing; an infinite p99 marks a load that failed: errors): (load, how).
    ``within``: the crossing lies between two loads measured; ``not reached``: every load met the
    bound, the answer is the largest measured (never extrapolated); ``none``: the least load
    already broke it (None)."""
    n = np.asarray(n, dtype=float)
    p = _monotone(p99)
    if not n.size or not p[0] <= bound:
        return None, "none"
    if p[-1] <= bound:
        return float(n[-1]), "not reached"
    j = int(np.argmax(p > bound))  # the first load past the bound; j >= 1
    lo, hi = math.log(p[j - 1]), math.log(p[j]) if math.isfinite(p[j]) else math.inf
    if not math.isfinite(hi):
        return float(n[j - 1]), "within"
    frac = (math.log(bound) - lo) / (hi - lo) if hi > lo else 0.0
    return float(n[j - 1] + frac * (n[j] - n[j - 1])), "within"


def p99_at(load: float, n, p99) -> float | None:
    """p99 at ``load``, interpolated as ``load_at`` does; None outside the loads measured."""
    n = np.asarray(n, dtype=float)
    p = _monotone(p99)
    if not n.size or load < n[0] - 1e-9 or load > n[-1] + 1e-9:
        return None
    j = int(np.searchsorted(n, load))
    if j < n.size and abs(n[j] - load) < 1e-9:
        return float(p[j])
    lo, hi = p[j - 1], p[j]
    if not math.isfinite(hi):
        return math.inf
    frac = (load - n[j - 1]) / (n[j] - n[j - 1])
    return float(math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo))))


def nodes_for(
    target: float,
    per_node: float | None,
    headroom: float,
    sigma: float = 0.0,
    kappa: float = 0.0,
) -> int | None:
    """The fewest nodes whose throughput, X(n) = per_node · n / (1 + σ(n−1) + κn(n−1)), each run at
    ``1 - headroom``, serves ``target``; None where none can (the law's peak is below it, or no
    capacity). σ = κ = 0: ceil(target / (per_node (1 - headroom)))."""
    if not per_node or per_node <= 0 or not 0 <= headroom < 1 or target <= 0:
        return None
    t = target / (per_node * (1 - headroom))  # in units of one node's throughput
    if kappa <= 0:
        if sigma <= 0:
            return max(1, math.ceil(t - 1e-9))
        if sigma * t >= 1:  # X(n) only approaches per_node / σ
            return None
        return max(1, math.ceil(t * (1 - sigma) / (1 - sigma * t) - 1e-9))
    a, b, c = t * kappa, t * (sigma - kappa) - 1, t * (1 - sigma)
    disc = b * b - 4 * a * c
    if disc < 0:
        return None  # the peak is below the target
    return max(1, math.ceil((-b - math.sqrt(disc)) / (2 * a) - 1e-9))


def interval(values, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """The percentile interval of bootstrap ``values`` (None, NaN and infinities left out);
    (None, None) where none is left."""
    a = np.asarray([v for v in values if v is not None], dtype=float)
    a = a[np.isfinite(a)]
    if not a.size:
        return None, None
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(a, [tail, 100 - tail])
    return float(lo), float(hi)
