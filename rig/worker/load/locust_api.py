"""Locust behind a fence: every use the rig makes of Locust's private or internal API, in one
module, and ``check()``, which holds the installed Locust to all of it.

Locust's public API (``User``, ``LoadTestShape``, ``Environment`` and its runners' ``start``,
``stop`` and ``quit``, ``events``, custom messages, ``task``, ``constant``) is used where it is
needed. What the rig needs beyond it is here, each use named with the feature that depends on
it (``FEATURES``), so that a new Locust that changes one fails ``tests/worker/test_locust_fence.py``
and ``rig doctor`` with the name of what changed, not a run with odd figures. The versions
checked are pyproject.toml's pin; docs/dev/testing.md says how to check a new one.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import logging
import time
from collections.abc import Callable

import locust
import locust.runners
import locust.stats
import numpy as np

from rig.worker.load.windows import distinct

FEATURES = {
    "stats": "lane users' requests in Locust's stats, CSV history and web UI (rig.worker.load.sink)",
    "warning": "worker logs without Locust's spawn-rate warning (rig.worker.load.runner)",
    "web": "Locust's web UI of a worker (--locust-web-port)",
    "csv": "Locust's CSV history in the log folder (locust-cNNNNNN_stats.csv)",
    "locustfile": "loading a workload's locustfile (--workload)",
    "connect": "a fleet node's 30 s wait for its master (rig soak --locust-master)",
    "gate": "fleet nodes running users only in their own round (rig.worker.load.node.NodeLink)",
    "leave": "a fleet node's last stats and its leaving the master (rig.worker.load.node.NodeLink.leave)",
    "workers": "rig fleet noticing a lost node and ending a round's load (rig.commands.fleet)",
}


# ---------------------------------------------------------------- stats (rig.worker.load.sink)


def _locust_buckets(ms: np.ndarray) -> np.ndarray:
    """``locust.stats.bucket_response_time`` over an array (about two significant digits)."""
    return np.where(
        ms < 100,
        np.round(ms),
        np.where(ms < 1000, np.round(ms, -1), np.where(ms < 10000, np.round(ms, -2), np.round(ms, -3))),
    ).astype(np.int64)


# Locust's bucketing as a function of its own (since a 2.43 release; before, the same rule
# inline), which a user may replace at runtime
_STOCK_BUCKETS = getattr(locust.stats, "bucket_response_time", None)


def log_to_locust(stats, name: str, ms: np.ndarray, request_type: str = "infer") -> None:
    """Record successful requests in Locust's stats (``RequestStats``) as Locust's own
    ``request`` event would, one entry and the total, but for a whole drain at once: per request
    it costs Python time on the cores the server needs. The figures are the same: count,
    sum, min/max, the per-second counts and the bucketed response times that Locust's
    percentiles, CSV history and web UI read."""
    if ms.size == 0:
        return
    now = time.time()
    second = int(now)
    bucket = getattr(locust.stats, "bucket_response_time", None)
    if bucket is _STOCK_BUCKETS:
        keys, counts = distinct(_locust_buckets(ms))
        buckets = list(zip(keys.tolist(), counts.tolist()))
    else:  # replaced at runtime by the user: honour it
        buckets = list(collections.Counter(bucket(v) for v in ms.tolist()).items())
    n, total, lo, hi = int(ms.size), float(ms.sum()), float(ms.min()), float(ms.max())
    for entry in (stats.total, stats.get(name, request_type)):
        if (
            entry.use_response_times_cache
            and entry.last_request_timestamp
            and second > int(entry.last_request_timestamp)
        ):
            entry._cache_response_times(second - 1)
        entry.num_requests += n
        entry.num_reqs_per_sec[second] += n
        entry.last_request_timestamp = now
        entry.total_response_time += total
        entry.min_response_time = lo if entry.min_response_time is None else min(entry.min_response_time, lo)
        entry.max_response_time = max(entry.max_response_time, hi)
        for key, count in buckets:
            entry.response_times[key] += count


# ---------------------------------------------------------------- the local runner (rig.worker.load.runner)


class _AtOnce(logging.Filter):
    """Drops Locust's warning that a spawn rate above 100 "is known to sometimes cause issues":
    the rig starts its users at once on purpose, and the warning led every worker's log, so that a
    crashed worker's detail opened with it instead of with the reason (seen: a Python-backend abort,
    ``boost::interprocess::lock_exception``, hidden behind it in the console)."""

    WORDS = "spawn rate is very high"

    def filter(self, record: logging.LogRecord) -> bool:
        return self.WORDS not in record.getMessage()


def quiet_spawn_rate_warning() -> None:
    logger = logging.getLogger("locust.runners")
    if not any(isinstance(f, _AtOnce) for f in logger.filters):
        logger.addFilter(_AtOnce())


def give_web_ui_defaults(env) -> None:
    """The web UI reads Locust's options: give it the defaults (never the worker's own argv)."""
    from locust.argument_parser import default_args_dict

    env.parsed_options = argparse.Namespace(**default_args_dict())


def csv_writer(env, prefix: str):
    """Locust's CSV writer of ``env``'s stats with the full history; run it in a greenlet, and
    ``close_files()`` at the end."""
    from locust.stats import StatsCSVFileWriter

    return StatsCSVFileWriter(env, [], prefix, full_history=True)


def load_locustfile(path: str):
    """``(user classes by name, shape instances)`` of a locustfile, as ``locust -f`` loads it."""
    from locust.util.load_locustfile import load_locustfile as load

    return load(path)


# ---------------------------------------------------------------- a fleet node (rig.contract.fleet)


def shorten_connect_retries(count: int = 6) -> None:
    """A worker runner tries its master ``count`` times (about 5 s each), not Locust's 60."""
    locust.runners.CONNECT_RETRY_COUNT = count


