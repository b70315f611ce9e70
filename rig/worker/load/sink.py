"""The sink: one greenlet drains every lane now and then into the current window and into
Locust's own stats (percentiles, CSV history, web UI)."""

from __future__ import annotations

import gevent
import numpy as np
from locust.env import Environment

from rig.common.text import top_messages
from rig.worker.engines.base import EngineError, Lane
from rig.worker.load.locust_api import log_to_locust
from rig.worker.load.windows import Window

# How often the sink's pump drains every lane. A window boundary drains every lane itself, so
# the pace decides no window's figures: only how fresh Locust's stats are, and how often the main
# thread wakes. Each wake takes a core from the server for a moment: at 100 Hz the rig's p99 at 2
# in flight was 4x perf_analyzer's (1.1-1.3 ms against 0.27), at 5 Hz level with it (0.26-0.30 ms;
# bench, capi, numpy, 2-core VM). A drain costs the main thread about 1 ms at 8 lanes, mostly per
# lane and per call (ctypes, counters, Locust's entries), not per request: at 1 Hz the windows'
# drains cost a fifth as much (issue 54: docs/measurements/speed.md, "The rig's own tail").
# One greenlet for all lanes: a greenlet per user, waking on each lane's eventfd, cost the
# official engine a sixth of its throughput at 4 users.
DRAIN_PACE_S = 1.0
_EMPTY = np.empty(0, dtype=np.int64)


class Sink:
    """Where lanes' completions go: the current window's histogram and Locust's stats. One pump
    greenlet drains every lane each ``DRAIN_PACE_S``; a window boundary drains them all first,
    so a completion lands in the window in which it completed (give or take the moment the
    boundary's drain takes)."""

    def __init__(self, env: Environment | None = None):
        self.window: Window | None = None
        self.env = env
        self.lanes: dict = {}  # lane -> model name
        self.total = 0
        self.errors = 0  # failed requests, and tasks that raised
        self.task_errors = 0  # of which tasks that raised (their request, if any, completed)
        self.bad_outputs = 0
        self.timeouts = 0  # of the errors, requests with no final response in time
        self.first_error: str | None = None
        self.kinds: set[str] = set()  # which lanes ran: native, asyncio, python, tasks
        self._seen: dict = {}  # lane -> its counters at the last take
        self._messages: dict = {}  # lane -> its error messages and their counts, so far
        self._pump = None

    def summary(self, wall_s: float, rows: list[dict]) -> dict:
        return {
            "requests": self.total + self.errors - self.task_errors,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "bad_outputs": self.bad_outputs,
            "lane": self.lane_label(),
            "throughput": self.total / wall_s if wall_s > 0 else None,
            "detail": self.first_error,
            "error_messages": top_messages(self._messages.values()),
            "windows": rows,
        }

    def lane_label(self) -> str | None:
        return ",".join(sorted(self.kinds)) or None

    def add(self, lane: Lane, name: str) -> None:
        self.lanes[lane] = name
        self.kinds.add(lane.kind)

    def remove(self, lane) -> None:
        name = self.lanes.get(lane)
        if name is not None:
            self.take(lane, name)
            del self.lanes[lane]
            self._seen.pop(lane, None)

    def take(self, lane, name: str) -> None:
        self._record([(lane, name, *self._drain(lane))])

    def _drain(self, lane: Lane) -> tuple[np.ndarray, int, np.ndarray | None, tuple | None]:
        """One lane's news since the last drain: successes' latencies, errors, failures' latencies,
        a streaming model's figures (``lane.stream()``, or None); its counters (bad outputs, lost
        samples) go into the totals and the window."""
        lat, errors = lane.drain()
        stream = lane.stream()
        failed = None
        if errors:
            self.first_error = self.first_error or lane.first_error()
            self._messages[lane] = lane.error_messages()
        # Failed requests' latencies come negated, and not always in the drain that counts
        # their error (a lane counts the error a moment before it records the latency).
        if lat.size and lat.min() < 0:
            failed, lat = -lat[lat < 0], lat[lat >= 0]
        self.total += int(lat.size)
        self.errors += errors
        counters = lane.counters()
        seen = self._seen.get(lane, {})
        delta = {k: v - seen.get(k, 0) for k, v in counters.items()}
        self._seen[lane] = counters
        self.bad_outputs += delta.get("bad_outputs", 0)
        self.timeouts += delta.get("timeouts", 0)
        if self.window is not None:
            self.window.bad_outputs += delta.get("bad_outputs", 0)
            self.window.timeouts += delta.get("timeouts", 0)
            self.window.lost_samples += delta.get("lost_samples", 0)
        if errors and self.env is not None:
            error = EngineError(lane.first_error() or "error")
            for _ in range(errors):
                self.env.events.request.fire(
                    request_type="infer",
                    name=self.lanes.get(lane, "infer"),
                    response_time=None,
                    response_length=0,
                    exception=error,
                    context=None,
                )
        return lat, errors, failed, stream

    def _record(self, drained: list) -> None:
        """Several lanes' drains at once: one pass into the window's histogram, one into Locust's
        stats per model (per lane, that work was most of the pump's time on the main thread,
        which shares the cores with the server)."""
        lats = [d[2] for d in drained if d[2].size]
        fails = [d[4] for d in drained if d[4] is not None and d[4].size]
        streams = [d[5] for d in drained if d[5] is not None]
        if self.window is not None:
            self.window.record(
                np.concatenate(lats) if lats else _EMPTY,
                sum(d[3] for d in drained),
                np.concatenate(fails) if fails else None,
            )
            if streams:
                self.window.record_stream(*(np.concatenate([s[i] for s in streams]) for i in range(3)))
        if self.env is not None and lats:
            by_name: dict = {}
            for _, name, lat, *_ in drained:
                if lat.size:
                    by_name.setdefault(name, []).append(lat)
            for name, parts in by_name.items():
                log_to_locust(self.env.stats, name, np.concatenate(parts) / 1e6)

    def task_error(self, message: str) -> None:
        """A task of a user's locustfile raised (a failed output check, say): an error of the run."""
        self.errors += 1
        self.task_errors += 1
        self.first_error = self.first_error or message
        tasks = self._messages.setdefault("tasks", {})
        tasks[message] = tasks.get(message, 0) + 1
        if self.window is not None:
            self.window.errors += 1

    def take_all(self) -> None:
        self._record([(lane, name, *self._drain(lane)) for lane, name in list(self.lanes.items())])

    def switch(self, window: Window | None) -> Window | None:
        """Drain every lane into the current window, then make ``window`` current; returns the
        window closed."""
        self.take_all()
        old, self.window = self.window, window
        return old

    def start_pump(self) -> None:
        def pump():
            while True:
                gevent.sleep(DRAIN_PACE_S)
                self.take_all()

        self._pump = gevent.spawn(pump)

    def stop_pump(self) -> None:
        if self._pump is not None:
            self._pump.kill()
            self._pump = None
        self.take_all()
