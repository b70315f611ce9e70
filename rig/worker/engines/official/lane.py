"""A lane over the official API: requests kept in flight on the engine's asyncio loop.

The counterpart of the capi engine's native lane (``rig/worker/engines/capi/lane.py``): a
``rig.worker.engines.base.Lane``, with ``fileno`` besides. Every
request is ``Model.async_infer``, over an ``InferenceRequest`` built once per entry of inputs
(one entry: the same inputs each time; several: request k carries entry k mod N; see
``OfficialEngine.prebuilt_request``); the per-request work runs on
the loop's OS thread, and the Locust side (greenlets on the hub) only drains latencies now and
then, woken through an eventfd. No gevent primitive is ever touched from the loop's thread.

Latency counts from the submission (closed loop) or from the scheduled time (open loop, MLPerf
LoadGen's rule), and ends once the lane has dropped the response, as the native lane's does.

A streaming (decoupled) model's requests are measured as the native lane measures them: the time
to the first response that carries data (a final response without outputs is the final flag
alone; where it alone answers, the time to it), the gaps between data responses, and how many a
request got (``stream``); from the first request where the model's config says decoupled, else
from the first response that comes before the final one, or a final one without outputs.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import time

import numpy as np

from rig.worker.crossthread import Signal
from rig.worker.engines.base import Deadlines, as_entries
from rig.worker.engines.official.errors import engine_error, scrub
from rig.worker.engines.official.responses import OutputCheck, Picker, prepare_inputs, record_memory


class OfficialLane:
    """``engine``: a started ``OfficialEngine`` (the engine makes its lanes; the lane uses its
    ``model_handle``, ``prebuilt_request``, ``infer_kwargs``, ``decoupled`` and ``loop``)."""

    kind = "asyncio"
    supports_open_loop = True
    blocking_stop = False  # stop() waits cooperatively under gevent

    def __init__(self, engine, model: str, inputs: dict[str, np.ndarray] | list[dict], in_flight: int = 1):
        self._engine = engine
        self._handle = engine.model_handle(model)
        # The requests point at these arrays: the lane keeps them for as long as it lives.
        self._arrays = [prepare_inputs(entry) for entry in as_entries(inputs)]
        sends = []
        for arrays in self._arrays:
            prebuilt = engine.prebuilt_request(self._handle, arrays)
            # One send per entry, bound once: what ``engine.infer_once`` does, without its call
            # layers (each is Python time on the loop's thread, per request).
            sends.append(
                functools.partial(self._handle.async_infer, inference_request=prebuilt, **engine.infer_kwargs)
                if prebuilt is not None
                else functools.partial(self._handle.async_infer, inputs=arrays, **engine.infer_kwargs)
            )
        if len(sends) == 1:
            self._send = sends[0]  # one entry: the send itself, nothing more per request
        else:  # request k takes entry k mod N (the loop's thread alone sends: one sequence)
            turn = itertools.cycle(sends).__next__
            self._send = lambda: turn()()  # noqa: PLW0108
        self.n_entries = len(sends)
        # where the config cannot be read, the lane notices by itself (see the module's docstring)
        self._streaming = engine.decoupled(model)
        self._first: list[int] = []
        self._gaps: list[int] = []
        self._counts: list[int] = []
        self._stream: list = []  # drained, not yet taken by ``stream``
        self.in_flight = in_flight
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._armed = True
        self._lat: list[int] = []
        # Counters only the loop's thread writes; readers keep what they have seen.
        self._submitted = self._completed = self._errors = 0
        self._issued = self._dropped = 0
        self._errors_seen = 0
        self._first_error: str | None = None
        self._messages: dict[str, int] = {}  # error message -> count (the loop's thread writes)
        self._running = False
        self._finished: Signal | None = None
        self._future = None
        self._check: OutputCheck | None = None
        self._bad = 0
        # Request timeouts: the requests in flight by number with their start (the loop's thread
        # alone touches these), those already counted as timeouts (the per-request path reads
        # the two directly: no call more per request).
        self._deadlines = Deadlines()
        self._sent = self._deadlines.sent
        self._expired = self._deadlines.expired
        self._seq = 0

    def set_request_timeout(self, seconds: float) -> None:
        """A request with no final response ``seconds`` after its submission counts once as a
        timeout (an error too); its late end, if it comes, counts nothing. 0: never. Before start."""
        self._deadlines.set_timeout(seconds)

    def set_check(self, check: dict | None) -> None:
        """Hold every response to a reference output (see ``rig.worker.outputs.reference_output``)."""
        self._check = OutputCheck(check) if check else None

    def counters(self) -> dict[str, int]:
        return {"bad_outputs": self._bad, "lost_samples": 0, "timeouts": self._deadlines.timeouts}

    async def _watch(self) -> None:
        """Count the requests past their timeout, a few times a timeout (no timer per request)."""
        deadlines = self._deadlines
        pace = min(0.05, deadlines.timeout_ns / 4e9)
        while True:
            await asyncio.sleep(pace)
            for _ in range(deadlines.expire()):
                self._fail(deadlines.message, -deadlines.timeout_ns)

    def _fail(self, message: str, latency_ns: int) -> None:
        self._errors += 1
        self._lat.append(latency_ns)  # negated: a failed request's latency
        if self._first_error is None:
            self._first_error = message
        self._messages[message] = self._messages.get(message, 0) + 1
        if self._armed:
            self._armed = False
            os.eventfd_write(self._fd, 1)

    # ------------------------------------------------------------ running

    def _start(self, coro_factory) -> None:
        if self._finished is not None and not self._finished.wait(0):
            raise RuntimeError("the lane is already running")
        self._running = True
        self._finished = Signal()
        finished = self._finished

        async def run():
            watch = asyncio.get_running_loop().create_task(self._watch()) if self._deadlines.timeout_ns else None
            try:
                await coro_factory()
            finally:
                if watch is not None:
                    watch.cancel()
                finished.set()

        self._future = self._engine.loop().submit(run())

    def start_closed(self) -> None:
        """``in_flight`` requests outstanding, each sent again as soon as it completes."""

        async def closed():  # each slot one coroutine for all its requests (one fewer per request)
            if not self._running:  # stopped before the loop got to it
                return
            await asyncio.gather(*(self._request(time.monotonic_ns(), again=True) for _ in range(self.in_flight)))

        self._start(closed)

    def start_open(self, send_times_ns: np.ndarray, max_in_flight: int = 4096) -> None:
        """One request at each absolute time (``time.monotonic_ns()`` clock, sorted). A send
        that would exceed ``max_in_flight``, or that the stop overtakes, is counted dropped."""
        times = [int(t) for t in np.asarray(send_times_ns, dtype=np.int64)]

        async def open_loop():
            pending: set = set()
            loop = asyncio.get_running_loop()
            for i, t in enumerate(times):
                delay = (t - time.monotonic_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if not self._running:
                    self._dropped += len(times) - i
                    break
                if len(pending) >= max_in_flight:
                    self._dropped += 1
                    continue
                self._issued += 1
                task = loop.create_task(self._request(t))
                pending.add(task)
                task.add_done_callback(pending.discard)
            if pending:
                await asyncio.wait(pending)

        self._start(open_loop)

    async def _request(self, t0: int, again: bool = False) -> None:
        """One request, sent at ``t0``; with ``again`` (a closed-loop slot), the next as soon as it is
        done, for as long as the lane runs: one coroutine for all of a slot's requests."""
        while True:
            self._submitted += 1
            self._seq += 1
            n = self._seq
            self._sent[n] = time.monotonic_ns()
            try:  # refused at submission: bad input, unknown model
                iterator = self._send()
            except Exception as e:  # noqa: BLE001 - as engine.call: an EngineError, nothing kept
                response, error = None, engine_error(e)
                scrub(e)
            else:  # responses.pick_async, inline (one coroutine less per request), ending at the
                # response flagged final instead of asking the iterator once more for its
                # StopAsyncIteration (a coroutine and an exception per request); an iterator whose
                # responses carry no flag is walked to its end.
                picker = Picker()
                anext = iterator.__anext__
                n_data = 0  # responses with data so far (streaming: also their times)
                t_prev = 0  # the previous data response's time (set with the first)
                try:
                    while True:
                        response = await anext()
                        final = getattr(response, "final", False)
                        if final and not n_data and not self._streaming and response.outputs:
                            pass  # one response with data, flagged final: the latency says it all
                        elif getattr(response, "error", None) is None and (not final or response.outputs):
                            # a data response of a stream (not the final flag alone)
                            t = time.monotonic_ns()
                            if not n_data:
                                t_first = t
                            elif n not in self._expired:  # a timed-out request counts no more
                                self._gaps.append(t - t_prev)
                            t_prev = t
                            n_data += 1
                            self._streaming = self._streaming or not final
                        else:
                            # an error response, or the final flag alone (which only a decoupled model sends)
                            self._streaming = self._streaming or getattr(response, "error", None) is None
                        picker.take(response)
                        response = None
                        if final:
                            break
                except StopAsyncIteration:
                    pass
                except Exception as e:  # noqa: BLE001 - older iterators raise the response's error
                    picker.raised(e)
                response, error = picker.result()
            if error is None:
                record_memory(response)
                if self._check is not None and not self._check(response):
                    self._bad += 1
            response = None
            t1 = time.monotonic_ns()
            del self._sent[n]
            if n in self._expired:  # counted as a timeout already: its late end counts nothing
                self._expired.discard(n)
            elif error is None:
                self._completed += 1
                self._lat.append(t1 - t0)
                if self._streaming:
                    self._first.append((t_first if n_data else t1) - t0)
                    self._counts.append(n_data)
                if self._armed:
                    self._armed = False
                    os.eventfd_write(self._fd, 1)
            else:
                self._fail(str(error), t0 - t1)
            if not (again and self._running):
                return
            t0 = time.monotonic_ns()

    def stop(self, timeout_s: float = 30) -> bool:
        """Stop sending and wait (cooperatively under gevent) until nothing is in flight. Requests
        still unanswered then (counted as timeouts) are let go, as a user's timeout would: their
        waits are cancelled, so the lane holds no reference to them (its own reference must not
        keep their model loaded across stop()). False if any was still in flight."""
        self._running = False
        if self._finished is None or self._finished.wait(timeout_s):
            return True
        self._future.cancel()
        self._finished.wait(5.0)
        return False

    # ------------------------------------------------------------ reading

    def drain(self) -> tuple[np.ndarray, int]:
        """Latencies (int64 ns) completed since the last drain, and the errors since then."""
        try:
            os.eventfd_read(self._fd)
        except (BlockingIOError, OSError):
            pass
        self._armed = True
        lat, self._lat = self._lat, []
        if self._first or self._gaps:
            first, self._first = self._first, []
            gaps, self._gaps = self._gaps, []
            counts, self._counts = self._counts, []
            self._stream.append((first, gaps, counts))
        errors = self._errors
        new, self._errors_seen = errors - self._errors_seen, errors
        return np.asarray(lat, dtype=np.int64), new

    def stream(self):
        """A streaming model's figures of the requests drained since the last call: first
        response (ns), gaps (ns), data responses per answered request; None where none streamed."""
        parts, self._stream = self._stream, []
        if not parts:
            return None
        return tuple(np.asarray([v for p in parts for v in p[i]], dtype=np.int64) for i in range(3))

    def stats(self) -> dict[str, int]:
        return {
            "submitted": self._submitted,
            "completed": self._completed,
            "errors": self._errors,
            "timeouts": self._deadlines.timeouts,
            "in_flight": len(self._sent),
            "issued": self._issued,
            "dropped": self._dropped,
            "slots": self.in_flight,
        }

    def fileno(self) -> int:
        return self._fd

    def first_error(self) -> str | None:
        return self._first_error

    def error_messages(self) -> dict[str, int]:
        return dict(self._messages)

    def close(self, timeout_s: float = 30) -> bool:
        stopped = self.stop(timeout_s)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        return stopped
