"""One in-process Triton server through the C API (``rig.capi.core``), as the rig's capi engine and
``rig repro``'s script both drive it: the server's options and its start, the response allocator,
a request's submission and its two ends (the final response and the release: a request is over once
both came), a response's outputs read in place, readiness, metadata, loads, the stop and the delete.

``Server`` is a base: what a user does with a response and with a request's end is its own
(``_responded``, ``_ended``), and so is memory other than the host's (``_alloc``,
``_release_buffer``). It imports nothing of the rig; ``rig repro`` copies this file into the
reproducer's script as it is.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterable, Iterator
from ctypes import POINTER, byref, c_bool, c_char_p, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any

import numpy as np

from rig.capi.core import (
    CONTROL_MODES,
    DATATYPES,
    MEMORY_CPU,
    NUMPY_OF,
    RESPONSE_FINAL,
    AllocFn,
    CoreError,
    CoreLibrary,
    ReleaseFn,
    RequestReleaseFn,
    ResponseCompleteFn,
)

# One input of a request: its name, datatype (an index of DATATYPES), shape, and its data: address,
# bytes, memory type and memory type id (the caller keeps the data alive until the request's release).
Input = tuple[str, int, tuple[int, ...], Any, int, int, int]
# One output of a response, read in place (the response owns it): name, datatype (DATATYPES' name),
# shape, address (None: no data), bytes, memory type and memory type id.
Output = tuple[str, str, tuple[int, ...], Any, int, int, int]


def as_array(datatype: str, shape: tuple[int, ...], base: Any, size: int) -> np.ndarray:
    """A numpy array over an output's host memory: zero-copy (the response must outlive it), BYTES
    decoded into a new array of ``bytes`` objects."""
    if datatype == "BYTES":
        raw = ctypes.string_at(base, size) if size else b""
        items, off = [], 0
        while off < len(raw):
            n = int.from_bytes(raw[off : off + 4], "little")
            items.append(raw[off + 4 : off + 4 + n])
            off += 4 + n
        return np.array(items, dtype=np.object_).reshape(shape)
    dt = np.dtype(NUMPY_OF[datatype])
    if not size:
        return np.zeros(shape, dtype=dt)
    buf: Any = (ctypes.c_char * size).from_address(base)  # a buffer numpy reads (its stubs know not ctypes')
    return np.frombuffer(buf, dtype=dt).reshape(shape)


class Server:
    """One ``TRITONSERVER_Server`` and its response allocator. A request in flight is a ``pending``
    object of the caller's with at least ``keep`` (what must live until the core releases the
    request: its inputs' data), ``error`` (None) and ``events`` (2: the final response and the
    release still due); ``_responded`` and ``_ended`` say what else it holds."""

    def __init__(self, core: CoreLibrary):
        self.core = core
        self.server = c_void_p()
        self._allocator = c_void_p()
        self._pending: dict[int, Any] = {}
        self._stateful: dict[str, bool] = {}
        self._next_id = 1
        self._id_lock = threading.Lock()
        self._events_lock = threading.Lock()  # held by the core's threads: a subclass may name another
        # The callbacks must outlive every request: the ctypes thunks are kept on the instance.
        self._alloc_cb = AllocFn(self._alloc)
        self._release_cb = ReleaseFn(self._release_buffer)
        self._request_release_cb = RequestReleaseFn(self._request_released)
        self._response_cb = ResponseCompleteFn(self._response_complete)

    # -- the response allocator: host memory from malloc, owned by the response until it is deleted
    def _alloc(self, allocator, name, size, mtype, mid, userp, buffer, buffer_userp, amtype, amid):
        buffer[0] = self.core.libc.malloc(size) if size else None
        buffer_userp[0] = None
        amtype[0] = MEMORY_CPU
        amid[0] = 0
        return None

    def _release_buffer(self, allocator, buffer, buffer_userp, size, mtype, mid):
        if buffer:
            self.core.libc.free(buffer)
        return None

    # -- a request's two ends
    def _event(self, rid: int, pending: Any) -> None:
        """One of a request's two ends (its final response, its release); the later one ends it
        (``_ended``): a caller that submits again from there has nothing of this request left in
        the server, so every path holds exactly its in-flight count of requests there."""
        with self._events_lock:
            pending.events -= 1
            last = pending.events == 0
        if last:
            self._pending.pop(rid, None)
            self._ended(pending)

    def _ended(self, pending: Any) -> None:
        """The request is over: its final response and its release both came."""
        raise NotImplementedError

    def _responded(self, pending: Any, response: int) -> None:
        """A response with data (a decoupled model's: one of several), now the caller's to delete."""
        raise NotImplementedError

    def _request_released(self, request, flags, userp):
        pending = self._pending.get(userp or 0)
        self.core.lib.TRITONSERVER_InferenceRequestDelete(request)
        if pending is not None:
            pending.keep = None
            self._event(userp or 0, pending)

    def _response_complete(self, response, flags, userp):
        pending = self._pending.get(userp or 0)
        if pending is None:
            if response:
                self.core.lib.TRITONSERVER_InferenceResponseDelete(response)
            return
        if response:
            err = self.core.error(self.core.lib.TRITONSERVER_InferenceResponseError(response))
            if err is not None:
                self.core.lib.TRITONSERVER_InferenceResponseDelete(response)
                pending.error = err
            else:
                self._responded(pending, response)
        if flags & RESPONSE_FINAL:
            self._event(userp or 0, pending)

    # -- lifecycle
    def start_server(
        self,
        repository: str,
        backends: str | None,
        exit_timeout: int,
        control: str = "none",
        startup_models: Iterable[str] = (),
        strict_readiness: bool = True,
        strict_model_config: bool = True,
        load_retries: int = 0,
        log_file: str | None = None,
        log_verbose: int = 0,
        backend_config: Iterable[tuple[str, str, Any]] = (),
    ) -> None:
        """``TRITONSERVER_ServerNew`` with these options (the log's info, warnings and errors on, no
        metrics; a core that lacks ``SetStartupModel`` or ``SetModelLoadRetryCount`` goes without),
        then the response allocator. ``control``: a key of ``CONTROL_MODES``."""
        c = self.core
        opts = c_void_p()
        c.call("TRITONSERVER_ServerOptionsNew", byref(opts))
        try:
            c.call("TRITONSERVER_ServerOptionsSetModelRepositoryPath", opts, repository.encode())
            if backends:
                c.call("TRITONSERVER_ServerOptionsSetBackendDirectory", opts, backends.encode())
            c.call("TRITONSERVER_ServerOptionsSetExitTimeout", opts, int(exit_timeout))
            c.call("TRITONSERVER_ServerOptionsSetModelControlMode", opts, CONTROL_MODES[control])
            for m in startup_models:
                if c.has("TRITONSERVER_ServerOptionsSetStartupModel"):
                    c.call("TRITONSERVER_ServerOptionsSetStartupModel", opts, m.encode())
            c.call("TRITONSERVER_ServerOptionsSetStrictReadiness", opts, strict_readiness)
            c.call("TRITONSERVER_ServerOptionsSetStrictModelConfig", opts, strict_model_config)
            if c.has("TRITONSERVER_ServerOptionsSetModelLoadRetryCount"):
                c.call("TRITONSERVER_ServerOptionsSetModelLoadRetryCount", opts, int(load_retries))
            if log_file:
                c.call("TRITONSERVER_ServerOptionsSetLogFile", opts, log_file.encode())
            c.call("TRITONSERVER_ServerOptionsSetLogInfo", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogWarn", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogError", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogVerbose", opts, int(log_verbose))
            c.call("TRITONSERVER_ServerOptionsSetMetrics", opts, False)
            c.call("TRITONSERVER_ServerOptionsSetGpuMetrics", opts, False)
            for backend, key, value in backend_config:
                c.call(
                    "TRITONSERVER_ServerOptionsSetBackendConfig",
                    opts,
                    backend.encode(),
                    key.encode(),
                    str(value).encode(),
                )
            c.call("TRITONSERVER_ServerNew", byref(self.server), opts)
        finally:
            c.lib.TRITONSERVER_ServerOptionsDelete(opts)
        c.call("TRITONSERVER_ResponseAllocatorNew", byref(self._allocator), self._alloc_cb, self._release_cb, None)

    def stop_server(self) -> CoreError | None:
        """``TRITONSERVER_ServerStop``: its error, or None."""
        return self.core.error(self.core.lib.TRITONSERVER_ServerStop(self.server))

    def delete_server(self) -> None:
        """``TRITONSERVER_ServerDelete`` (once)."""
        if self.server:
            server, self.server = self.server, c_void_p()
            self.core.lib.TRITONSERVER_ServerDelete(server)

    def delete_allocator(self) -> None:
        """``TRITONSERVER_ResponseAllocatorDelete`` (once): after the last response, since deleting a
        response calls its release function through the allocator."""
        allocator, self._allocator = self._allocator, c_void_p()
        if allocator:
            self.core.lib.TRITONSERVER_ResponseAllocatorDelete(allocator)

    # -- what the server says
    def is_ready(self) -> bool:
        """``TRITONSERVER_ServerIsReady``."""
        ready = c_bool()
        self.core.call("TRITONSERVER_ServerIsReady", self.server, byref(ready))
        return ready.value

    def model_ready(self, model: str) -> bool:
        """``TRITONSERVER_ServerModelIsReady`` of the model's latest version (False where it fails)."""
        ready = c_bool()
        err = self.core.error(
            self.core.lib.TRITONSERVER_ServerModelIsReady(self.server, model.encode(), -1, byref(ready))
        )
        return err is None and ready.value

    def server_version(self) -> str:
        """The version in the server's metadata (``TRITONSERVER_ServerMetadata``)."""
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerMetadata", self.server, byref(msg))
        return str(self.core.message_json(msg).get("version", "unknown"))

    def metadata_of(self, model: str) -> Any:
        """The model's metadata (``TRITONSERVER_ServerModelMetadata``, its latest version) as JSON."""
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelMetadata", self.server, model.encode(), -1, byref(msg))
        return self.core.message_json(msg)

    def config_of(self, model: str) -> Any:
        """The model's configuration as the core serves it (``TRITONSERVER_ServerModelConfig``) as JSON."""
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelConfig", self.server, model.encode(), -1, 1, byref(msg))
        return self.core.message_json(msg)

    def stateful(self, model: str) -> bool:
        """Whether the model runs under the sequence batcher (``sequence_batching`` in its config):
        each of its requests needs a correlation id. Read once a model; False (asked again next
        time) where its config cannot be read."""
        if model not in self._stateful:
            try:
                config = self.config_of(model)
            except CoreError:
                return False
            self._stateful[model] = "sequence_batching" in config
        return self._stateful[model]

    def model_index(self) -> Any:
        """The repository index (``TRITONSERVER_ServerModelIndex``): each model's name, version and
        state (READY, LOADING, UNLOADING, UNAVAILABLE)."""
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelIndex", self.server, 0, byref(msg))
        return self.core.message_json(msg)

    def load_model(self, model: str) -> None:
        """``TRITONSERVER_ServerLoadModel`` (explicit model control): returns once the load ended."""
        self.core.call("TRITONSERVER_ServerLoadModel", self.server, model.encode())

    def unload_model(self, model: str) -> None:
        """``TRITONSERVER_ServerUnloadModel``: returns at once, the unload goes on in the core."""
        self.core.call("TRITONSERVER_ServerUnloadModel", self.server, model.encode())

    # -- requests
    def send(self, model: str, inputs: Iterable[Input], sequence: tuple[int, int] | None, pending: Any) -> None:
        """``TRITONSERVER_ServerInferAsync`` of one request to the model's latest version, answered
        through the allocator and the callbacks above; ``sequence``: its correlation id and flags
        (``SEQUENCE_START``, ``SEQUENCE_END``); ``pending``: what its callbacks find. The error
        where the core refused it (the request deleted)."""
        c = self.core
        req = c_void_p()
        c.call("TRITONSERVER_InferenceRequestNew", byref(req), self.server, model.encode(), -1)
        try:
            if sequence is not None:
                c.call("TRITONSERVER_InferenceRequestSetCorrelationId", req, sequence[0])
                c.call("TRITONSERVER_InferenceRequestSetFlags", req, sequence[1])
            for name, dtype, shape, ptr, size, mtype, mid in inputs:
                dims = len(shape)
                shape_of = (c_int64 * max(dims, 1))(*shape)
                c.call("TRITONSERVER_InferenceRequestAddInput", req, name.encode(), dtype, shape_of, dims)
                c.call("TRITONSERVER_InferenceRequestAppendInputData", req, name.encode(), ptr, size, mtype, mid)
            with self._id_lock:
                rid = self._next_id
                self._next_id += 1
            self._pending[rid] = pending
            c.call("TRITONSERVER_InferenceRequestSetReleaseCallback", req, self._request_release_cb, rid)
            c.call(
                "TRITONSERVER_InferenceRequestSetResponseCallback", req, self._allocator, None, self._response_cb, rid
            )
            err = c.error(c.lib.TRITONSERVER_ServerInferAsync(self.server, req, None))
            if err is not None:
                self._pending.pop(rid, None)
                raise err
        except CoreError:
            c.lib.TRITONSERVER_InferenceRequestDelete(req)
            raise

    def response_outputs(self, response: int) -> Iterator[Output]:
        """Each output of a response, in the core's order, read in place (the response owns it)."""
        c = self.core
        count = c_uint32()
        c.call("TRITONSERVER_InferenceResponseOutputCount", response, byref(count))
        for i in range(count.value):
            name, dtype, shape, dims = c_char_p(), c_int(), POINTER(c_int64)(), c_uint64()
            base, size, mtype, mid, userp = c_void_p(), c_size_t(), c_int(), c_int64(), c_void_p()
            c.call(
                "TRITONSERVER_InferenceResponseOutput",
                response,
                i,
                byref(name),
                byref(dtype),
                byref(shape),
                byref(dims),
                byref(base),
                byref(size),
                byref(mtype),
                byref(mid),
                byref(userp),
            )
            yield (
                (name.value or b"").decode(),
                DATATYPES[dtype.value],
                tuple(shape[k] for k in range(dims.value)),
                base.value,
                size.value,
                mtype.value,
                mid.value,
            )
