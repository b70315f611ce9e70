"""Pure functions of load generation, free of Locust and gevent (importing Locust patches the
process): open-loop arrival schedules and perf_analyzer's stability rule."""

from __future__ import annotations

import numpy as np


def arrival_times(rate: float, seconds: float, start_ns: int, arrivals: str = "poisson",
                  seed: int = 0) -> np.ndarray:
    """Absolute CLOCK_MONOTONIC send times: seeded Poisson (exponential gaps) or constant."""
    n = max(1, int(rate * seconds * 1.2) + 16)
    if arrivals == "constant":
        gaps = np.full(n, 1e9 / rate)
    else:
        gaps = np.random.default_rng(seed).exponential(1e9 / rate, n)
    t = start_ns + np.cumsum(gaps)
    return t[t < start_ns + seconds * 1e9].astype(np.int64)


def stable(rows: list[dict], n: int = 3, pct: float = 10.0) -> bool | None:
    """perf_analyzer's rule: the last ``n`` windows' throughput and p50 within ``pct`` % of their mean."""
    if len(rows) < n:
        return None
    last = rows[-n:]
    for key in ("throughput", "p50_us"):
        vals = [r[key] for r in last if r.get(key) is not None]
        if len(vals) < n:
            return False
        mean = sum(vals) / n
        if mean <= 0 or any(abs(v - mean) / mean * 100 > pct for v in vals):
            return False
    return True
