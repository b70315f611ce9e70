"""Triton's C API (``tritonserver.h``) as ctypes sees it: the core library with the signatures
of the functions the rig calls, its data types and error codes, and how errors come back.

``rig/worker/engines/capi/engine.py`` builds the engine on it; ``rig/worker/engines/capi/lane.py`` shares its types.
"""

from __future__ import annotations

import ctypes
import json
from ctypes import (
    CFUNCTYPE,
    POINTER,
    byref,
    c_bool,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)

import numpy as np

from rig.contract.engines import DATATYPES, NUMPY_OF
from rig.worker.engines.base import EngineError

ERROR_CODES = [
    "UNKNOWN",
    "INTERNAL",
    "NOT_FOUND",
    "INVALID_ARG",
    "UNAVAILABLE",
    "UNSUPPORTED",
    "ALREADY_EXISTS",
    "CANCELLED",
]
MEMORY_CPU = 0
RESPONSE_FINAL = 1
CONTROL_MODES = {"none": 0, "poll": 1, "explicit": 2}


def datatype_of(array: np.ndarray) -> int:
    if array.dtype == np.object_ or array.dtype.kind in ("S", "U"):
        return DATATYPES.index("BYTES")
    for name, t in NUMPY_OF.items():
        if t is not np.object_ and array.dtype == np.dtype(t):
            return DATATYPES.index(name)
    raise EngineError(f"no Triton datatype for numpy dtype {array.dtype}", "INVALID_ARG")


AllocFn = CFUNCTYPE(
    c_void_p,
    c_void_p,
    c_char_p,
    c_size_t,
    c_int,
    c_int64,
    c_void_p,
    POINTER(c_void_p),
    POINTER(c_void_p),
    POINTER(c_int),
    POINTER(c_int64),
)
ReleaseFn = CFUNCTYPE(c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int64)
RequestReleaseFn = CFUNCTYPE(None, c_void_p, c_uint32, c_void_p)
ResponseCompleteFn = CFUNCTYPE(None, c_void_p, c_uint32, c_void_p)

