"""What a lifecycle scenario's client does around ``stop()``, inside a worker's cycle.

The cycle (``rig.worker.cycle``) runs its load as always; a client behaviour then sets the scene for
the stop and records what it saw, in the cycle's own row (``CycleRow``), never in a file of its
own:

- ``stop-in-flight`` (L0_lifecycle ``test_shutdown_dynamic``): ``IN_FLIGHT`` requests submitted
  at once, ``stop()`` called while the first executes; each one answered, failed or lost (no
  answer nor error by the end of the cycle): ``in_flight``, ``in_flight_answered``,
  ``in_flight_failed``, ``in_flight_lost``.
- ``stop-while-loading`` (core#324): the models unloaded (by the cycle), loaded again from a
  thread, and ``stop()`` called while a load is still running (``loading_at_stop``).
- ``refused-request``: ``REFUSED`` requests per model with an input the model does not have,
  each refused at submission (``refused``), before the stop.
- ``memory`` (server#8218): the worker's RSS and Python allocations (tracemalloc) sampled over
  the load; their growth per 1,000 requests (``rss_per_1k_requests_b``,
  ``traced_per_1k_requests_b``) and the allocations when the load ended (``traced_bytes``).

Triton calls back on its own native threads: the counters here are plain lists and ints under
the GIL, never a gevent primitive (Locust patches the worker), and the loading thread is a
kernel thread (``rig.worker.unpatched``).
"""

from __future__ import annotations

import os
import time
import typing
from collections.abc import Sequence

import numpy as np

from rig.common import probes
from rig.worker.engines.base import Engine, EngineError
from rig.worker.unpatched import original

Client = typing.Literal[
    "none",
    "stop-in-flight",
    "stop-while-loading",
    "refused-request",
    "memory",
    "stub-killed",
    "load-missing",
    "reload-in-place",
    "exit-after-stop",  # rig.worker.clients.scenes
    "sequence-at-stop",
]  # rig.worker.clients.sequences
CLIENTS = typing.get_args(Client)
from rig.contract.spec import IN_FLIGHT, REFUSED  # noqa: E402

REFUSED_INPUT = "RIG_NO_SUCH_INPUT"
SAMPLE_EVERY_S = 0.25  # memory: how often the sampler looks


class InFlight:
    """Requests submitted just before ``stop()``, and how each ended."""

    def __init__(self) -> None:
        self.submitted = 0
        self.answered: list[int] = []
        self.failed: list[str] = []

    def submit(self, engine: Engine, models: list[str], inputs: dict, n: int) -> None:
        for i in range(n):
            model = models[i % len(models)]
            entries = inputs[model]
            try:
                engine.infer_async(model, entries[i % len(entries)], self._done)
            except EngineError as e:  # refused at once: it ended, as a failure
                self.failed.append(str(e))
            self.submitted += 1

    def _done(self, response, error) -> None:  # a core thread: no gevent, no lock
        if response is not None:
            try:
                response.release()
            except Exception:  # noqa: BLE001, S110
                pass
        if error is None:
            self.answered.append(1)
        else:
            self.failed.append(str(error))

    def ended(self) -> int:
        return len(self.answered) + len(self.failed)

    def figures(self) -> dict:
        answered, failed = len(self.answered), len(self.failed)
        out = {
            "in_flight": self.submitted,
            "in_flight_answered": answered,
            "in_flight_failed": failed,
            "in_flight_lost": max(self.submitted - answered - failed, 0),
        }
        if failed:
            first = self.failed[0]
            out["detail"] = f"{failed} request(s) in flight at stop failed: {first[:300]}"
        return out


def entry_models(engine: Engine, models: Sequence[str]) -> list[str]:
    """The models a client calls: the ensembles where the repository has any (their steps are
    theirs to call: ensemble-in-flight), else every model."""
    try:
        ensembles = [m for m in models if engine.model_metadata(m).platform == "ensemble"]
    except EngineError:
        return list(models)
    return ensembles or list(models)


