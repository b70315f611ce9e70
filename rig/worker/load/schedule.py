"""Open-loop arrival schedules: a pure function, free of Locust and gevent (importing Locust
patches the process)."""

from __future__ import annotations

import numpy as np


def arrival_times(rate: float, seconds: float, start_ns: int, arrivals: str = "poisson", seed: int = 0) -> np.ndarray:
    """Absolute CLOCK_MONOTONIC send times inside ``[start_ns, start_ns + seconds)``.

    ``constant``: one every ``1 / rate`` s, the first one gap after the start. ``poisson``: a
    seeded Poisson process conditioned on its count, ``round(rate x seconds)`` arrivals: given
    that count, a Poisson process's arrival times are independent and uniform over the span
    (their gaps exponential, bursts and lulls alike), so the schedule is as random as an
    unconditioned one, but offers exactly the rate asked for. An unconditioned draw offers
    rate x seconds +- its square root (300 +- 17 for 100/s over 3 s), which would move an
    open-loop figure and make "every scheduled request accounted for" uncheckable against the rate.
    """
    span = seconds * 1e9
    if arrivals == "constant":
        n = max(1, int(rate * seconds * 1.2) + 16)
        t = start_ns + np.cumsum(np.full(n, 1e9 / rate))
        return t[t < start_ns + span].astype(np.int64)
    n = int(round(rate * seconds))
    offsets = np.sort(np.random.default_rng(seed).uniform(0.0, span, n))
    return (start_ns + offsets).astype(np.int64)
