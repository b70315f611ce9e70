"""The rig's own driver of Triton's C API (``tritonserver.h``) through ctypes.

It runs wherever the core runs, and since it holds exactly the references it says it holds
(a response lives until ``TRITONSERVER_InferenceResponseDelete``), it tells a bug of the Python
binding layer apart from one of the core.
"""

from __future__ import annotations

import ctypes
import threading
import time
from ctypes import byref, c_bool, c_int64, c_void_p

import numpy as np

from rig.common.errors import RigError
from rig.contract.engines import ModelMetadata, TensorSpec, serialize_bytes
from rig.worker.engines import memory
from rig.worker.engines.base import (
    Engine,
    EngineError,
    Lane,
    Response,
    Sequence,
    ServerOptions,
)
from rig.worker.engines.capi import lane as native
from rig.worker.engines.capi.core import (
    CONTROL_MODES,
    DATATYPES,
    MEMORY_CPU,
    RESPONSE_FINAL,
    AllocFn,
    CoreLibrary,
    ReleaseFn,
    RequestReleaseFn,
    ResponseCompleteFn,
    datatype_of,
)
from rig.worker.engines.capi.response import CapiResponse, EmptyResponse


def _native_lock():
    from rig.worker.unpatched import original

    return original("_thread", "allocate_lock")()


class _Pending:
    """One request in flight: its buffers stay alive until the core releases the request, and
    ``done`` waits for both the final response and that release (``events``: those still due).
    ``times``: where given, each data response's arrival (``time.monotonic_ns()``) is appended."""

    __slots__ = ("done", "error", "events", "keep", "response", "times")

    def __init__(self, keep, done, times=None):
        self.keep = keep
        self.done = done
        self.response = None
        self.error = None
        self.events = 2
        self.times = times


def input_buffer(arr: np.ndarray, dtype: int, placement: memory.Placement) -> tuple:
    """Where one input's data is submitted from: ``(held, ptr, size, memory type, memory type id)``;
    ``held`` is what the request keeps alive until the core releases it. BYTES are serialized on the
    host; with a GPU placement every other input is on its device (the same host array is the same
    device array, copied once and the copy waited for: ``memory.DeviceMemory``), as
    ``TRITONSERVER_MEMORY_GPU`` with that device's id."""
    if DATATYPES[dtype] == "BYTES":
        data = serialize_bytes(arr)
        return data, ctypes.c_char_p(data), len(data), MEMORY_CPU, 0
    if placement.gpu:
        dev = memory.device_memory().input(arr)
        return dev, int(dev.data.ptr), int(dev.nbytes), memory.MEMORY_GPU, placement.device
    arr = np.ascontiguousarray(arr)
    return arr, arr.ctypes.data, arr.nbytes, MEMORY_CPU, 0


