"""Locust-driven sustained in-process load, inside the worker that hosts the server.

Locust is used as a library: an ``Environment`` with a local runner, the workload's
``LoadTestShape``, and ``TritonUser`` subclasses whose requests go to the in-process engine (no
HTTP). A workload is a locustfile (``workloads/`` holds the built-in ones; ``--workload
FILE.py`` loads a user's). A user without tasks of its own owns a *lane*: requests kept in
flight by the engine's fast path. Completions never touch the hub from Triton's threads: the
lanes collect exact latencies (ns) on their own, and one greenlet (the sink's pump) drains every
lane now and then into an HDR histogram per window and into Locust's own stats, so Locust's
percentiles, CSV history and web UI work.

Closed loop: ``users`` x ``in_flight`` requests outstanding. Open loop: a seeded Poisson (or
constant) schedule of send times; latency counts from the scheduled time (MLPerf LoadGen's rule),
so a stalled server cannot hide behind coordinated omission.

Modules: ``lanes`` (what keeps requests in flight), ``windows`` (histograms, the hub monitor),
``sink`` (the drain into windows and Locust's stats), ``users`` (``TritonUser``, locustfiles),
``runner`` (closed and open loop, the adapter for a soak cycle), ``locust_api`` (every use of
Locust's internals, and their check), ``schedule`` (open-loop send times, pure), ``node`` (a fleet
node's link to its master), ``master`` (the fleet's master: ``rig fleet``), ``check`` (a locustfile
and Locust's internals, checked in a child the parent starts). Importing
``lanes``, ``locust_api``, ``runner``, ``sink``, ``users`` or ``windows`` imports Locust or gevent
(Locust monkey-patches the process for gevent): only the worker does (and ``rig doctor``, which
checks the fence). The package imports them on first use of one of its names.
"""

_EXPORTS = {
    "lanes": ("PyLane", "TaskLane", "make_lane"),
    "runner": ("make_cycle_workload", "run_locust", "run_open"),
    "locust_api": ("log_to_locust",),
    "sink": ("DRAIN_PACE_S", "Sink"),
    "users": ("BUILTIN", "RigShape", "TritonUser", "load_workload"),
    "windows": ("HubMonitor", "Window", "record_many"),
}
__all__ = [name for names in _EXPORTS.values() for name in names]


def __getattr__(name):
    """The package's names, each imported on first use: ``rig.common.stability`` (pure) can be
    imported without Locust."""
    import importlib

    for module, names in _EXPORTS.items():
        if name in names:
            return getattr(importlib.import_module(f"rig.worker.load.{module}"), name)
    raise AttributeError(f"module 'rig.worker.load' has no attribute {name!r}")
