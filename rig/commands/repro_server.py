"""One in-process server through the C API: start (the rig's options), readiness, the model
index, requests with their callbacks, explicit loads and unloads, stop and delete."""

from __future__ import annotations

import threading
from ctypes import POINTER, byref, c_bool, c_char_p, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any

import numpy as np

from rig.commands.repro_capi import (
    DATATYPES,
    MEMORY_CPU,
    MODEL_CONTROL_EXPLICIT,
    MODEL_CONTROL_NONE,
    NUMPY_OF,
    RESPONSE_FINAL,
    SEQUENCE_END,
    SEQUENCE_START,
    AllocFn,
    Core,
    ReleaseFn,
    RequestReleaseFn,
    ResponseCompleteFn,
    TritonError,
)

ONE_SHOT_IDS = 1 << 40  # a load's one-request sequences (a stateful model): their correlation ids start here


class _Pending:
    """One request in flight: its input buffers live until the core releases it; it is done once
    both the final response and the release have come (as the rig's engine waits for both)."""

    def __init__(self, keep: list[Any]):
        self.keep: list[Any] | None = keep
        self.response = 0  # the latest response with data (a TRITONSERVER_InferenceResponse*)
        self.error: TritonError | None = None
        self.events = 2
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.release_at_once = False  # each response deleted as it comes (none kept for the caller)