def start_in_flight(engine: Engine, models: list[str], inputs: dict, n: int = IN_FLIGHT) -> InFlight:
    """Submit ``n`` requests at once, then give the first a moment to reach ``execute``."""
    flight = InFlight()
    flight.submit(engine, models, inputs, n)
    time.sleep(0.1)
    return flight


def refuse(engine: Engine, models: Sequence[str], n: int = REFUSED, timeout_s: float = 10.0) -> dict:
    """``n`` requests per model with an input no model has: each should be refused at submission.
    One that is accepted (answered) is counted apart, in the detail."""
    refused = accepted = 0
    first = None
    bad = {REFUSED_INPUT: np.ones(1, np.float32)}
    for model in models:
        for _ in range(n):
            try:
                engine.infer(model, bad, timeout_s=timeout_s).release()
                accepted += 1
            except EngineError as e:
                refused += 1
                first = first or str(e)
    out: dict = {"refused": refused}
    notes = [f"refused requests: {first[:200]}"] if first else []
    if accepted:
        notes.append(f"{accepted} request(s) with an unknown input were answered, not refused")
    if notes:
        out["detail"] = "; ".join(notes)
    return out


def load_in_thread(engine: Engine, models: list[str], wait_s: float) -> dict:
    """Load the (unloaded) models again from a kernel thread and return once a load is running (a
    model LOADING, and its stub up for a moment), or after ``wait_s``. The caller stops the server
    next; the thread goes on in the background (a load is not cancellable)."""
    deadline = time.monotonic() + wait_s
    while probes.stubs_of(os.getpid()) and time.monotonic() < deadline:  # the unloaded models' stubs gone
        time.sleep(0.01)
    box: dict = {}

    def load():
        for m in models:
            try:
                engine.load_model(m)
            except EngineError as e:
                box.setdefault("errors", []).append(str(e))
        box["done"] = time.monotonic()

    original("_thread", "start_new_thread")(load, ())
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and "done" not in box:
        if any(s == "LOADING" for s in engine.model_states().values()) and probes.stubs_of(os.getpid()):
            time.sleep(0.2)  # its initialize under way
            break
        time.sleep(0.01)
    return box


def loading(engine: Engine) -> int:
    try:
        return sum(s == "LOADING" for s in engine.model_states().values())
    except EngineError:
        return 0


class MemorySampler:
    """The worker's RSS and Python allocations over the load, sampled from a kernel thread."""

    def __init__(self) -> None:
        import tracemalloc

        self._tm = tracemalloc
        if not tracemalloc.is_tracing():
            tracemalloc.start()
        self.samples: list[tuple[float, int, int]] = []
        self._run = True
        self._done: list[int] = []
        original("_thread", "start_new_thread")(self._loop, ())

    def _sample(self) -> None:
        self.samples.append((time.monotonic(), probes.process_stats()["rss_bytes"], self._tm.get_traced_memory()[0]))

    def _loop(self) -> None:
        sleep = original("time", "sleep")  # a kernel thread: never gevent's sleep
        while self._run:
            self._sample()
            sleep(SAMPLE_EVERY_S)
        self._done.append(1)

    def finish(self, requests: int | None, seconds: float) -> dict:
        self._run = False
        deadline = time.monotonic() + 2 * SAMPLE_EVERY_S + 1
        while not self._done and time.monotonic() < deadline:
            time.sleep(0.01)
        self._sample()
        out: dict = {"traced_bytes": self.samples[-1][2]}
        # the first third is warm-up (caches, the lane's buffers): the growth is read after it
        tail = self.samples[len(self.samples) // 3 :]
        rate = (requests or 0) / seconds if seconds > 0 else 0
        if len(tail) >= 3 and rate > 0:
            t = np.array([s[0] for s in tail])
            for key, col in (("rss_per_1k_requests_b", 1), ("traced_per_1k_requests_b", 2)):
                per_s = float(np.polyfit(t - t[0], np.array([s[col] for s in tail], float), 1)[0])
                out[key] = per_s / rate * 1000
        return out


def shm_bytes() -> int | None:
    """Bytes of the files in /dev/shm now (the host's: a leak per load shows here, not in RSS)."""
    return probes.dev_shm_bytes()