def gate_spawns(runner, is_open: Callable[[], bool]) -> None:
    """A worker runner starts the users its master sends only while ``is_open()``; otherwise it
    reports its spawning complete at once, with the users it has (none)."""
    start_worker = runner.start_worker

    def gated(user_classes_count, **kwargs):
        if is_open():
            return start_worker(user_classes_count, **kwargs)
        runner.spawning_complete(sum(runner.user_classes_count.values()))

    runner.start_worker = gated


def leave_master(env, runner) -> None:
    """A worker's last stats to its master (for the master's cross-check), its ``quit`` message
    (the ``quitting`` event, in reverse, as Locust's own shutdown fires it), and its end."""
    try:
        runner._send_stats()
    except Exception:  # noqa: BLE001, S110
        pass
    env.events.quitting.fire(environment=env, reverse=True)
    runner.quit()


# ---------------------------------------------------------------- the master (rig.commands.fleet)


def active_workers(runner) -> int:
    """Workers connected and not lost: ready, spawning or running."""
    c = runner.clients
    return len(c.ready) + len(c.running) + len(c.spawning)


def worker_lost(runner, client_id: str) -> bool:
    """The worker is gone, or its heartbeats have stopped (Locust's ``missing``)."""
    client = runner.clients.get(client_id)
    return client is None or client.state == locust.runners.STATE_MISSING


def worker_connected(runner, client_id: str) -> bool:
    return client_id in runner.clients


def stop_load(runner) -> None:
    """The master stops driving users without telling its workers to stop (each ends its own
    round itself)."""
    runner.stop(send_stop_to_client=False)


# ---------------------------------------------------------------- the check


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _same_as_locust() -> bool:
    """``log_to_locust`` leaves an entry as Locust's own ``log_request`` does, request by request."""
    from locust.stats import RequestStats

    ms = np.array([0.4, 3.0, 3.2, 47.0, 180.0, 4321.0])
    ours, theirs = RequestStats(), RequestStats()
    log_to_locust(ours, "m", ms)
    for v in ms.tolist():
        theirs.log_request("infer", "m", v, 0)
    a, b = ours.get("m", "infer"), theirs.get("m", "infer")
    return (
        all(
            getattr(a, k) == getattr(b, k)
            for k in ("num_requests", "total_response_time", "min_response_time", "max_response_time")
        )
        and dict(a.response_times) == dict(b.response_times)
        and ours.total.num_requests == len(ms)
        and sum(a.num_reqs_per_sec.values()) == sum(b.num_reqs_per_sec.values()) == len(ms)
    )


