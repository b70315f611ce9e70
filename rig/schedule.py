"""Open-loop arrival schedules: a pure function, free of Locust and gevent (importing Locust
patches the process)."""

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
