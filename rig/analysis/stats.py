"""Statistics over stored results: intervals, tests, exact latency histograms, change points.

Pure functions over plain numbers and merged HDR histograms (``rig.common.hdr``); the heavy lifting is
scipy.stats (Wilson, bootstrap, Mann-Whitney, Fisher, linear regression), hdrhistogram and
ruptures. Every function accepts degenerate input (no values, one value, all values equal) and
answers with ``None`` or a zero-width interval instead of raising.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

BOOT_MAX = 2000  # values a bootstrap resamples at most: a seeded random subsample beyond that


def preload(*modules: str) -> None:
    """Import ``modules`` (default: scipy.stats and ruptures) on a thread of their own while the
    caller reads its tables: scipy.stats alone takes 0.6 s to import here, a fifth of a report
    over a year of nights, and the reading spends most of its time in pyarrow's threads. A
    module that fails to import fails again, with its error, where it is used. Call it after
    any fork (an import in flight at a fork can leave its lock held in the child)."""
    import importlib
    import threading

    def run():
        for name in modules or ("scipy.stats", "ruptures"):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S110
                pass

    threading.Thread(target=run, name="rig-preload", daemon=True).start()


def finite(values) -> np.ndarray:
    """The finite numbers of ``values`` (None, NaN, NA and infinities left out), as floats."""
    if values is None:
        return np.array([], dtype=float)
    if hasattr(values, "to_numpy"):
        a = values.to_numpy(dtype=float, na_value=np.nan)
    elif isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        a = values.astype(float, copy=False)
    else:
        a = np.asarray(values if hasattr(values, "__len__") else list(values), dtype=float)  # None -> NaN
    return a[np.isfinite(a)].reshape(-1)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """The success rate and its Wilson score interval (``(None, None, None)`` when ``n == 0``)."""
    from scipy.stats import binomtest

    n, k = int(n), int(successes)
    if n <= 0:
        return None, None, None
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return k / n, float(ci.low), float(ci.high)


def _subsample(a: np.ndarray, max_values: int | None, seed: int) -> np.ndarray:
    """At most ``max_values`` of ``a``: a seeded random subsample without replacement. The
    interval from a subsample is wider than the whole sample's would be, never narrower."""
    if max_values is None or a.size <= max_values:
        return a
    return np.random.default_rng(seed).choice(a, max_values, replace=False)


def bootstrap_ci(
    values,
    statistic: Callable = np.median,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    max_values: int | None = BOOT_MAX,
) -> tuple[float, float, float]:
    """``statistic`` of ``values`` with its bootstrap interval (BCa, percentile where BCa is
    undefined). One value or all values equal: ``(v, v, v)``. No values: NaNs. The estimate is
    of all values; the interval resamples at most ``max_values`` of them (a seeded subsample:
    wider, so conservative; BCa's jackknife grows with the square of the sample)."""
    from scipy.stats import bootstrap

    a = finite(values)
    if a.size == 0:
        return math.nan, math.nan, math.nan
    est = float(statistic(a))
    if a.size == 1 or np.all(a == a[0]):
        return est, est, est
    a = _subsample(a, max_values, seed)
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa on tiny samples warns, then we fall back
            res = bootstrap(
                (a,),
                statistic,
                confidence_level=confidence,
                n_resamples=n_resamples,
                method=method,
                rng=np.random.default_rng(seed),
            )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return est, min(low, est), max(high, est)
    return est, est, est


def compare(a, b, alternative: str = "two-sided") -> dict:
    """Medians of two samples, their difference (b - a, and relative to a), and the
    Mann-Whitney U test's p-value (``alternative`` as scipy's: "less" means a tends to be
    smaller than b). ``p_value`` is None when either side has fewer than 2 values."""
    from scipy.stats import mannwhitneyu

    x, y = finite(a), finite(b)
    am = float(np.median(x)) if x.size else None
    bm = float(np.median(y)) if y.size else None
    diff = bm - am if am is not None and bm is not None else None
    rel = diff / am if diff is not None and am else None
    p = None
    if x.size >= 2 and y.size >= 2:
        if np.all(x == x[0]) and np.all(y == y[0]) and x[0] == y[0]:
            p = 1.0  # identical constants: nothing to tell apart (scipy answers NaN)
        else:
            p = float(mannwhitneyu(x, y, alternative=alternative).pvalue)
    return {
        "a_median": am,
        "b_median": bm,
        "diff": diff,
        "rel_diff": rel,
        "p_value": p,
        "test": f"Mann-Whitney U ({alternative})",
    }


