"""Lanes: what keeps requests in flight for one Locust user, and what the sink drains.

Every lane is a ``rig.worker.engines.base.Lane`` (the protocol says what each member does). The
engine's own lane is the fast path and lives with its engine (capi: native C,
``rig/worker/engines/capi/lane.py``; tritonserver: its asyncio loop, ``rig/worker/engines/official/lane.py``);
here are the two the load side supplies: ``PyLane``, the generic one over
``Engine.infer_async`` for an engine without its own (closed loop only), and ``TaskLane``, which
records the requests that a locustfile's own tasks send one at a time through
``TritonUser.infer``.
"""

from __future__ import annotations

import itertools
import time

import gevent
import numpy as np

from rig.worker.engines.base import Deadlines, Engine, EngineError, Lane, as_entries, open_loop_unsupported
from rig.worker.outputs import output_is


class PyLane:
    """Closed-loop lane over ``Engine.infer_async`` (slower; for engines without the fast path).
    ``inputs``: one entry (a dict name -> array), or a list of them: request k carries entry
    k mod N."""

    kind = "python"
    supports_open_loop = False
    blocking_stop = False  # stop() waits cooperatively

    def __init__(self, engine: Engine, model: str, inputs: dict | list[dict], in_flight: int = 1):
        self.engine, self.model, self.in_flight = engine, model, in_flight
        self.entries = as_entries(inputs)
        self.inputs = self.entries[0]
        # Streaming measures, where the engine reports each response's arrival (capi: ``times``):
        # from the start for a decoupled model, else from the first request with more than one
        # response or none (the final flag alone).
        self._times = engine.streams
        self._streaming = self._times and engine.decoupled(model)
        self._first: list[int] = []
        self._gaps: list[int] = []
        self._counts: list[int] = []
        self._stream: list = []
        self._check = None
        self._bad = 0
        self._lat: list[int] = []
        self._errors = 0  # since the last drain
        self._failed = 0  # since the lane was made
        self._completed = 0
        self._first_error = None
        self._messages: dict[str, int] = {}
        self._running = False
        self._outstanding = 0
        self._deadlines = Deadlines()  # the requests in flight by number, and their timeouts
        self._next = 0

    def set_request_timeout(self, seconds: float) -> None:
        """See ``Lane``: scanned at each ``drain`` and while stopping."""
        self._deadlines.set_timeout(seconds)

    def set_check(self, check: dict | None) -> None:
        self._check = check

    def _expire(self) -> None:
        """Count the requests past their timeout (from ``drain``: no timer per request)."""
        for _ in range(self._deadlines.expire()):
            self._lat.append(-self._deadlines.timeout_ns)  # negated: a failed request, timed to its timeout
            self._fail(self._deadlines.message)

    def _submit(self):
        t0 = time.monotonic_ns()
        self._outstanding += 1
        n = self._next = self._next + 1
        self._deadlines.sent[n] = t0

        times = [] if self._times else None

        def done(response, error, t0=t0, n=n, times=times):
            if not self._deadlines.end(n):  # already counted as a timeout
                if response is not None:
                    response.release()
                self._outstanding -= 1
                if self._running:
                    self._submit()
                return
            if error is not None:
                self._lat.append(t0 - time.monotonic_ns())  # negated: a failed request
                self._fail(str(error))
            else:
                if self._check is not None and times != []:  # the final flag alone has no output to check
                    try:
                        ok = output_is(self._check, response.outputs())
                    except EngineError:
                        ok = False
                    self._bad += 0 if ok else 1
                response.release()
                t1 = time.monotonic_ns()
                self._lat.append(t1 - t0)  # the clock stops after the release
                self._completed += 1
                if times is not None and (self._streaming or len(times) != 1):
                    self._streaming = True
                    self._first.append((times[0] if times else t1) - t0)
                    self._gaps.extend(b - a for a, b in itertools.pairwise(times))
                    self._counts.append(len(times))
            self._outstanding -= 1
            if self._running:  # after an error too: the lane keeps its requests in flight
                self._submit()

        entries = self.entries
        try:
            if times is not None:
                self.engine.infer_async(self.model, entries[(n - 1) % len(entries)], done, times=times)
            else:
                self.engine.infer_async(self.model, entries[(n - 1) % len(entries)], done)
        except EngineError as e:
            self._deadlines.sent.pop(n, None)
            self._outstanding -= 1
            self._fail(str(e))

    def _fail(self, message: str) -> None:
        self._errors += 1
        self._failed += 1
        self._first_error = self._first_error or message
        self._messages[message] = self._messages.get(message, 0) + 1

    def error_messages(self) -> dict[str, int]:
        return dict(self._messages)

    def counters(self) -> dict[str, int]:
        return {"bad_outputs": self._bad, "lost_samples": 0, "timeouts": self._deadlines.timeouts}

    def stats(self) -> dict[str, int]:
        return {
            "submitted": self._next,
            "completed": self._completed,
            "errors": self._failed,
            "timeouts": self._deadlines.timeouts,
            "in_flight": self._outstanding,
            "issued": 0,
            "dropped": 0,
            "slots": self.in_flight,
        }

    def start_closed(self) -> None:
        self._running = True
        for _ in range(self.in_flight):
            self._submit()

    def start_open(self, send_times_ns: np.ndarray, max_in_flight: int = 4096) -> None:
        raise open_loop_unsupported(self)

    def stop(self, timeout_s: float = 30) -> bool:
        self._running = False
        deadline = time.monotonic() + timeout_s
        while self._outstanding > len(self._deadlines.expired) and time.monotonic() < deadline:
            gevent.sleep(0.001)
            self._expire()
        return self._outstanding == 0

    def drain(self):
        self._expire()
        lat, self._lat = self._lat, []
        errors, self._errors = self._errors, 0
        if self._first or self._gaps:
            first, self._first = self._first, []
            gaps, self._gaps = self._gaps, []
            counts, self._counts = self._counts, []
            self._stream.append((first, gaps, counts))
        return np.asarray(lat, dtype=np.int64), errors

    def stream(self):
        """See the module's docstring: first responses, gaps, data responses per request."""
        parts, self._stream = self._stream, []
        if not parts:
            return None
        return tuple(np.asarray([v for p in parts for v in p[i]], dtype=np.int64) for i in range(3))

    def first_error(self):
        return self._first_error

    def close(self, timeout_s: float = 30):
        return self.stop(timeout_s)


