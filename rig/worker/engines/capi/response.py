"""The capi engine's responses: each holds its ``TRITONSERVER_InferenceResponse`` until released
(and a zero-copy view of an output holds it for as long as the view lives)."""

from __future__ import annotations

import threading

import numpy as np

from rig.capi.core import NUMPY_OF
from rig.capi.server import as_array
from rig.worker.engines import memory
from rig.worker.engines.base import EngineError, Response


class CapiResponse(Response):
    """One response of the core; ``engine``: the capi engine (a ``rig.capi.server.Server``) that made it."""

    def __init__(self, engine, handle: int):
        self._engine = engine
        self._handle = handle
        self._lock = threading.Lock()
        self._views = 0
        engine.response_made()

    def _copy(self, dtype_name, shape, base, size, mtype, mid) -> np.ndarray:
        """A host copy of one output that shares nothing with the response: an output in GPU
        memory is read back from the device (so the check compares what the model computed)."""
        if mtype == memory.MEMORY_GPU:
            return memory.device_memory().to_host(base, size, mid, np.dtype(NUMPY_OF[dtype_name]), shape)
        return as_array(dtype_name, shape, base, size).copy()

    def outputs(self) -> dict[str, np.ndarray]:
        if not self._handle:
            raise EngineError("response already released", "INVALID_ARG")
        return {n: self._copy(d, s, b, z, t, i) for n, d, s, b, z, t, i in self._engine.response_outputs(self._handle)}

    def output_view(self, name: str) -> np.ndarray:
        """A zero-copy array whose base owns this response, as a DLPack consumer's would."""
        for n, d, s, b, z, t, i in self._engine.response_outputs(self._handle):
            if n == name:
                owner = _ResponseOwner(self)
                if t == memory.MEMORY_GPU:  # a CuPy array, as cupy.from_dlpack of a device output gives
                    return memory.device_memory().view(b, z, i, np.dtype(NUMPY_OF[d]), s, owner)
                arr = as_array(d, s, b, z)
                return np.asarray(_OwnedBuffer(arr, owner))
        raise EngineError(f"response has no output {name!r}", "INVALID_ARG")

    def release(self) -> None:
        with self._lock:
            if self._views > 0:
                return  # an array still points into it: it dies with the last one
            handle, self._handle = self._handle, 0
        if handle:
            try:
                self._engine.core.check(self._engine.core.lib.TRITONSERVER_InferenceResponseDelete(handle))
            finally:
                self._engine.response_deleted()

    def _add_view(self):
        with self._lock:
            self._views += 1

    def _drop_view(self):
        with self._lock:
            self._views -= 1
            last = self._views == 0
        if last:
            self.release()

    def __del__(self):
        try:
            if self._views == 0:
                self.release()
        except Exception:  # noqa: BLE001, S110
            pass


class EmptyResponse(Response):
    """The answer of a request that a decoupled model ended with the final flag alone: answered,
    with no outputs, holding nothing of the core."""

    def outputs(self) -> dict[str, np.ndarray]:
        return {}

    def output_view(self, name: str) -> np.ndarray:
        raise EngineError(f"the request was answered by the final flag alone: no output {name!r}", "NOT_FOUND")

    def release(self) -> None:
        pass


class _ResponseOwner:
    def __init__(self, response: CapiResponse):
        self.response = response
        response._add_view()

    def __del__(self):
        self.response._drop_view()


class _OwnedBuffer:
    """Exposes an array's memory while holding the response that owns it."""

    def __init__(self, arr: np.ndarray, owner: _ResponseOwner):
        self._arr = arr
        self._owner = owner
        self.__array_interface__ = arr.__array_interface__
