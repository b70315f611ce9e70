"""Triton's C API (``tritonserver.h``) as ctypes sees it: the core library with the signatures of the
functions called, its data types and their numpy types, its error codes, the callback types, and how
an error comes back (``CoreError``, or the error type its user names).

It imports nothing of the rig: the rig's capi engine (``rig/worker/engines/capi/``) loads it with its
own error type, and ``rig repro`` copies this file into the reproducer's script as it is.
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
from typing import Any

import numpy as np

# TRITONSERVER_Error_Code, in the header's order.
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
MEMORY_CPU = 0  # TRITONSERVER_MEMORY_CPU
RESPONSE_FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL
CONTROL_MODES = {"none": 0, "poll": 1, "explicit": 2}  # TRITONSERVER_ModelControlMode
SEQUENCE_START = 1  # TRITONSERVER_RequestFlag: TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
SEQUENCE_END = 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_END

# TRITONSERVER_DataType, in the header's order, and the numpy type of each (BYTES: Python objects).
DATATYPES = [
    "INVALID",
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
    "BF16",
]
NUMPY_OF: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


class CoreError(Exception):
    """A ``TRITONSERVER_Error`` (or the binding's own refusal): its message, and ``code``, the name
    of its ``TRITONSERVER_Error_Code`` (``ERROR_CODES``)."""

    def __init__(self, message: str, code: str = "UNKNOWN"):
        super().__init__(message)
        self.code = code


def datatype_of(array: np.ndarray, error: type[CoreError] = CoreError) -> int:
    """The ``TRITONSERVER_DataType`` of a numpy array (BYTES: objects, bytes or str); ``error``
    (INVALID_ARG) where it has none."""
    if array.dtype == np.object_ or array.dtype.kind in ("S", "U"):
        return DATATYPES.index("BYTES")
    for name, t in NUMPY_OF.items():
        if t is not np.object_ and array.dtype == np.dtype(t):
            return DATATYPES.index(name)
    raise error(f"no Triton datatype for numpy dtype {array.dtype}", "INVALID_ARG")


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

_SIGNATURES: dict[str, list[Any]] = {
    # name: (argtypes); every function returns TRITONSERVER_Error* (NULL: success) unless listed in _OTHER
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
    # a sequence's requests (the sequence batcher): the correlation id and the START / END flags
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
_OTHER: dict[str, tuple[Any, list[Any]]] = {
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
    """The core's shared library with typed functions; one per process, path and error type
    (``load``). ``error``: what it raises and returns for a ``TRITONSERVER_Error`` (``CoreError`` or
    a subclass of its user's: the message and the code as the core gave them)."""

    _loaded: dict[tuple[str, type[CoreError]], CoreLibrary] = {}  # noqa: RUF012

    def __init__(self, path: str, error: type[CoreError] = CoreError):
        self.Error = error
        try:
            self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise error(f"cannot load the Triton core {path}: {e}", "UNAVAILABLE") from e
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
            raise error(f"core {path} lacks {', '.join(self.missing)}", "UNSUPPORTED")
        self.libc = ctypes.CDLL(None)
        self.libc.malloc.restype = c_void_p
        self.libc.malloc.argtypes = [c_size_t]
        self.libc.free.argtypes = [c_void_p]

    @classmethod
    def load(cls, path: str, error: type[CoreError] = CoreError) -> CoreLibrary:
        if (path, error) not in cls._loaded:
            cls._loaded[path, error] = cls(path, error)
        return cls._loaded[path, error]

    def has(self, name: str) -> bool:
        return getattr(self.lib, name, None) is not None

    def error(self, err: int | None) -> CoreError | None:
        """A ``TRITONSERVER_Error*`` as an exception value (the error freed); None for NULL."""
        if not err:
            return None
        code = self.lib.TRITONSERVER_ErrorCode(err)
        msg = (self.lib.TRITONSERVER_ErrorMessage(err) or b"").decode(errors="replace")
        self.lib.TRITONSERVER_ErrorDelete(err)
        return self.Error(msg, ERROR_CODES[code] if 0 <= code < len(ERROR_CODES) else str(code))

    def check(self, err: int | None) -> None:
        e = self.error(err)
        if e is not None:
            raise e

    def call(self, name: str, *args: Any) -> None:
        self.check(getattr(self.lib, name)(*args))

    def message_json(self, msg: c_void_p) -> Any:
        base, size = c_char_p(), c_size_t()
        try:
            self.call("TRITONSERVER_MessageSerializeToJson", msg, byref(base), byref(size))
            return json.loads(ctypes.string_at(base, size.value))
        finally:
            self.lib.TRITONSERVER_MessageDelete(msg)
