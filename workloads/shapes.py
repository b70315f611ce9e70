"""Load shapes for the rig's workloads: Locust ``LoadTestShape`` classes, nothing else.

Each shape gets the run's ``users`` (the peak) and ``seconds`` (its length) and returns
``(users, spawn_rate)`` per tick, or None when done. Closed loop: users x in-flight requests.
"""

from __future__ import annotations

from locust import LoadTestShape


class Steady(LoadTestShape):
    """All users from the start, for the whole run (``soak`` is the same, meant to be long)."""

    def __init__(self, users: int, seconds: float):
        super().__init__()
        self.users, self.seconds = users, seconds

    def tick(self):
        return (self.users, self.users * 100) if self.get_run_time() < self.seconds else None


class Ramp(Steady):
    """From one user to ``users``, linearly over the first 80 % of the run, then hold."""

    def tick(self):
        t = self.get_run_time()
        if t >= self.seconds:
            return None
        frac = min(1.0, t / (0.8 * self.seconds))
        return (max(1, round(1 + frac * (self.users - 1))), 100)


class Step(Steady):
    """Four equal steps up to ``users``."""

    def tick(self):
        t = self.get_run_time()
        if t >= self.seconds:
            return None
        step = min(3, int(4 * t / self.seconds))
        return (max(1, round(self.users * (step + 1) / 4)), 100)


class Spike(Steady):
    """A quarter of ``users``, with all of them in the middle fifth of the run."""

    def tick(self):
        t = self.get_run_time()
        if t >= self.seconds:
            return None
        base = max(1, self.users // 4)
        return (self.users if 0.4 * self.seconds <= t < 0.6 * self.seconds else base, 100)


SHAPES = {"steady": Steady, "soak": Steady, "ramp": Ramp, "step": Step, "spike": Spike}


def make(name: str, users: int, seconds: float) -> LoadTestShape:
    try:
        cls = SHAPES[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}: choose one of {', '.join(SHAPES)}") from None
    return cls(users=users, seconds=seconds)
