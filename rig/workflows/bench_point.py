"""A point of a `rig bench` sweep (``Point``): the type both sides of a sweep measure at, the rig's
(``rig.workflows.bench``) and perf_analyzer's (``rig.workflows.bench_pa``), in a module of its own so
that neither of the two imports the other back."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Point:
    """One measurement of a sweep: its cycle number, the load (requests in flight in a closed
    loop, arrivals per second in an open one) and the instance count (None: the model's own)."""

    cycle: int
    load: float
    closed: bool
    instances: int | None