def ratio_ci(
    a,
    b,
    statistic: Callable = np.median,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    max_values: int | None = BOOT_MAX,
) -> tuple[float, float, float]:
    """``statistic(b) / statistic(a) - 1`` with its bootstrap interval (each sample resampled
    on its own, at most ``max_values`` of each: see ``bootstrap_ci``). NaNs when either side is
    empty or ``statistic(a)`` is 0."""
    from scipy.stats import bootstrap

    x, y = finite(a), finite(b)
    if x.size == 0 or y.size == 0 or statistic(x) == 0:
        return math.nan, math.nan, math.nan
    est = float(statistic(y) / statistic(x) - 1)
    if x.size < 2 or y.size < 2:
        return est, est, est
    x, y = _subsample(x, max_values, seed), _subsample(y, max_values, seed + 1)

    def rel(xs, ys, axis=-1):
        return statistic(ys, axis=axis) / statistic(xs, axis=axis) - 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bootstrap(
            (x, y),
            rel,
            confidence_level=confidence,
            n_resamples=n_resamples,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return est, est, est
    return est, min(low, est), max(high, est)


def fisher(k1: int, n1: int, k2: int, n2: int, alternative: str = "greater") -> float | None:
    """Fisher's exact test of successes ``k1/n1`` against ``k2/n2`` ("greater": the first
    rate is higher). None when either side has no trials."""
    from scipy.stats import fisher_exact

    if n1 <= 0 or n2 <= 0:
        return None
    return float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative=alternative).pvalue)


def _pkey(p: float) -> str:
    return f"p{p:g}".replace(".", "") + "_us"  # 50 -> p50_us, 99.9 -> p999_us


def histogram_percentiles(hist, percentiles=(50, 90, 99, 99.9)) -> dict[str, float]:
    """Percentiles of a histogram (keys ``p50_us``, ``p999_us``, ...), ``max_us`` and
    ``count``; the percentiles and max are None for an empty or missing histogram."""
    n = hist.get_total_count() if hist is not None else 0
    out: dict = {_pkey(p): None for p in percentiles}
    out.update(max_us=None, count=int(n))
    if n:
        table = hist.get_percentile_to_value_dict(list(percentiles))
        out.update({_pkey(p): float(table[p]) for p in percentiles})
        out["max_us"] = float(hist.get_max_value())
    return out


def ecdf(values) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF: sorted values and the fraction of values at or below each."""
    a = np.sort(finite(values))
    return a, np.arange(1, a.size + 1) / a.size if a.size else np.array([], dtype=float)


def slope_ci(x, y, confidence: float = 0.95) -> tuple[float, float, float] | None:
    """The least-squares slope of ``y`` over ``x`` with its interval (Student's t on
    linregress's standard error); None with fewer than 3 points or a constant ``x``."""
    from scipy.stats import linregress, t

    pairs = [
        (float(a), float(b))
        for a, b in zip(x, y)
        if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    if len(pairs) < 3:
        return None
    xs, ys = np.array(pairs).T
    if np.all(xs == xs[0]):
        return None
    r = linregress(xs, ys)
    half = float(t.ppf((1 + confidence) / 2, len(xs) - 2) * r.stderr)
    return float(r.slope), float(r.slope) - half, float(r.slope) + half


def noise_sigma(values) -> float:
    """The noise of a series from its first differences: ``sqrt(mean(diff**2) / 2)``. A step
    moves one difference only, so it barely inflates the estimate, unlike the plain std."""
    a = finite(values)
    if a.size < 2:
        return 0.0
    return float(math.sqrt(np.mean(np.diff(a) ** 2) / 2))


def change_points(values, penalty: float | None = None, min_size: int = 2) -> list[int]:
    """Positions where a new segment of ``values`` starts (ruptures' PELT, model "l2").

    The default penalty is ``4 * sigma**2 * log(n)`` with ``sigma`` the series' noise
    (``noise_sigma``): on simulated normal noise, a flat series of 12 gives a false change 4 %
    of the time (none at 40 or more), and a step of 3 sigma in the middle is found at the step
    about 80 % of the time. A series without noise splits at every change of level."""
    import ruptures

    a = finite(values)
    n = a.size
    if n < 2 * min_size or np.all(a == a[0]):
        return []
    if penalty is None:
        sigma = noise_sigma(a)
        if sigma == 0:
            sigma = 1e-6 * (float(np.max(np.abs(a))) or 1.0)
        penalty = 4.0 * sigma**2 * math.log(n)
    # PELT with ruptures' C implementation of the l2 cost (the linear kernel's): the same
    # segmentation as ``ruptures.Pelt(model="l2", jump=1)``, a hundred times faster on a
    # year of nights, where nothing prunes and PELT weighs about n**2/2 segments.
    algo = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(a.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=penalty)[:-1]]
