"""The rig's own driver of Triton's C API (``tritonserver.h``) through ctypes.

It runs wherever the core runs, and since it holds exactly the references it says it holds
(a response lives until ``TRITONSERVER_InferenceResponseDelete``), it tells a bug of the Python
binding layer apart from one of the core.

It adapts the rig's binding (``rig.capi``: the library, and ``rig.capi.server.Server``, the server
and a request's callbacks, which ``rig repro``'s script runs too): the library is loaded with
``EngineError`` as its error type, so every error the core gives is an ``EngineError`` with the
core's message and code; what is the engine's own is here: a placement's inputs and outputs in GPU
memory (``rig.worker.engines.memory``, the ledger), the responses it hands out (``CapiResponse``)
and the allocator that outlives them, the ``Engine`` interface, its lanes.
"""

from __future__ import annotations

import ctypes
import threading
import time
from ctypes import byref, c_void_p

import numpy as np

from rig.capi.core import DATATYPES, MEMORY_CPU, CoreLibrary, datatype_of
from rig.capi.server import Server
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


class CapiEngine(Server, Engine):
    """The ``Engine`` over ``rig.capi.server.Server``: the server's own ``is_ready``, ``model_ready``,
    ``server_version``, ``stateful``, ``load_model`` and ``unload_model`` serve as the engine's."""

    name = "capi"

    def __init__(self, core_library: str):
        super().__init__(CoreLibrary.load(core_library, EngineError))
        # The core's threads run the two events of a request; a plain OS lock, as in infer().
        self._events_lock = _native_lock()
        self._stopped = False
        # Responses made and not yet deleted (CapiResponse counts itself in and out): the allocator
        # outlives them, since deleting a response calls its release function through it.
        self._responses = 0
        self._responses_lock = threading.Lock()
        self._closing = False

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

    def _responded(self, pending: _Pending, response: int) -> None:
        if pending.times is not None:
            pending.times.append(time.monotonic_ns())
        if pending.response is not None:  # decoupled: keep only the latest
            pending.response.release()
        pending.response = CapiResponse(self, response)

    def _ended(self, pending: _Pending) -> None:
        """``done`` is called once the final response and the release both came (``Server._event``)."""
        if pending.done is not None:
            response = pending.response
            if response is None and pending.error is None:
                # the final flag came (done waits for it) with no response: a decoupled
                # model ended the request without data, which answers it
                response = EmptyResponse()
            pending.done(response, pending.error)

    # -- lifecycle
    def start(self, options: ServerOptions) -> None:
        self.start_server(
            options.model_repository,
            options.backend_directory,
            options.exit_timeout_s,
            options.model_control,
            options.startup_models,
            options.strict_readiness,
            options.strict_model_config,
            options.model_load_retries,
            options.log_file,
            options.log_verbose,
            options.backend_config,
        )

    def model_metadata(self, model: str) -> ModelMetadata:
        meta = self.metadata_of(model)
        cfg = self.config_of(model)

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
        try:
            cfg = self.config_of(model)
        except EngineError:
            return False
        return bool((cfg.get("model_transaction_policy") or {}).get("decoupled"))

    def model_states(self) -> dict[str, str]:
        return {m["name"]: m.get("state", "UNKNOWN") or "UNKNOWN" for m in self.model_index()}

    def model_statistics(self, model: str) -> dict | None:
        """``TRITONSERVER_ServerModelStatistics`` of every version (-1) of ``model``: one call and
        one JSON message (~90 us here); None where the core lacks it."""
        if not self.core.has("TRITONSERVER_ServerModelStatistics"):
            return None
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelStatistics", self.server, model.encode(), -1, byref(msg))
        return self.core.message_json(msg)

    # -- inference
    def _submit(
        self, model: str, inputs: dict[str, np.ndarray], done, times=None, sequence: Sequence | None = None
    ) -> None:
        """One request through ``Server.send``, its inputs where the placement puts them."""
        sequence = self.sequence_of(model, sequence)
        keep = []
        parts = []
        placement = memory.PLACEMENT
        for name, arr in inputs.items():
            arr = np.asarray(arr)
            dtype = datatype_of(arr, EngineError)
            held, ptr, size, mtype, mid = input_buffer(arr, dtype, placement)
            keep.append(held)
            if not isinstance(ptr, int):
                ptr = ctypes.cast(ptr, c_void_p)
            parts.append((name, dtype, arr.shape, ptr, size, mtype, mid))
        self.send(
            model,
            parts,
            None if sequence is None else (sequence.correlation_id, sequence.flags),
            _Pending(keep, done, times),
        )

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
        err = self.stop_server()
        return None if err is None else str(err)

    def close(self) -> None:
        """Stop and delete the server. The response allocator goes now, or with the last response
        still held (a retained response is deleted through it, after the server: its release
        function is called through the allocator, which must not be freed memory by then)."""
        if self.server:
            if not self._stopped:
                self.stop()
            self.delete_server()
        with self._responses_lock:
            self._closing = True
            last = self._responses == 0
        if last:
            self.delete_allocator()

    def response_made(self) -> None:
        with self._responses_lock:
            self._responses += 1

    def response_deleted(self) -> None:
        """A response of this engine was deleted; after ``close``, the last one takes the allocator."""
        with self._responses_lock:
            self._responses -= 1
            last = self._closing and self._responses == 0
        if last:
            self.delete_allocator()
