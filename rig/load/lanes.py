"""Lanes: what keeps requests in flight for one Locust user, and what the sink drains.

Every lane offers ``drain() -> (latencies ns, errors)``, ``first_error()``,
``error_messages()``, ``counters()`` (cumulative: ``timeouts`` and, where kept, ``bad_outputs`` and
``lost_samples``), ``stop()`` and ``close()``; a lane that measures a streaming (decoupled)
model's responses also ``stream()``: ``(first response ns, gaps ns, data responses per answered
request)`` of what its drains took since the last call, or None; a lane that sends on its own also
``set_request_timeout(seconds)``: a request unanswered by then counts once as a timeout (an error
too), and its late end, if any, counts nothing. A failed request that had a latency (one the
server answered with an error) comes out of ``drain`` negated, so that the sink keeps failed
requests' latencies apart; ``errors`` counts every failed request, with or without one. The engine's own lane is the fast path (capi: native C, ``rig/engines/capi/lane.py``;
tritonserver: its asyncio loop); ``PyLane`` serves engines without one; ``TaskLane`` records
the requests that a locustfile's own tasks send one at a time through ``TritonUser.infer``.
"""

from __future__ import annotations

import time

import gevent
import numpy as np

from rig.outputs import output_is
from rig.engines.base import Engine, EngineError, timeout_message


class PyLane:
    """Closed-loop lane over ``Engine.infer_async`` (slower; for engines without the fast path).
    ``inputs``: one entry (a dict name -> array), or a list of them: request k carries entry
    k mod N."""

    kind = "python"

    def __init__(self, engine: Engine, model: str, inputs: dict | list[dict], in_flight: int = 1):
        from rig.engines.capi.lane import entries_of

        self.engine, self.model, self.in_flight = engine, model, in_flight
        self.entries = entries_of(inputs)
        self.inputs = self.entries[0]
        # Streaming measures, where the engine reports each response's arrival (capi: ``times``):
        # from the start for a decoupled model, else from the first request with more than one
        # response or none (the final flag alone).
        self._times = bool(getattr(engine, "streams", False))
        decoupled = getattr(engine, "decoupled", None) if self._times else None
        self._streaming = bool(decoupled(model)) if decoupled is not None else False
        self._first: list[int] = []
        self._gaps: list[int] = []
        self._counts: list[int] = []
        self._stream: list = []
        self._check = None
        self._bad = 0
        self._lat: list[int] = []
        self._errors = 0
        self._timeouts = 0
        self._timeout_ns = 0
        self._first_error = None
        self._messages: dict[str, int] = {}
        self._running = False
        self._outstanding = 0
        self._sent: dict[int, int] = {}   # request number -> its submission time (ns), until it ends
        self._expired: set[int] = set()   # requests counted as timeouts, whose end is not counted again
        self._next = 0

    def set_request_timeout(self, seconds: float) -> None:
        """A request with no final response ``seconds`` after its submission counts as a timeout
        (once; its late end, if it comes, counts nothing). 0: never."""
        self._timeout_ns = int(seconds * 1e9)

    def _expire(self) -> None:
        """Count the requests past their timeout (from ``drain``: no timer per request)."""
        if not self._timeout_ns or not self._sent:
            return
        now = time.monotonic_ns()
        for n, t0 in list(self._sent.items()):
            if n not in self._expired and now - t0 >= self._timeout_ns:
                self._expired.add(n)
                self._timeouts += 1
                self._lat.append(-self._timeout_ns)  # negated: a failed request, timed to its timeout
                self._fail(timeout_message(self._timeout_ns / 1e9))

    def _submit(self):
        t0 = time.monotonic_ns()
        self._outstanding += 1
        n = self._next = self._next + 1
        self._sent[n] = t0

        times = [] if self._times else None

        def done(response, error, t0=t0, n=n, times=times):
            self._sent.pop(n, None)
            if n in self._expired:  # already counted as a timeout
                self._expired.discard(n)
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
                if times is not None and (self._streaming or len(times) != 1):
                    self._streaming = True
                    self._first.append((times[0] if times else t1) - t0)
                    self._gaps.extend(b - a for a, b in zip(times, times[1:]))
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
            self._sent.pop(n, None)
            self._outstanding -= 1
            self._fail(str(e))

    def _fail(self, message: str) -> None:
        self._errors += 1
        self._first_error = self._first_error or message
        self._messages[message] = self._messages.get(message, 0) + 1

    def error_messages(self) -> dict[str, int]:
        return dict(self._messages)

    def set_check(self, check: dict | None) -> None:
        self._check = check

    def counters(self) -> dict[str, int]:
        return {"bad_outputs": self._bad, "lost_samples": 0, "timeouts": self._timeouts}

    def start_closed(self):
        self._running = True
        for _ in range(self.in_flight):
            self._submit()

    def stop(self, timeout_s: float = 30) -> bool:
        self._running = False
        deadline = time.monotonic() + timeout_s
        while self._outstanding > len(self._expired) and time.monotonic() < deadline:
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
    """Requests sent by a user's own tasks: each recorded by the task's greenlet when it ends."""

    in_flight = 1
    kind = "tasks"

    def __init__(self):
        self._lat: list[int] = []
        self._errors = 0
        self._timeouts = 0
        self._first_error: str | None = None
        self._messages: dict[str, int] = {}

    def record(self, latency_ns: int) -> None:
        self._lat.append(latency_ns)

    def fail(self, message: str, latency_ns: int | None = None, timeout: bool = False) -> None:
        self._errors += 1
        self._timeouts += timeout
        self._first_error = self._first_error or message
        self._messages[message] = self._messages.get(message, 0) + 1
        if latency_ns is not None:
            self._lat.append(-max(1, latency_ns))  # negated: a failed request

    def error_messages(self) -> dict[str, int]:
        return dict(self._messages)

    def counters(self) -> dict[str, int]:
        return {"timeouts": self._timeouts}

    def drain(self):
        lat, self._lat = self._lat, []
        errors, self._errors = self._errors, 0
        return np.asarray(lat, dtype=np.int64), errors

    def first_error(self):
        return self._first_error

    def stop(self, timeout_s: float = 30) -> bool:
        return True

    def close(self, timeout_s: float = 30) -> bool:
        return True


def stop_lane(lane, timeout_s: float = 30) -> bool:
    """Stop a lane and wait for its requests, without blocking the hub: a lane whose ``stop``
    waits in native code runs it on a thread of the hub's pool."""
    if getattr(lane, "blocking_stop", False):
        return gevent.get_hub().threadpool.apply(lane.stop, (timeout_s,))
    return lane.stop(timeout_s)


def make_lane(engine: Engine, model: str, inputs: dict | list[dict], in_flight: int,
              request_timeout: float = 0.0):
    """The engine's own lane (capi: native; tritonserver: its asyncio loop), else ``PyLane``;
    a request unanswered after ``request_timeout`` seconds counts as a timeout (0: never).
    ``inputs``: one entry (a dict name -> array), or a list of them cycled request by request."""
    lane = engine.lane(model, inputs, in_flight) or PyLane(engine, model, inputs, in_flight=in_flight)
    if request_timeout and hasattr(lane, "set_request_timeout"):
        lane.set_request_timeout(request_timeout)
    return lane