class Server:
    """One in-process server: start, requests, stop, delete; responses held until deleted."""

    def __init__(self, core: Core):
        self.core = core
        self.server = c_void_p()
        self.allocator = c_void_p()
        self._pending: dict[int, _Pending] = {}
        self._next = 1
        self._lock = threading.Lock()
        self._stateful: dict[str, bool] = {}
        self._one_shot = ONE_SHOT_IDS
        # the ctypes thunks must outlive every request
        self._alloc_cb = AllocFn(self._alloc)
        self._release_cb = ReleaseFn(self._release)
        self._request_release_cb = RequestReleaseFn(self._request_released)
        self._response_cb = ResponseCompleteFn(self._response_complete)

    # -- the response allocator: host memory from malloc, freed when the response is deleted
    def _alloc(self, allocator, name, size, mtype, mid, userp, buffer, buffer_userp, amtype, amid):
        buffer[0] = self.core.libc.malloc(size) if size else None
        buffer_userp[0] = None
        amtype[0] = MEMORY_CPU
        amid[0] = 0
        return None

    def _release(self, allocator, buffer, buffer_userp, size, mtype, mid):
        if buffer:
            self.core.libc.free(buffer)
        return None

    def _event(self, pending: _Pending) -> None:
        with pending.lock:
            pending.events -= 1
            last = pending.events == 0
        if last:
            pending.done.set()

    def _request_released(self, request, flags, userp):
        self.core.lib.TRITONSERVER_InferenceRequestDelete(request)
        pending = self._pending.get(userp or 0)
        if pending is not None:
            pending.keep = None
            self._event(pending)

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
            elif pending.release_at_once:  # what the rig's in-flight client does: read, then let go
                self.core.lib.TRITONSERVER_InferenceResponseDelete(response)
            else:
                if pending.response:  # a decoupled model's earlier response: keep only the latest
                    self.core.lib.TRITONSERVER_InferenceResponseDelete(pending.response)
                pending.response = response
        if flags & RESPONSE_FINAL:
            self._event(pending)

    # -- lifecycle
    def start(
        self, models: str, backends: str, exit_timeout: int, log_file: str, shm_prefix: str, explicit: bool = False
    ) -> None:
        """``TRITONSERVER_ServerNew`` with the rig's options: model control NONE (every model of the
        repository loaded at start; ``explicit``: model control EXPLICIT with every model loaded at
        start, for a client that unloads and loads), strict model config and readiness, no metrics,
        the Python backend's shared-memory regions named after this process."""
        c = self.core
        opts = c_void_p()
        c.call("TRITONSERVER_ServerOptionsNew", byref(opts))
        try:
            c.call("TRITONSERVER_ServerOptionsSetModelRepositoryPath", opts, models.encode())
            c.call("TRITONSERVER_ServerOptionsSetBackendDirectory", opts, backends.encode())
            c.call("TRITONSERVER_ServerOptionsSetExitTimeout", opts, int(exit_timeout))
            mode = MODEL_CONTROL_EXPLICIT if explicit else MODEL_CONTROL_NONE
            c.call("TRITONSERVER_ServerOptionsSetModelControlMode", opts, mode)
            if explicit:
                c.call("TRITONSERVER_ServerOptionsSetStartupModel", opts, b"*")
            c.call("TRITONSERVER_ServerOptionsSetStrictReadiness", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetStrictModelConfig", opts, True)
            if c.has("TRITONSERVER_ServerOptionsSetModelLoadRetryCount"):
                c.call("TRITONSERVER_ServerOptionsSetModelLoadRetryCount", opts, 0)
            c.call("TRITONSERVER_ServerOptionsSetLogFile", opts, log_file.encode())
            c.call("TRITONSERVER_ServerOptionsSetLogInfo", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogWarn", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogError", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogVerbose", opts, 0)
            c.call("TRITONSERVER_ServerOptionsSetMetrics", opts, False)
            c.call("TRITONSERVER_ServerOptionsSetGpuMetrics", opts, False)
            c.call(
                "TRITONSERVER_ServerOptionsSetBackendConfig",
                opts,
                b"python",
                b"shm-region-prefix-name",
                shm_prefix.encode(),
            )
            c.call("TRITONSERVER_ServerNew", byref(self.server), opts)
        finally:
            c.lib.TRITONSERVER_ServerOptionsDelete(opts)
        c.call("TRITONSERVER_ResponseAllocatorNew", byref(self.allocator), self._alloc_cb, self._release_cb, None)

    def server_ready(self) -> bool:
        """``TRITONSERVER_ServerIsReady`` (False where it fails)."""
        flag = c_bool()
        err = self.core.error(self.core.lib.TRITONSERVER_ServerIsReady(self.server, byref(flag)))
        return err is None and bool(flag.value)

    def model_ready(self, model: str) -> bool:
        """``TRITONSERVER_ServerModelIsReady`` of the model's latest version (False where it fails)."""
        flag = c_bool()
        err = self.core.error(
            self.core.lib.TRITONSERVER_ServerModelIsReady(self.server, model.encode(), -1, byref(flag))
        )
        return err is None and bool(flag.value)

    def ready(self, models: list[str]) -> bool:
        return self.server_ready() and all(self.model_ready(m) for m in models)

    def version(self) -> str:
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerMetadata", self.server, byref(msg))
        return str(self.core.message_json(msg).get("version", "unknown"))

    def models_loaded(self) -> bool:
        """Whether a model is still loaded, loading or unloading (the repository index's states);
        False where the server no longer answers."""
        msg = c_void_p()
        err = self.core.error(self.core.lib.TRITONSERVER_ServerModelIndex(self.server, 0, byref(msg)))
        if err is not None:
            return False
        states = [m.get("state") for m in self.core.message_json(msg)]
        return any(state in ("READY", "LOADING", "UNLOADING") for state in states)

    def model_states(self) -> dict[str, str]:
        """Each model of the repository index and its state (READY, LOADING, UNLOADING, UNAVAILABLE)."""
        msg = c_void_p()
        err = self.core.error(self.core.lib.TRITONSERVER_ServerModelIndex(self.server, 0, byref(msg)))
        if err is not None:
            return {}
        return {str(m.get("name")): str(m.get("state") or "UNAVAILABLE") for m in self.core.message_json(msg)}

    def load_model(self, model: str) -> None:
        """``TRITONSERVER_ServerLoadModel`` (explicit model control): returns once the load ended."""
        self.core.call("TRITONSERVER_ServerLoadModel", self.server, model.encode())

    def unload_model(self, model: str) -> None:
        """``TRITONSERVER_ServerUnloadModel``: returns at once, the unload goes on in the core."""
        self.core.call("TRITONSERVER_ServerUnloadModel", self.server, model.encode())

    def inputs_of(self, model: str) -> list[tuple[str, str, list[int]]]:
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelMetadata", self.server, model.encode(), -1, byref(msg))
        meta = self.core.message_json(msg)
        return [(t["name"], t["datatype"], [int(d) for d in t.get("shape", [])]) for t in meta.get("inputs", [])]

    def platform(self, model: str) -> str:
        """The model's platform in its metadata (``ensemble``, ``python``); "" where the core does not say."""
        msg = c_void_p()
        err = self.core.error(
            self.core.lib.TRITONSERVER_ServerModelMetadata(self.server, model.encode(), -1, byref(msg))
        )
        return "" if err is not None else str(self.core.message_json(msg).get("platform", ""))

    def stateful(self, model: str) -> bool:
        """Whether the model runs under the sequence batcher (``sequence_batching`` in the config the
        core serves, ``TRITONSERVER_ServerModelConfig``): each of its requests needs a correlation id."""
        if model not in self._stateful:
            msg = c_void_p()
            err = self.core.error(
                self.core.lib.TRITONSERVER_ServerModelConfig(self.server, model.encode(), -1, 1, byref(msg))
            )
            if err is not None:  # asked again next time, as the rig's engine does
                return False
            self._stateful[model] = "sequence_batching" in self.core.message_json(msg)
        return self._stateful[model]

    def sequence_of(self, model: str, sequence: tuple[int, int] | None) -> tuple[int, int] | None:
        """The (correlation id, flags) a request goes in: the caller's, or for a stateful model a
        sequence of its own (START and END, a fresh id: a load that knows nothing of sequences still
        reaches the model, as the rig's engines send it), else none."""
        if sequence is not None or not self.stateful(model):
            return sequence
        with self._lock:
            cid, self._one_shot = self._one_shot, self._one_shot + 1
        return cid, SEQUENCE_START | SEQUENCE_END

    def stop(self) -> TritonError | None:
        return self.core.error(self.core.lib.TRITONSERVER_ServerStop(self.server))

    def delete(self) -> None:
        if self.server:
            server, self.server = self.server, c_void_p()
            self.core.lib.TRITONSERVER_ServerDelete(server)
        if self.allocator:
            self.core.lib.TRITONSERVER_ResponseAllocatorDelete(self.allocator)
            self.allocator = c_void_p()

    # -- requests
    def submit(
        self,
        model: str,
        inputs: dict[str, np.ndarray],
        release_at_once: bool = False,
        sequence: tuple[int, int] | None = None,
    ) -> _Pending:
        """``TRITONSERVER_ServerInferAsync`` of one request; ``sequence``: its correlation id and
        flags (``SEQUENCE_START``, ``SEQUENCE_END``), a stateful model's default ``sequence_of``'s."""
        c = self.core
        sequence = self.sequence_of(model, sequence)
        req = c_void_p()
        c.call("TRITONSERVER_InferenceRequestNew", byref(req), self.server, model.encode(), -1)
        keep: list[Any] = []
        try:
            if sequence is not None:
                c.call("TRITONSERVER_InferenceRequestSetCorrelationId", req, sequence[0])
                c.call("TRITONSERVER_InferenceRequestSetFlags", req, sequence[1])
            for name, arr in inputs.items():
                arr = np.ascontiguousarray(arr)
                keep.append(arr)
                shape = (c_int64 * max(arr.ndim, 1))(*arr.shape)
                dtype = next(k for k, v in NUMPY_OF.items() if np.dtype(v) == arr.dtype)
                c.call(
                    "TRITONSERVER_InferenceRequestAddInput", req, name.encode(), DATATYPES.index(dtype), shape, arr.ndim
                )
                c.call(
                    "TRITONSERVER_InferenceRequestAppendInputData",
                    req,
                    name.encode(),
                    arr.ctypes.data,
                    arr.nbytes,
                    MEMORY_CPU,
                    0,
                )
            with self._lock:
                rid, self._next = self._next, self._next + 1
            pending = _Pending(keep)
            pending.release_at_once = release_at_once
            self._pending[rid] = pending
            c.call("TRITONSERVER_InferenceRequestSetReleaseCallback", req, self._request_release_cb, rid)
            c.call(
                "TRITONSERVER_InferenceRequestSetResponseCallback", req, self.allocator, None, self._response_cb, rid
            )
            err = c.error(c.lib.TRITONSERVER_ServerInferAsync(self.server, req, None))
            if err is not None:
                self._pending.pop(rid, None)
                raise err
        except TritonError:
            c.lib.TRITONSERVER_InferenceRequestDelete(req)
            raise
        return pending

    def outputs(self, response: int) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
        """Each output of a response: (datatype, shape, address, bytes), still owned by it."""
        c = self.core
        count = c_uint32()
        c.call("TRITONSERVER_InferenceResponseOutputCount", response, byref(count))
        out = {}
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
            out[(name.value or b"").decode()] = (
                DATATYPES[dtype.value],
                tuple(shape[k] for k in range(dims.value)),
                base.value or 0,
                size.value,
            )
        return out

    def delete_response(self, response: int) -> None:
        if response:
            self.core.call("TRITONSERVER_InferenceResponseDelete", response)