class TaskLane:
    """Requests sent by a user's own tasks: each recorded by the task's greenlet when it ends.
    The tasks send, time and check their own requests: starting, the timeout and the check are
    nothing here."""

    in_flight = 1
    kind = "tasks"
    supports_open_loop = False
    blocking_stop = False

    def __init__(self):
        self._lat: list[int] = []
        self._errors = 0
        self._completed = self._failed = 0
        self._timeouts = 0
        self._first_error: str | None = None
        self._messages: dict[str, int] = {}

    def set_request_timeout(self, seconds: float) -> None:
        pass  # ``TritonUser.infer`` times its request out itself

    def set_check(self, check: dict | None) -> None:
        pass  # a task checks what ``infer`` returns itself

    def start_closed(self) -> None:
        pass  # the user's tasks send

    def start_open(self, send_times_ns: np.ndarray, max_in_flight: int = 4096) -> None:
        raise open_loop_unsupported(self)

    def record(self, latency_ns: int) -> None:
        self._lat.append(latency_ns)
        self._completed += 1

    def fail(self, message: str, latency_ns: int | None = None, timeout: bool = False) -> None:
        self._errors += 1
        self._failed += 1
        self._timeouts += timeout
        self._first_error = self._first_error or message
        self._messages[message] = self._messages.get(message, 0) + 1
        if latency_ns is not None:
            self._lat.append(-max(1, latency_ns))  # negated: a failed request

    def error_messages(self) -> dict[str, int]:
        return dict(self._messages)

    def counters(self) -> dict[str, int]:
        return {"timeouts": self._timeouts}

    def stats(self) -> dict[str, int]:
        return {
            "submitted": self._completed + self._failed,
            "completed": self._completed,
            "errors": self._failed,
            "timeouts": self._timeouts,
            "in_flight": 0,
            "issued": 0,
            "dropped": 0,
            "slots": self.in_flight,
        }

    def drain(self):
        lat, self._lat = self._lat, []
        errors, self._errors = self._errors, 0
        return np.asarray(lat, dtype=np.int64), errors

    def stream(self) -> None:
        return None  # a task's request is one response as far as the lane knows

    def first_error(self):
        return self._first_error

    def stop(self, timeout_s: float = 30) -> bool:
        return True

    def close(self, timeout_s: float = 30) -> bool:
        return True


def stop_lane(lane: Lane, timeout_s: float = 30) -> bool:
    """Stop a lane and wait for its requests, without blocking the hub: a lane whose ``stop``
    waits in native code (``blocking_stop``) runs it on a thread of the hub's pool."""
    if lane.blocking_stop:
        return gevent.get_hub().threadpool.apply(lane.stop, (timeout_s,))
    return lane.stop(timeout_s)


def make_lane(
    engine: Engine, model: str, inputs: dict | list[dict], in_flight: int, request_timeout: float = 0.0
) -> Lane:
    """The engine's own lane (capi: native; tritonserver: its asyncio loop), else ``PyLane``;
    a request unanswered after ``request_timeout`` seconds counts as a timeout (0: never).
    ``inputs``: one entry (a dict name -> array), or a list of them cycled request by request."""
    lane = engine.lane(model, inputs, in_flight) or PyLane(engine, model, inputs, in_flight=in_flight)
    if request_timeout:
        lane.set_request_timeout(request_timeout)
    return lane
