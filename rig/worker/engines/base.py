"""The small interface every in-process engine offers, and the options it starts a server with."""

from __future__ import annotations

import abc
import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from rig.capi.core import CoreError
from rig.common.errors import RigError
from rig.contract.engines import ModelMetadata


class EngineError(CoreError):
    """An error the core (or the binding) returned; ``code`` is Triton's error code name. A
    ``rig.capi.core.CoreError``: the capi engine loads the binding with it as its error type, so
    what the binding raises or returns is an ``EngineError`` as the core gave it."""


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """Options of one server start; each field names the C API call it maps to."""

    model_repository: str  # TRITONSERVER_ServerOptionsSetModelRepositoryPath
    backend_directory: str | None = None  # TRITONSERVER_ServerOptionsSetBackendDirectory
    # TRITONSERVER_ServerOptionsSetExitTimeout: always given (its default: the run option's)
    exit_timeout_s: int = dataclasses.field(kw_only=True)
    model_control: str = "none"  # TRITONSERVER_ServerOptionsSetModelControlMode: none|explicit|poll
    startup_models: tuple[str, ...] = ()  # TRITONSERVER_ServerOptionsSetStartupModel (explicit mode)
    model_load_retries: int = 0  # TRITONSERVER_ServerOptionsSetModelLoadRetryCount (2.4x+)
    strict_model_config: bool = True  # TRITONSERVER_ServerOptionsSetStrictModelConfig
    strict_readiness: bool = True  # TRITONSERVER_ServerOptionsSetStrictReadiness
    log_file: str | None = None  # TRITONSERVER_ServerOptionsSetLogFile
    log_verbose: int = 0  # TRITONSERVER_ServerOptionsSetLogVerbose
    backend_config: tuple[tuple[str, str, str], ...] = ()  # ...SetBackendConfig(backend, key, value)


@dataclasses.dataclass(frozen=True)
class Sequence:
    """A request's place in a sequence, for a model under the sequence batcher:
    ``TRITONSERVER_InferenceRequestSetCorrelationId`` and ``...SetFlags`` (the official API: the
    request's ``correlation_id`` and ``flags``)."""

    correlation_id: int
    start: bool = False
    end: bool = False

    @property
    def flags(self) -> int:
        """TRITONSERVER_RequestFlag: SEQUENCE_START 1, SEQUENCE_END 2."""
        return (1 if self.start else 0) | (2 if self.end else 0)


ONE_SHOT_IDS = 1 << 40  # the correlation ids of one-request sequences start here (a client's own stay below)


class Response(abc.ABC):
    """One inference response. Holding it holds the model (server#8755): release it."""

    @abc.abstractmethod
    def outputs(self) -> dict[str, np.ndarray]:
        """Copies of the outputs, safe to keep after ``release()``."""

    @abc.abstractmethod
    def output_view(self, name: str) -> np.ndarray:
        """An array over the response's own memory (DLPack in the official API): it keeps the
        response alive for as long as it lives, exactly as a user's array would."""

    @abc.abstractmethod
    def release(self) -> None:
        """Drop the engine's reference to the response (idempotent)."""