_SIGNATURES = {
    # name: (argtypes); every function returns TRITONSERVER_Error* unless listed in _OTHER
    "TRITONSERVER_ApiVersion": [POINTER(c_uint32), POINTER(c_uint32)],
    "TRITONSERVER_ServerOptionsNew": [POINTER(c_void_p)],
    "TRITONSERVER_ServerOptionsDelete": [c_void_p],
    "TRITONSERVER_ServerOptionsSetModelRepositoryPath": [c_void_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetBackendDirectory": [c_void_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetExitTimeout": [c_void_p, c_uint32],
    "TRITONSERVER_ServerOptionsSetModelControlMode": [c_void_p, c_int],
    "TRITONSERVER_ServerOptionsSetStartupModel": [c_void_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetStrictReadiness": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetStrictModelConfig": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetLogFile": [c_void_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetLogInfo": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetLogWarn": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetLogError": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetLogVerbose": [c_void_p, c_int],
    "TRITONSERVER_ServerOptionsSetMetrics": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetGpuMetrics": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetBackendConfig": [c_void_p, c_char_p, c_char_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability": [c_void_p, c_double],
    "TRITONSERVER_ServerOptionsSetModelLoadRetryCount": [c_void_p, c_uint32],
    "TRITONSERVER_ServerNew": [POINTER(c_void_p), c_void_p],
    "TRITONSERVER_ServerDelete": [c_void_p],
    "TRITONSERVER_ServerStop": [c_void_p],
    "TRITONSERVER_ServerIsLive": [c_void_p, POINTER(c_bool)],
    "TRITONSERVER_ServerIsReady": [c_void_p, POINTER(c_bool)],
    "TRITONSERVER_ServerModelIsReady": [c_void_p, c_char_p, c_int64, POINTER(c_bool)],
    "TRITONSERVER_ServerMetadata": [c_void_p, POINTER(c_void_p)],
    "TRITONSERVER_ServerModelMetadata": [c_void_p, c_char_p, c_int64, POINTER(c_void_p)],
    "TRITONSERVER_ServerModelConfig": [c_void_p, c_char_p, c_int64, c_uint32, POINTER(c_void_p)],
    "TRITONSERVER_ServerModelIndex": [c_void_p, c_uint32, POINTER(c_void_p)],
    "TRITONSERVER_ServerModelStatistics": [c_void_p, c_char_p, c_int64, POINTER(c_void_p)],
    "TRITONSERVER_ServerLoadModel": [c_void_p, c_char_p],
    "TRITONSERVER_ServerUnloadModel": [c_void_p, c_char_p],
    "TRITONSERVER_MessageSerializeToJson": [c_void_p, POINTER(c_char_p), POINTER(c_size_t)],
    "TRITONSERVER_MessageDelete": [c_void_p],
    "TRITONSERVER_ResponseAllocatorNew": [POINTER(c_void_p), AllocFn, ReleaseFn, c_void_p],
    "TRITONSERVER_ResponseAllocatorDelete": [c_void_p],
    "TRITONSERVER_InferenceRequestNew": [POINTER(c_void_p), c_void_p, c_char_p, c_int64],
    "TRITONSERVER_InferenceRequestDelete": [c_void_p],
    "TRITONSERVER_InferenceRequestAddInput": [c_void_p, c_char_p, c_int, POINTER(c_int64), c_uint64],
    "TRITONSERVER_InferenceRequestAppendInputData": [c_void_p, c_char_p, c_void_p, c_size_t, c_int, c_int64],
    "TRITONSERVER_InferenceRequestAddRequestedOutput": [c_void_p, c_char_p],
    # a sequence's requests (the sequence batcher): Engine.infer's ``sequence``
    "TRITONSERVER_InferenceRequestSetCorrelationId": [c_void_p, c_uint64],
    "TRITONSERVER_InferenceRequestSetFlags": [c_void_p, c_uint32],
    "TRITONSERVER_InferenceRequestSetReleaseCallback": [c_void_p, RequestReleaseFn, c_void_p],
    "TRITONSERVER_InferenceRequestSetResponseCallback": [c_void_p, c_void_p, c_void_p, ResponseCompleteFn, c_void_p],
    "TRITONSERVER_ServerInferAsync": [c_void_p, c_void_p, c_void_p],
    "TRITONSERVER_InferenceResponseError": [c_void_p],
    "TRITONSERVER_InferenceResponseDelete": [c_void_p],
    "TRITONSERVER_InferenceResponseOutputCount": [c_void_p, POINTER(c_uint32)],
    "TRITONSERVER_InferenceResponseOutput": [
        c_void_p,
        c_uint32,
        POINTER(c_char_p),
        POINTER(c_int),
        POINTER(POINTER(c_int64)),
        POINTER(c_uint64),
        POINTER(c_void_p),
        POINTER(c_size_t),
        POINTER(c_int),
        POINTER(c_int64),
        POINTER(c_void_p),
    ],
}
_OTHER = {
    "TRITONSERVER_ErrorCode": (c_int, [c_void_p]),
    "TRITONSERVER_ErrorMessage": (c_char_p, [c_void_p]),
    "TRITONSERVER_ErrorDelete": (None, [c_void_p]),
}
_OPTIONAL = {
    "TRITONSERVER_ServerOptionsSetStartupModel",
    "TRITONSERVER_ServerOptionsSetModelLoadRetryCount",
    "TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability",
    "TRITONSERVER_ServerModelStatistics",
}


class CoreLibrary:
    """The core's shared library with typed functions; one per process and path."""

    _loaded: dict[str, CoreLibrary] = {}  # noqa: RUF012

    def __init__(self, path: str):
        try:
            self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise EngineError(f"cannot load the Triton core {path}: {e}", "UNAVAILABLE") from e
        self.missing: list[str] = []
        for name, args in _SIGNATURES.items():
            fn = getattr(self.lib, name, None)
            if fn is None:
                if name not in _OPTIONAL:
                    self.missing.append(name)
                continue
            fn.restype = c_void_p
            fn.argtypes = args
        for name, (res, args) in _OTHER.items():
            fn = getattr(self.lib, name)
            fn.restype = res
            fn.argtypes = args
        if self.missing:
            raise EngineError(f"core {path} lacks {', '.join(self.missing)}", "UNSUPPORTED")
        self.libc = ctypes.CDLL(None)
        self.libc.malloc.restype = c_void_p
        self.libc.malloc.argtypes = [c_size_t]
        self.libc.free.argtypes = [c_void_p]

    @classmethod
    def load(cls, path: str) -> CoreLibrary:
        if path not in cls._loaded:
            cls._loaded[path] = cls(path)
        return cls._loaded[path]

    def has(self, name: str) -> bool:
        return getattr(self.lib, name, None) is not None

    def error(self, err: int | None) -> EngineError | None:
        """Turn a TRITONSERVER_Error* into an exception value (and free it)."""
        if not err:
            return None
        code = self.lib.TRITONSERVER_ErrorCode(err)
        msg = (self.lib.TRITONSERVER_ErrorMessage(err) or b"").decode(errors="replace")
        self.lib.TRITONSERVER_ErrorDelete(err)
        return EngineError(msg, ERROR_CODES[code] if 0 <= code < len(ERROR_CODES) else str(code))

    def check(self, err: int | None) -> None:
        e = self.error(err)
        if e is not None:
            raise e

    def call(self, name: str, *args) -> None:
        self.check(getattr(self.lib, name)(*args))

    def message_json(self, msg: c_void_p) -> dict:
        base, size = c_char_p(), c_size_t()
        try:
            self.call("TRITONSERVER_MessageSerializeToJson", msg, byref(base), byref(size))
            return json.loads(ctypes.string_at(base, size.value))
        finally:
            self.lib.TRITONSERVER_MessageDelete(msg)