def _probes() -> list[tuple[str, str, Callable[[], bool]]]:
    """(feature, what the rig relies on, a probe that is True while it holds)."""
    from locust.event import EventHook
    from locust.runners import MasterRunner, Runner, WorkerNode, WorkerNodes, WorkerRunner
    from locust.stats import RequestStats, StatsCSVFileWriter, StatsEntry

    def entry_fields() -> bool:
        entry = RequestStats().get("m", "infer")
        return all(
            hasattr(entry, k)
            for k in (
                "use_response_times_cache",
                "last_request_timestamp",
                "num_requests",
                "num_reqs_per_sec",
                "total_response_time",
                "min_response_time",
                "max_response_time",
                "response_times",
            )
        )

    def defaults() -> bool:
        from locust.argument_parser import default_args_dict

        return isinstance(default_args_dict(), dict)

    def locustfile() -> bool:
        from locust.util.load_locustfile import load_locustfile as load

        return _params(load) == ["path"]

    return [
        (
            "stats",
            "locust.stats.bucket_response_time(response_time), where there is one",
            lambda: _STOCK_BUCKETS is None or _params(_STOCK_BUCKETS) == ["response_time"],
        ),
        ("stats", "StatsEntry's fields (num_requests, num_reqs_per_sec, response_times, ...)", entry_fields),
        (
            "stats",
            "StatsEntry._cache_response_times(t)",
            lambda: _params(StatsEntry._cache_response_times) == ["self", "t"],
        ),
        ("stats", "a drain written into Locust's stats equals Locust's own log_request", _same_as_locust),
        (
            "warning",
            f"the warning {_AtOnce.WORDS!r} in locust.runners",
            lambda: _AtOnce.WORDS in inspect.getsource(locust.runners),
        ),
        ("web", "locust.argument_parser.default_args_dict()", defaults),
        (
            "csv",
            "StatsCSVFileWriter(environment, percentiles_to_report, base_filepath, full_history)",
            lambda: (
                _params(StatsCSVFileWriter.__init__)[:5]
                == ["self", "environment", "percentiles_to_report", "base_filepath", "full_history"]
                and callable(getattr(StatsCSVFileWriter, "close_files", None))
            ),
        ),
        ("locustfile", "locust.util.load_locustfile.load_locustfile(path)", locustfile),
        ("connect", "locust.runners.CONNECT_RETRY_COUNT", lambda: isinstance(locust.runners.CONNECT_RETRY_COUNT, int)),
        (
            "gate",
            "WorkerRunner.start_worker(user_classes_count, **kwargs)",
            lambda: _params(WorkerRunner.start_worker)[:2] == ["self", "user_classes_count"],
        ),
        (
            "gate",
            "WorkerRunner.spawning_complete(user_count)",
            lambda: _params(WorkerRunner.spawning_complete) == ["self", "user_count"],
        ),
        ("gate", "Runner.user_classes_count", lambda: isinstance(Runner.__dict__.get("user_classes_count"), property)),
        ("leave", "WorkerRunner._send_stats()", lambda: _params(WorkerRunner._send_stats) == ["self"]),
        ("leave", "EventHook.fire(reverse=...)", lambda: "reverse" in _params(EventHook.fire)),
        ("workers", "locust.runners.STATE_MISSING", lambda: isinstance(locust.runners.STATE_MISSING, str)),
        (
            "workers",
            "WorkerNodes.ready/running/spawning/get",
            lambda: all(hasattr(WorkerNodes, k) for k in ("ready", "running", "spawning", "get")),
        ),
        ("workers", "WorkerNode(id, state=...)", lambda: "state" in _params(WorkerNode.__init__)),
        (
            "workers",
            "MasterRunner.stop(send_stop_to_client)",
            lambda: "send_stop_to_client" in _params(MasterRunner.stop),
        ),
        (
            "workers",
            "locust.rpc.Message(...).node_id",
            lambda: __import__("locust.rpc").rpc.Message("x", None, "n1").node_id == "n1",
        ),
    ]


def check() -> list[str]:
    """One line per internal of the installed Locust that the rig relies on and that has changed
    or gone, naming the rig feature that depends on it; empty when all hold."""
    problems = []
    for feature, what, probe in _probes():
        try:
            ok, why = bool(probe()), ""
        except Exception as e:  # noqa: BLE001 - a name gone, a signature changed: the problem itself
            ok, why = False, f" ({type(e).__name__}: {e})"
        if not ok:
            problems.append(
                f"Locust {locust.__version__}: {what} changed or is gone{why}; {FEATURES[feature]} depends on it"
            )
    return problems