class Engine(abc.ABC):
    """One in-process Triton server, driven through some binding."""

    name: str = "?"

    def start_notes(self) -> list[str]:
        """What a started engine decided that the cycle's row should say (none by default)."""
        return []

    @abc.abstractmethod
    def start(self, options: ServerOptions) -> None:
        """Create the server (models load here in ``none`` control mode)."""

    @abc.abstractmethod
    def is_ready(self) -> bool: ...

    @abc.abstractmethod
    def model_ready(self, model: str) -> bool: ...

    @abc.abstractmethod
    def server_version(self) -> str: ...

    @abc.abstractmethod
    def model_metadata(self, model: str) -> ModelMetadata: ...

    @abc.abstractmethod
    def model_states(self) -> dict[str, str]:
        """Model name → state (READY, UNLOADING, UNAVAILABLE, ...) of every model in the repository."""

    def model_statistics(self, model: str) -> dict | None:
        """Triton's statistics of ``model`` since it loaded, every version's: the JSON message of
        ``TRITONSERVER_ServerModelStatistics`` (``rig.contract.server_stats`` reads it). None where
        the engine cannot ask; ``EngineError`` where the core refused."""
        return None

    @abc.abstractmethod
    def load_model(self, model: str) -> None: ...

    @abc.abstractmethod
    def unload_model(self, model: str) -> None: ...

    @abc.abstractmethod
    def infer(
        self, model: str, inputs: dict[str, np.ndarray], timeout_s: float = 60.0, sequence: Sequence | None = None
    ) -> Response:
        """One synchronous request; raises ``EngineError`` on an error response. ``sequence``: its
        place in a sequence (``sequence_of``)."""

    def stateful(self, model: str) -> bool:
        """Whether the model runs under the sequence batcher (``sequence_batching`` in its
        config): every request needs a correlation id. False where unknown."""
        return False

    def sequence_of(self, model: str, sequence: Sequence | None) -> Sequence | None:
        """The sequence a request goes in: the caller's, or for a stateful model a sequence of its
        own (START and END, a fresh correlation id: a load that knows nothing of sequences still
        reaches the model), else none."""
        if sequence is not None or not self.stateful(model):
            return sequence
        ids = self.__dict__.setdefault("_one_shot_ids", itertools.count(ONE_SHOT_IDS))
        return Sequence(next(ids), start=True, end=True)

    streams: bool = False
    """Whether ``infer_async`` takes ``times=``: a list each data response's arrival
    (``time.monotonic_ns()``) is appended to (the Python lane's measure of a stream)."""

    def decoupled(self, model: str) -> bool:
        """Whether the model streams (decoupled: several responses a request, then the final
        flag). False where unknown."""
        return False

    def infer_async(
        self,
        model: str,
        inputs: dict[str, np.ndarray],
        done: Callable[[Response | None, EngineError | None], Any],
        sequence: Sequence | None = None,
    ) -> None:
        """Submit one request; ``done`` is called from a native thread. Default: synchronous."""
        try:
            done(self.infer(model, inputs, sequence=sequence), None)
        except EngineError as e:
            done(None, e)

    def lane(self, model: str, inputs: dict[str, np.ndarray] | list[dict], in_flight: int) -> Lane | None:
        """The engine's own ``Lane`` for a workload (see ``rig.worker.load``), or None: then the generic
        Python lane over ``infer_async`` serves (``rig.worker.load.lanes.PyLane``)."""
        return None

    @abc.abstractmethod
    def stop(self) -> str | None:
        """``Server.stop()``: returns None when it returned cleanly, else the error's message."""

    @abc.abstractmethod
    def close(self) -> None:
        """Free the server object (after ``stop``); the engine cannot be started again."""