class CapiEngine(Engine):
    name = "capi"

    def __init__(self, core_library: str):
        self.core = CoreLibrary.load(core_library)
        self.server = c_void_p()
        self._allocator = c_void_p()
        self._pending: dict[int, _Pending] = {}
        self._stateful: dict[str, bool] = {}
        self._next_id = 1
        self._id_lock = threading.Lock()
        # The core's threads run the two events of a request; a plain OS lock, as in infer().
        self._events_lock = _native_lock()
        self._stopped = False
        # Responses made and not yet deleted (CapiResponse counts itself in and out): the allocator
        # outlives them, since deleting a response calls its release function through it.
        self._responses = 0
        self._responses_lock = threading.Lock()
        self._closing = False
        # Callbacks must outlive every request: keep the ctypes thunks on the instance.
        self._alloc_cb = AllocFn(self._alloc)
        self._release_cb = ReleaseFn(self._release_buffer)
        self._request_release_cb = RequestReleaseFn(self._request_released)
        self._response_cb = ResponseCompleteFn(self._response_complete)

    # -- allocator: host memory from malloc, owned by the response until it is deleted; device
    # memory from CuPy's pool where the core prefers the GPU for an output (the model left it
    # there) and the placement is gpu (``--input-memory gpu``): no copy back to the host in the core
    def _alloc(self, allocator, name, size, mtype, mid, userp, buffer, buffer_userp, amtype, amid):
        buffer_userp[0] = None
        if mtype == memory.MEMORY_GPU and memory.PLACEMENT.gpu and size:
            try:
                buffer[0] = memory.device_memory().alloc(size, mid)
                amtype[0], amid[0] = memory.MEMORY_GPU, mid
                memory.OUTPUTS.record(memory.memory_label(memory.MEMORY_GPU, mid))
                return
            except Exception:  # noqa: BLE001, S110
                pass
        buffer[0] = self.core.libc.malloc(size) if size else None
        amtype[0] = MEMORY_CPU
        amid[0] = 0
        memory.OUTPUTS.record("cpu")
        return

    def _release_buffer(self, allocator, buffer, buffer_userp, size, mtype, mid):
        if buffer:
            if mtype == memory.MEMORY_GPU:
                memory.device_memory().free(buffer)
            else:
                self.core.libc.free(buffer)

    def _event(self, rid, pending: _Pending) -> None:
        """One of a request's two ends (final response, release); the later one calls ``done``:
        a caller that submits again from ``done`` has nothing of this request left in the server,
        so every path holds exactly its in-flight count of requests there."""
        with self._events_lock:
            pending.events -= 1
            last = pending.events == 0
        if last:
            self._pending.pop(rid, None)
            if pending.done is not None:
                response = pending.response
                if response is None and pending.error is None:
                    # the final flag came (done waits for it) with no response: a decoupled
                    # model ended the request without data, which answers it
                    response = EmptyResponse()
                pending.done(response, pending.error)

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
                if pending.times is not None:
                    pending.times.append(time.monotonic_ns())
                if pending.response is not None:  # decoupled: keep only the latest
                    pending.response.release()
                pending.response = CapiResponse(self, response)
        if flags & RESPONSE_FINAL:
            self._event(userp or 0, pending)

    # -- lifecycle
    def start(self, options: ServerOptions) -> None:
        c = self.core
        opts = c_void_p()
        c.call("TRITONSERVER_ServerOptionsNew", byref(opts))
        try:
            c.call("TRITONSERVER_ServerOptionsSetModelRepositoryPath", opts, options.model_repository.encode())
            if options.backend_directory:
                c.call("TRITONSERVER_ServerOptionsSetBackendDirectory", opts, options.backend_directory.encode())
            c.call("TRITONSERVER_ServerOptionsSetExitTimeout", opts, int(options.exit_timeout_s))
            c.call("TRITONSERVER_ServerOptionsSetModelControlMode", opts, CONTROL_MODES[options.model_control])
            for m in options.startup_models:
                if c.has("TRITONSERVER_ServerOptionsSetStartupModel"):
                    c.call("TRITONSERVER_ServerOptionsSetStartupModel", opts, m.encode())
            c.call("TRITONSERVER_ServerOptionsSetStrictReadiness", opts, options.strict_readiness)
            c.call("TRITONSERVER_ServerOptionsSetStrictModelConfig", opts, options.strict_model_config)
            if c.has("TRITONSERVER_ServerOptionsSetModelLoadRetryCount"):
                c.call("TRITONSERVER_ServerOptionsSetModelLoadRetryCount", opts, int(options.model_load_retries))
            if options.log_file:
                c.call("TRITONSERVER_ServerOptionsSetLogFile", opts, options.log_file.encode())
            c.call("TRITONSERVER_ServerOptionsSetLogInfo", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogWarn", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogError", opts, True)
            c.call("TRITONSERVER_ServerOptionsSetLogVerbose", opts, int(options.log_verbose))
            c.call("TRITONSERVER_ServerOptionsSetMetrics", opts, False)
            c.call("TRITONSERVER_ServerOptionsSetGpuMetrics", opts, False)
            for backend, key, value in options.backend_config:
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

    def is_ready(self) -> bool:
        ready = c_bool()
        self.core.call("TRITONSERVER_ServerIsReady", self.server, byref(ready))
        return ready.value

    def model_ready(self, model: str) -> bool:
        ready = c_bool()
        err = self.core.error(
            self.core.lib.TRITONSERVER_ServerModelIsReady(self.server, model.encode(), -1, byref(ready))
        )
        return err is None and ready.value

    def server_version(self) -> str:
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerMetadata", self.server, byref(msg))
        return self.core.message_json(msg).get("version", "unknown")

    def model_metadata(self, model: str) -> ModelMetadata:
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelMetadata", self.server, model.encode(), -1, byref(msg))
        meta = self.core.message_json(msg)
        cfg_msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelConfig", self.server, model.encode(), -1, 1, byref(cfg_msg))
        cfg = self.core.message_json(cfg_msg)

        def specs(items):
            return tuple(
                TensorSpec(t["name"], t["datatype"], tuple(int(d) for d in t.get("shape", []))) for t in items or []
            )

        return ModelMetadata(
            name=meta.get("name", model),
            versions=tuple(meta.get("versions", [])),
            platform=meta.get("platform", ""),
            inputs=specs(meta.get("inputs")),
            outputs=specs(meta.get("outputs")),
            max_batch_size=int(cfg.get("max_batch_size", 0) or 0),
        )

    def decoupled(self, model: str) -> bool:
        """Whether the model streams (``model_transaction_policy { decoupled: true }``): several
        responses a request, then the final flag. False where its config cannot be read."""
        cfg_msg = c_void_p()
        err = self.core.error(
            self.core.lib.TRITONSERVER_ServerModelConfig(self.server, model.encode(), -1, 1, byref(cfg_msg))
        )
        if err is not None:
            return False
        cfg = self.core.message_json(cfg_msg)
        return bool((cfg.get("model_transaction_policy") or {}).get("decoupled"))

    def stateful(self, model: str) -> bool:
        """Whether the model's config has ``sequence_batching`` (read once a model)."""
        if model not in self._stateful:
            cfg_msg = c_void_p()
            err = self.core.error(
                self.core.lib.TRITONSERVER_ServerModelConfig(self.server, model.encode(), -1, 1, byref(cfg_msg))
            )
            if err is not None:
                return False
            self._stateful[model] = "sequence_batching" in self.core.message_json(cfg_msg)
        return self._stateful[model]

    def model_states(self) -> dict[str, str]:
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelIndex", self.server, 0, byref(msg))
        index = self.core.message_json(msg)
        return {m["name"]: m.get("state", "UNKNOWN") or "UNKNOWN" for m in index}

    def model_statistics(self, model: str) -> dict | None:
        """``TRITONSERVER_ServerModelStatistics`` of every version (-1) of ``model``: one call and
        one JSON message (~90 us here); None where the core lacks it."""
        if not self.core.has("TRITONSERVER_ServerModelStatistics"):
            return None
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelStatistics", self.server, model.encode(), -1, byref(msg))
        return self.core.message_json(msg)

    def load_model(self, model: str) -> None:
        self.core.call("TRITONSERVER_ServerLoadModel", self.server, model.encode())

    def unload_model(self, model: str) -> None:
        self.core.call("TRITONSERVER_ServerUnloadModel", self.server, model.encode())

    # -- inference
    def _submit(
        self, model: str, inputs: dict[str, np.ndarray], done, times=None, sequence: Sequence | None = None
    ) -> None:
        c = self.core
        req = c_void_p()
        sequence = self.sequence_of(model, sequence)
        c.call("TRITONSERVER_InferenceRequestNew", byref(req), self.server, model.encode(), -1)
        keep = []
        placement = memory.PLACEMENT
        try:
            if sequence is not None:
                c.call("TRITONSERVER_InferenceRequestSetCorrelationId", req, sequence.correlation_id)
                c.call("TRITONSERVER_InferenceRequestSetFlags", req, sequence.flags)
            for name, arr in inputs.items():
                arr = np.asarray(arr)
                dtype = datatype_of(arr)
                held, ptr, size, mtype, mid = input_buffer(arr, dtype, placement)
                keep.append(held)
                shape = (c_int64 * max(arr.ndim, 1))(*arr.shape)
                c.call("TRITONSERVER_InferenceRequestAddInput", req, name.encode(), dtype, shape, arr.ndim)
                c.call(
                    "TRITONSERVER_InferenceRequestAppendInputData",
                    req,
                    name.encode(),
                    ptr if isinstance(ptr, int) else ctypes.cast(ptr, c_void_p),
                    size,
                    mtype,
                    mid,
                )
            with self._id_lock:
                rid = self._next_id
                self._next_id += 1
            self._pending[rid] = _Pending(keep, done, times)
            c.call("TRITONSERVER_InferenceRequestSetReleaseCallback", req, self._request_release_cb, rid)
            c.call(
                "TRITONSERVER_InferenceRequestSetResponseCallback", req, self._allocator, None, self._response_cb, rid
            )
            err = c.error(c.lib.TRITONSERVER_ServerInferAsync(self.server, req, None))
            if err is not None:
                self._pending.pop(rid, None)
                raise err
        except EngineError:
            c.lib.TRITONSERVER_InferenceRequestDelete(req)
            raise

    # infer_async takes ``times``: a list each data response's arrival is appended to (PyLane's
    # streaming measure)
    streams = True

    def infer_async(self, model, inputs, done, times: list | None = None, sequence: Sequence | None = None) -> None:
        """Submit one request; ``done(response, error)`` runs on a core thread once the final
        flag and the release have both come: ``response`` is the latest response with data (a
        decoupled model's earlier ones are released as they come), an ``EmptyResponse`` where
        the final flag came alone. ``times``: see ``streams``; ``sequence``: ``Engine.infer``'s."""
        self._submit(model, inputs, done, times, sequence)

    def lane(self, model: str, inputs: dict[str, np.ndarray] | list[dict], in_flight: int) -> Lane | None:
        """The native lane (``rig/worker/engines/capi/_fastpath.c``) where a C compiler is at hand and the inputs
        suit it (no BYTES, no sequence batcher: it sets no correlation id; inputs in host memory); else None, and the
        Python lane serves. ``inputs``: one entry, or a list of them cycled request by request."""
        if not native.available()[0] or self.stateful(model) or memory.PLACEMENT.gpu:
            return None  # the native lane knows host memory only (rig.worker.engines.memory)
        try:
            return native.NativeLane(self, model, inputs, in_flight=in_flight)
        except RigError:
            return None

    def infer(
        self, model: str, inputs: dict[str, np.ndarray], timeout_s: float = 60.0, sequence: Sequence | None = None
    ) -> Response:
        # A plain OS lock, even where gevent has patched threading (Locust): it is released from
        # one of Triton's native threads, which a gevent primitive must never be.
        lock = _native_lock()
        lock.acquire()
        box: list = []

        def done(response, error):
            box.append((response, error))
            lock.release()

        self._submit(model, inputs, done, sequence=sequence)
        if not lock.acquire(timeout=timeout_s):
            raise EngineError(f"no response from {model} within {timeout_s} s", "TIMEOUT")
        response, error = box[0]
        if error is not None:
            raise error
        return response

    def stop(self) -> str | None:
        self._stopped = True
        err = self.core.error(self.core.lib.TRITONSERVER_ServerStop(self.server))
        return None if err is None else str(err)

    def close(self) -> None:
        """Stop and delete the server. The response allocator goes now, or with the last response
        still held (a retained response is deleted through it, after the server: its release
        function is called through the allocator, which must not be freed memory by then)."""
        if self.server:
            if not self._stopped:
                self.stop()
            server, self.server = self.server, c_void_p()
            self.core.lib.TRITONSERVER_ServerDelete(server)
        with self._responses_lock:
            self._closing = True
            last = self._responses == 0
        if last:
            self._delete_allocator()

    def _delete_allocator(self) -> None:
        allocator, self._allocator = self._allocator, c_void_p()
        if allocator:
            self.core.lib.TRITONSERVER_ResponseAllocatorDelete(allocator)

    def response_made(self) -> None:
        with self._responses_lock:
            self._responses += 1

    def response_deleted(self) -> None:
        """A response of this engine was deleted; after ``close``, the last one takes the allocator."""
        with self._responses_lock:
            self._responses -= 1
            last = self._closing and self._responses == 0
        if last:
            self._delete_allocator()