class Lane(Protocol):
    """What keeps requests in flight for a workload, and what the sink drains (``rig.worker.load``).

    Every lane implements all of it; a lane with nothing to do for a member does nothing, and one
    that cannot do something says so (``supports_open_loop``). The engine's own lanes live with
    their engines (capi: ``rig/worker/engines/capi/lane.py``, native; tritonserver:
    ``rig/worker/engines/official/lane.py``, on its asyncio loop); ``rig.worker.load.lanes`` holds the generic
    Python lane (``PyLane``) and the lane of a locustfile's own tasks (``TaskLane``).

    A failed request that had a latency (one the server answered with an error, or one timed out)
    comes out of ``drain`` negated, so that the sink keeps failed requests' latencies apart.
    """

    kind: str
    """Which lane this is, in the run's ``lane`` column: native, asyncio, python or tasks."""
    in_flight: int
    """Requests the lane keeps in flight in the closed loop (the run's concurrency counts it)."""
    supports_open_loop: bool
    """Whether ``start_open`` works; where not it raises ``EngineError`` (code UNSUPPORTED)."""
    blocking_stop: bool
    """Whether ``stop`` blocks the calling OS thread (native code): under gevent, call it off the
    hub (``rig.worker.load.lanes.stop_lane``)."""

    def set_request_timeout(self, seconds: float) -> None:
        """A request with no final response ``seconds`` after its submission counts once as a
        timeout (an error too, with ``timeout_message``'s words, and a latency of minus
        ``seconds``); its late end, if it comes, counts nothing. 0: never. Where the lane does not
        send on its own (tasks time their own requests), nothing."""

    def set_check(self, check: dict | None) -> None:
        """Hold every response to a reference output (``rig.worker.outputs.reference_output``); a wrong
        one counts in ``counters()["bad_outputs"]``. None: no check. Before starting. Where the
        lane's requests are checked elsewhere (tasks check their own), nothing."""

    def start_closed(self) -> None:
        """Keep ``in_flight`` requests in flight, each sent again as soon as it is done. Where the
        requests are sent elsewhere (tasks), nothing."""

    def start_open(self, send_times_ns: np.ndarray, max_in_flight: int = 4096) -> None:
        """Send one request at each absolute time (``time.monotonic_ns()`` clock, sorted); latency
        counts from the scheduled time. ``EngineError`` (UNSUPPORTED) where
        ``supports_open_loop`` is False."""

    def stop(self, timeout_s: float = 30) -> bool:
        """Stop sending and wait at most ``timeout_s`` for the requests in flight; True when none
        is left (see ``blocking_stop``)."""

    def drain(self) -> tuple[np.ndarray, int]:
        """Latencies (int64 ns; failed requests' negated) completed since the last drain, and the
        count of requests failed since then."""

    def stream(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """A streaming (decoupled) model's figures of the requests drained since the last call:
        time to the first response (ns), gaps between responses (ns), data responses per
        answered request. None where nothing streamed (or the lane does not measure streams)."""

    def first_error(self) -> str | None:
        """The message of the lane's first failed request, or None."""

    def error_messages(self) -> dict[str, int]:
        """Every distinct error message so far and its count (a lane may cap how many it keeps)."""

    def counters(self) -> dict[str, int]:
        """Cumulative counts the sink adds up by difference: ``timeouts`` and, where the lane
        keeps them, ``bad_outputs``, ``lost_samples`` and ``peak_in_server``."""

    def stats(self) -> dict[str, int]:
        """Counts since the lane was made: at least submitted, completed, errors, timeouts,
        in_flight (now), issued and dropped (open-loop sends sent, and cut or refused)."""

    def close(self, timeout_s: float = 30) -> bool:
        """``stop`` (waiting at most ``timeout_s``) and free what the lane holds; True when
        nothing was left in flight."""


def open_loop_unsupported(lane: Lane) -> EngineError:
    """The error of ``start_open`` on a lane whose ``supports_open_loop`` is False."""
    return EngineError(
        f"the {lane.kind} lane sends in a closed loop only: open-loop load needs a lane "
        "of the engine's own (the capi engine needs a C compiler)",
        "UNSUPPORTED",
    )


class Deadlines:
    """The request timeout of a lane that tracks its requests in Python (``PyLane``,
    ``OfficialLane``): each request in flight by number with its submission time
    (``time.monotonic_ns()``) in ``sent``, until it ends; ``expire`` counts those past the
    timeout, once each, into ``expired`` (where a late end finds it and counts nothing). Scanned
    now and then, not a timer per request."""

    def __init__(self) -> None:
        self.timeout_ns = 0
        self.sent: dict[int, int] = {}
        self.expired: set[int] = set()
        self.timeouts = 0  # cumulative

    def set_timeout(self, seconds: float) -> None:
        """0: never."""
        self.timeout_ns = int(seconds * 1e9)

    @property
    def message(self) -> str:
        return timeout_message(self.timeout_ns / 1e9)

    def expire(self) -> int:
        """How many requests passed the timeout since the last call (each counted once)."""
        if not self.timeout_ns or not self.sent:
            return 0
        now, new = time.monotonic_ns(), 0
        for n, t0 in list(self.sent.items()):
            if n not in self.expired and now - t0 >= self.timeout_ns:
                self.expired.add(n)
                new += 1
        self.timeouts += new
        return new

    def end(self, n: int) -> bool:
        """Request ``n`` has ended: False where it was counted as a timeout already."""
        self.sent.pop(n, None)
        if n in self.expired:
            self.expired.discard(n)
            return False
        return True


def as_entries(inputs) -> list[dict]:
    """A model's (or a lane's) inputs as a list of entries, each a dict name -> array: one dict
    (the contract before entries) is one entry."""
    entries = [inputs] if isinstance(inputs, dict) else list(inputs)
    if not entries or not all(isinstance(e, dict) for e in entries):
        raise RigError("a lane's inputs are a dict of arrays, or a non-empty list of such dicts")
    return entries


def timeout_message(seconds: float) -> str:
    """The error message of a request with no final response within the request timeout: every
    lane's words, so that the messages of one cycle count together whichever lane sent it."""
    return f"no response within {seconds:g} s (request timeout)"
