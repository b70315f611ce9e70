"""A reproducer of one lifecycle cell of triton-soak-rig, standing alone: ``rig repro`` copies
this file into its folder as ``repro.py``, with the cell written into ``CELL``.

It imports the standard library, numpy and ctypes only (no rig, no ``tritonserver`` package) and
drives Triton's C API (``libtritonserver.so``, ``tritonserver.h``) through ctypes, as the rig's
C API engine does: it starts a server over ``models/`` (model control mode NONE, strict model
config and readiness, the cell's exit timeout, the install's ``backends/``), waits for the models,
sends the cell's requests, keeps what the cell's client keeps across ``stop()`` (the last
response object, or a numpy array over its output), calls ``TRITONSERVER_ServerStop`` and times
it, lets go of what it kept, waits for the models' finalize, and calls ``TRITONSERVER_ServerDelete``.
The models record each ``initialize`` and ``finalize`` themselves (a few lines appended to their
``model.py``: one JSON line per call in the file ``$REPRO_EVIDENCE`` names), so the script tells
whether each instance's finalize ran before ``stop()`` returned, after, or never.

Usage: ``python repro.py --triton DIR`` (or ``$TRITON_HOME``): DIR in perf_analyzer's layout,
``lib/libtritonserver.so`` and ``backends/python/``. The environment it needs: ``LD_LIBRARY_PATH``
with ``DIR/lib``, the folder of the core's own libraries and this Python's ``libpython3.X.so.1.0``
(the stubs link it; the script re-executes itself once with them added where they are missing);
a stub built for this Python's version; numpy for the stubs: the Python backend's stubs embed this
interpreter, isolated (``PYTHONPATH`` is ignored there), and read the site-packages of the
``python3`` they find on ``PATH``: the script makes a small venv for them in its work folder whose
one ``.pth`` names ``$REPRO_STUB_SITE`` (a folder with numpy<2, for stubs built against numpy 1)
or else this interpreter's numpy. Exit status: 0 the cell's expected verdicts reproduced, 1 not,
2 bad input.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import sys
import sysconfig
import tempfile
import threading
import time
import venv
from ctypes import (
    CFUNCTYPE,
    POINTER,
    byref,
    c_bool,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any

import numpy as np

# The cell: written here by `rig repro` (scenario, shape, models, requests, retention, expected verdicts).
CELL: dict[str, Any] = {}

# TRITONSERVER_DataType, in the header's order; TRITONSERVER_Error_Code, likewise.
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
}
ERROR_CODES = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS"]
MEMORY_CPU = 0
RESPONSE_FINAL = 1
MODEL_CONTROL_NONE = 0
STARTUP_TIMEOUT_S = 120.0
GRACE_AFTER_STOP_S = 5.0  # the least time given to the finalizes once what was kept is let go
MAX_CONSECUTIVE_ERRORS = 3  # the fixed count stops sending after this many failures in a row (a dead stub)
STUB = "triton_python_backend_stub"

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

# Every function returns TRITONSERVER_Error* (NULL: success) unless listed in _OTHER.
SIGNATURES: dict[str, list[Any]] = {
    "TRITONSERVER_ServerOptionsNew": [POINTER(c_void_p)],
    "TRITONSERVER_ServerOptionsDelete": [c_void_p],
    "TRITONSERVER_ServerOptionsSetModelRepositoryPath": [c_void_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetBackendDirectory": [c_void_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetExitTimeout": [c_void_p, c_uint32],
    "TRITONSERVER_ServerOptionsSetModelControlMode": [c_void_p, c_int],
    "TRITONSERVER_ServerOptionsSetStrictReadiness": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetStrictModelConfig": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetModelLoadRetryCount": [c_void_p, c_uint32],
    "TRITONSERVER_ServerOptionsSetLogFile": [c_void_p, c_char_p],
    "TRITONSERVER_ServerOptionsSetLogInfo": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetLogWarn": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetLogError": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetLogVerbose": [c_void_p, c_int],
    "TRITONSERVER_ServerOptionsSetMetrics": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetGpuMetrics": [c_void_p, c_bool],
    "TRITONSERVER_ServerOptionsSetBackendConfig": [c_void_p, c_char_p, c_char_p, c_char_p],
    "TRITONSERVER_ServerNew": [POINTER(c_void_p), c_void_p],
    "TRITONSERVER_ServerDelete": [c_void_p],
    "TRITONSERVER_ServerStop": [c_void_p],
    "TRITONSERVER_ServerIsReady": [c_void_p, POINTER(c_bool)],
    "TRITONSERVER_ServerModelIsReady": [c_void_p, c_char_p, c_int64, POINTER(c_bool)],
    "TRITONSERVER_ServerMetadata": [c_void_p, POINTER(c_void_p)],
    "TRITONSERVER_ServerModelIndex": [c_void_p, c_uint32, POINTER(c_void_p)],
    "TRITONSERVER_ServerModelMetadata": [c_void_p, c_char_p, c_int64, POINTER(c_void_p)],
    "TRITONSERVER_MessageSerializeToJson": [c_void_p, POINTER(c_char_p), POINTER(c_size_t)],
    "TRITONSERVER_MessageDelete": [c_void_p],
    "TRITONSERVER_ResponseAllocatorNew": [POINTER(c_void_p), AllocFn, ReleaseFn, c_void_p],
    "TRITONSERVER_ResponseAllocatorDelete": [c_void_p],
    "TRITONSERVER_InferenceRequestNew": [POINTER(c_void_p), c_void_p, c_char_p, c_int64],
    "TRITONSERVER_InferenceRequestDelete": [c_void_p],
    "TRITONSERVER_InferenceRequestAddInput": [c_void_p, c_char_p, c_int, POINTER(c_int64), c_uint64],
    "TRITONSERVER_InferenceRequestAppendInputData": [c_void_p, c_char_p, c_void_p, c_size_t, c_int, c_int64],
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
_OPTIONAL = {"TRITONSERVER_ServerOptionsSetModelLoadRetryCount"}


class TritonError(Exception):
    def __init__(self, message: str, code: str = "UNKNOWN"):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------- the core through ctypes


class Core:
    """``libtritonserver.so`` with the signatures of the functions this script calls."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        for name, args in SIGNATURES.items():
            fn = getattr(self.lib, name, None)
            if fn is None:
                if name in _OPTIONAL:
                    continue
                raise TritonError(f"{path} has no {name}", "UNSUPPORTED")
            fn.restype = c_void_p
            fn.argtypes = args
        for name, (res, args) in _OTHER.items():
            fn = getattr(self.lib, name)
            fn.restype = res
            fn.argtypes = args
        self.libc = ctypes.CDLL(None)
        self.libc.malloc.restype = c_void_p
        self.libc.malloc.argtypes = [c_size_t]
        self.libc.free.argtypes = [c_void_p]

    def has(self, name: str) -> bool:
        return getattr(self.lib, name, None) is not None

    def error(self, err: int | None) -> TritonError | None:
        """A ``TRITONSERVER_Error*`` as an exception value (the error freed); None for NULL."""
        if not err:
            return None
        code = self.lib.TRITONSERVER_ErrorCode(err)
        message = (self.lib.TRITONSERVER_ErrorMessage(err) or b"").decode(errors="replace")
        self.lib.TRITONSERVER_ErrorDelete(err)
        return TritonError(message, ERROR_CODES[code] if 0 <= code < len(ERROR_CODES) else str(code))

    def call(self, name: str, *args: Any) -> None:
        e = self.error(getattr(self.lib, name)(*args))
        if e is not None:
            raise e

    def message_json(self, msg: c_void_p) -> Any:
        base, size = c_char_p(), c_size_t()
        try:
            self.call("TRITONSERVER_MessageSerializeToJson", msg, byref(base), byref(size))
            return json.loads(ctypes.string_at(base, size.value))
        finally:
            self.lib.TRITONSERVER_MessageDelete(msg)


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


class Server:
    """One in-process server: start, requests, stop, delete; responses held until deleted."""

    def __init__(self, core: Core):
        self.core = core
        self.server = c_void_p()
        self.allocator = c_void_p()
        self._pending: dict[int, _Pending] = {}
        self._next = 1
        self._lock = threading.Lock()
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
            else:
                if pending.response:  # a decoupled model's earlier response: keep only the latest
                    self.core.lib.TRITONSERVER_InferenceResponseDelete(pending.response)
                pending.response = response
        if flags & RESPONSE_FINAL:
            self._event(pending)

    # -- lifecycle
    def start(self, models: str, backends: str, exit_timeout: int, log_file: str, shm_prefix: str) -> None:
        """``TRITONSERVER_ServerNew`` with the rig's options: model control NONE (every model of the
        repository loaded at start), strict model config and readiness, no metrics, the Python
        backend's shared-memory regions named after this process."""
        c = self.core
        opts = c_void_p()
        c.call("TRITONSERVER_ServerOptionsNew", byref(opts))
        try:
            c.call("TRITONSERVER_ServerOptionsSetModelRepositoryPath", opts, models.encode())
            c.call("TRITONSERVER_ServerOptionsSetBackendDirectory", opts, backends.encode())
            c.call("TRITONSERVER_ServerOptionsSetExitTimeout", opts, int(exit_timeout))
            c.call("TRITONSERVER_ServerOptionsSetModelControlMode", opts, MODEL_CONTROL_NONE)
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

    def ready(self, models: list[str]) -> bool:
        flag = c_bool()
        self.core.call("TRITONSERVER_ServerIsReady", self.server, byref(flag))
        if not flag.value:
            return False
        for m in models:
            err = self.core.error(
                self.core.lib.TRITONSERVER_ServerModelIsReady(self.server, m.encode(), -1, byref(flag))
            )
            if err is not None or not flag.value:
                return False
        return True

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

    def inputs_of(self, model: str) -> list[tuple[str, str, list[int]]]:
        msg = c_void_p()
        self.core.call("TRITONSERVER_ServerModelMetadata", self.server, model.encode(), -1, byref(msg))
        meta = self.core.message_json(msg)
        return [(t["name"], t["datatype"], [int(d) for d in t.get("shape", [])]) for t in meta.get("inputs", [])]

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
    def submit(self, model: str, inputs: dict[str, np.ndarray]) -> _Pending:
        c = self.core
        req = c_void_p()
        c.call("TRITONSERVER_InferenceRequestNew", byref(req), self.server, model.encode(), -1)
        keep: list[Any] = []
        try:
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


def _array(dtype: str, shape: tuple[int, ...], base: int, size: int) -> np.ndarray:
    """A zero-copy numpy array over an output's buffer."""
    dt = np.dtype(NUMPY_OF[dtype])
    if not size:
        return np.zeros(shape, dtype=dt)
    return np.frombuffer(memoryview((ctypes.c_char * size).from_address(base)), dtype=dt).reshape(shape)


class _ResponseOwner:
    """The base of a numpy array over a response's output: the response is deleted when the last
    array over it goes (what a DLPack consumer's array does)."""

    def __init__(self, server: Server, response: int, arr: np.ndarray):
        self.server = server
        self.response = response
        self.__array_interface__ = arr.__array_interface__

    def __del__(self) -> None:
        self.server.delete_response(self.response)


class Kept:
    """What the client keeps referenced across stop(): the last response, an array over its output, or nothing."""

    def __init__(self) -> None:
        self.response = 0
        self.array: np.ndarray | None = None
        self.what = "nothing"

    def keep(self, server: Server, response: int, retain: str) -> None:
        if retain == "last-response":
            self.response = response
            self.what = "the last response (its TRITONSERVER_InferenceResponse not deleted)"
        elif retain == "last-array":
            name, (dtype, shape, base, size) = next(iter(server.outputs(response).items()))
            self.array = np.asarray(_ResponseOwner(server, response, _array(dtype, shape, base, size)))
            self.what = f"a numpy array over the last response's {name} (the response deleted only when the array goes)"
        else:
            server.delete_response(response)

    def release(self, server: Server) -> None:
        self.array = None  # its owner deletes the response
        if self.response:
            server.delete_response(self.response)
            self.response = 0


# ---------------------------------------------------------------- the load


class Load:
    """What the cell's requests came to."""

    def __init__(self) -> None:
        self.sent = 0
        self.errors = 0
        self.timeouts = 0
        self.bad_outputs = 0
        self.messages: dict[str, int] = {}
        self.lock = threading.Lock()

    def failed(self, message: str, timeout: bool = False) -> None:
        with self.lock:
            self.errors += 1
            self.timeouts += timeout
            self.messages[message] = self.messages.get(message, 0) + 1

    def verdict(self) -> str:
        """The rig's load verdict (rig.contract.verdicts.classify_load) of these figures."""
        if self.timeouts:
            return "timeouts"
        if self.errors:
            return "errors"
        if self.sent == 0:
            return "nothing_completed"
        if self.bad_outputs:
            return "wrong_outputs"
        return "ok"


def weights(size: int) -> np.ndarray:
    """The rig's template model's W (models/numpy/1/model.py): OUTPUT = INPUT @ W."""
    return (np.arange(size * size, dtype=np.float32).reshape(size, size) / (size * size)).astype(np.float32)


def make_inputs(spec: list[tuple[str, str, list[int]]], seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the model's metadata, as the rig makes them: variable dimensions (and a
    batched model's batch dimension, -1 in its metadata) 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dtype, dims in spec:
        shape = [1 if d < 0 else d for d in dims]
        dt = np.dtype(NUMPY_OF.get(dtype, np.float32))
        arr = rng.random(shape).astype(dt) if dt.kind == "f" else rng.integers(0, 8, shape).astype(dt)
        out[name] = arr
    return out


def _answer(server: Server, pending: _Pending, timeout_s: float, load: Load, check) -> int:
    """The response of one request (0 where it failed, counted in ``load``)."""
    if not pending.done.wait(timeout_s):
        load.failed("request timed out (no response within the request timeout)", timeout=True)
        return 0
    if pending.error is not None:
        load.failed(str(pending.error))
        return 0
    if check is not None and pending.response and not check(server, pending.response):
        with load.lock:
            load.bad_outputs += 1
    return pending.response


def fixed_count(server: Server, model: str, inputs, n: int, group: int, timeout_s: float, check) -> tuple[Load, int]:
    """``n`` requests, ``group`` at a time (each group submitted at once, the next once all ended:
    batches form in a batched model, every instance runs): the rig's fixed count. Returns the
    figures and the last response (0 where it failed), every other response deleted."""
    load = Load()
    last = 0
    consecutive = 0
    i = 0
    while i < n:
        size = min(group, n - i)
        waiting = []
        for _ in range(size):
            try:
                waiting.append(server.submit(model, inputs))
            except TritonError as e:
                load.failed(str(e))
        load.sent += size
        timed_out = False
        for k, pending in enumerate(waiting):
            timeouts, errors = load.timeouts, load.errors
            response = _answer(server, pending, timeout_s, load, check)
            timed_out = timed_out or load.timeouts > timeouts
            consecutive = consecutive + 1 if load.errors > errors else 0
            if i + size >= n and k == len(waiting) - 1:
                last = response
            else:
                server.delete_response(response)
        i += size
        if timed_out or consecutive >= MAX_CONSECUTIVE_ERRORS * group:
            break  # the model stopped answering (a dead stub, a stuck execute): stop sending
    return load, last


def closed_loop(server: Server, model: str, inputs, users: int, seconds: float, timeout_s: float, check) -> Load:
    """``users`` clients, each sending its next request once the last ended, for ``seconds``
    (the rig's steady workload's shape, without Locust)."""
    load = Load()
    deadline = time.monotonic() + seconds

    def user() -> None:
        while time.monotonic() < deadline:
            with load.lock:
                load.sent += 1
            try:
                pending = server.submit(model, inputs)
            except TritonError as e:
                load.failed(str(e))
                continue
            response = _answer(server, pending, timeout_s, load, check)
            server.delete_response(response)
            if not response and load.timeouts:
                return

    threads = [threading.Thread(target=user, daemon=True) for _ in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout_s + 5)
    return load


def template_check(size: int, inputs: dict[str, np.ndarray]):
    """The template model's answer, INPUT @ W, as a check of each response."""
    want = np.matmul(next(iter(inputs.values())), weights(size)).astype(np.float32)

    def check(server: Server, response: int) -> bool:
        outs = server.outputs(response)
        if not outs:  # a decoupled model's final flag alone: answered without data
            return True
        dtype, shape, base, size_b = outs.get("OUTPUT", next(iter(outs.values())))
        got = _array(dtype, shape, base, size_b)
        return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-5, atol=1e-5))

    return check


# ---------------------------------------------------------------- finalize evidence


def read_evidence(path: Path) -> list[dict[str, Any]]:
    """The lines the models appended (``init``, ``finalize_start``, ``finalize_end``), one JSON object each."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line cut short by a stub that died mid-write
    return out


def finalize_summary(marks: list[dict[str, Any]], t_stop_returned: float | None) -> dict[str, Any]:
    """Each instance that initialized: when its finalize ended, relative to stop()'s return
    (``before``, ``after``, ``never``), and the counts (as the rig's finalize columns)."""
    inits = {(m.get("pid"), m.get("instance")): m for m in marks if m.get("phase") == "init"}
    ends = {(m.get("pid"), m.get("instance")): m for m in marks if m.get("phase") == "finalize_end"}
    starts = {(m.get("pid"), m.get("instance")) for m in marks if m.get("phase") == "finalize_start"}
    instances = []
    for key in sorted(inits, key=lambda k: (str(k[1]), str(k[0]))):
        end = ends.get(key)
        if end is None:
            when, delta = "never", None
        elif t_stop_returned is not None and end["t_mono"] <= t_stop_returned:
            when, delta = "before", end["t_mono"] - t_stop_returned
        else:
            when, delta = "after", None if t_stop_returned is None else end["t_mono"] - t_stop_returned
        instances.append(
            {
                "instance": key[1],
                "pid": key[0],
                "when": when,
                "seconds": delta,
                "called": key in starts,
                "error": end.get("error") if end else None,
            }
        )
    return {
        "expected": len(instances),
        "before": sum(i["when"] == "before" for i in instances),
        "after": sum(i["when"] == "after" for i in instances),
        "never": sum(i["when"] == "never" for i in instances),
        "errors": sum(1 for i in instances if i["error"]),
        "instances": instances,
    }


def lifecycle_verdict(load_failed: bool, stop_error: str | None, finalize: dict[str, Any]) -> str:
    """The rig's lifecycle verdict (rig.contract.verdicts.classify) from what this script sees: the
    start, the stop's error, and the finalizes that ended before stop() returned."""
    if load_failed:
        return "load_failed"
    if stop_error:
        return "exit_timeout" if "exit timeout" in stop_error.lower() else "stop_error"
    if finalize["errors"]:
        return "finalize_error"
    if finalize["expected"] > finalize["before"]:
        return "finalize_missing"
    return "clean"


def admits(expected: str, got: str) -> bool:
    """Whether ``got`` is the expected verdict or one of its alternatives (``exit_timeout|clean``)."""
    return got in str(expected).split("|")


# ---------------------------------------------------------------- the server's log

_LOG_KEEP = (
    "loading:",
    "successfully loaded",
    "failed to load",
    "Waiting for in-flight",
    "in-flight inferences",
    "All models are stopped",
    "live models",
    "unloading",
    "unloaded",
    "Exit timeout",
    "exit timeout",
    "Finalize",
    "finalize",
    "Stub process",
    "unhealthy",
    "Failed",
    "failed",
)
_LOG_NOISE = ("CudaDriverHelper", "CUDA", "pinned memory", "GPU metrics", "Unable to find")
_LOG_LINE = re.compile(r"^([IWE])(\d{4} )?(\d\d:\d\d:\d\d\.\d+) +\d+ ([\w.]+:\d+)\] (.*)$")


def log_lines(text: str, limit: int = 40) -> list[str]:
    """The lines of Triton's log that tell the story of the load and the stop (not its tables, not
    a CPU-only machine's CUDA words), shortened to level, time, source and the message's first line;
    a message that comes again with other numbers (every raising execute's) once, with its count."""
    out: list[str] = []
    seen: dict[str, int] = {}  # the message with its numbers taken out -> its line in out
    again: dict[int, int] = {}
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if not m:
            continue
        level, _, clock, where, message = m.groups()
        message = message.split("\\n")[0].strip()  # the log escapes a message's newlines
        if any(n in message for n in _LOG_NOISE) or not (level == "E" or any(k in message for k in _LOG_KEEP)):
            continue
        key = level + re.sub(r"\d+", "N", message)
        if key in seen and not message.startswith('"Timeout '):
            again[seen[key]] = again.get(seen[key], 0) + 1
            continue
        seen[key] = len(out)
        out.append(f"{level} {clock} {where}] {message[:300]}")
    for i, count in again.items():
        out[i] += f" (and {count} more like it)"
    return out if len(out) <= limit else [*out[:10], f"... ({len(out) - limit} lines left out)", *out[-(limit - 10) :]]


# ---------------------------------------------------------------- the environment


def library_dirs(triton: Path, extra: list[str]) -> list[str]:
    """The folders the loader must search (``LD_LIBRARY_PATH``): this Python's libpython (the stubs
    link it), the folder the core's file really lies in (its own libraries beside it: a wheel's
    ``nvidia_pytriton.libs``), the install's ``lib/``, and any given."""
    dirs = list(extra)
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir and os.path.isdir(libdir):
        dirs.append(libdir)
    core = triton / "lib" / "libtritonserver.so"
    dirs += [str(Path(os.path.realpath(core)).parent), str(triton / "lib")]
    return list(dict.fromkeys(d for d in dirs if d))


def ensure_environment(triton: Path, extra: list[str]) -> None:
    """Re-execute this script once with the library folders it needs on ``LD_LIBRARY_PATH`` (the
    loader reads it only at exec) where they are missing."""
    have = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    need = library_dirs(triton, extra)
    if all(d in have for d in need) or os.environ.get("REPRO_REEXEC") == "1":
        return
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*need, *[d for d in have if d]])
    env["REPRO_REEXEC"] = "1"  # once: never a loop
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def stub_environment(work: Path, stub_site: str | None) -> str:
    """A venv for the backend stubs (made with this interpreter) whose one ``.pth`` names the folder
    their numpy comes from: ``stub_site`` (numpy<2), else a folder of links to this interpreter's
    numpy alone. The stubs embed Python isolated and find their site-packages from the ``python3``
    on ``PATH``: its ``bin/`` goes first there. Returns the numpy folder named."""
    env = work / "stub-venv"
    venv.create(env, with_pip=False, symlinks=True, clear=True)
    numpy_dir = stub_site
    if not numpy_dir:
        own = Path(np.__file__).resolve().parent
        alone = work / "stub-numpy"
        alone.mkdir(exist_ok=True)
        for item in [own, *own.parent.glob("numpy.libs"), *own.parent.glob(f"numpy-{np.__version__}.dist-info")]:
            link = alone / item.name
            if not link.exists():
                link.symlink_to(item)
        numpy_dir = str(alone)
    found = sorted(env.glob("lib*/python*/site-packages"))
    site = found[0] if found else env / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (site / "repro_stub_numpy.pth").write_text(numpy_dir + "\n")
    os.environ["PATH"] = str(env / "bin") + os.pathsep + os.environ.get("PATH", "")
    return numpy_dir


def stubs_alive() -> int:
    """Backend stubs of this process still running (``/proc``: children named like the stub)."""
    me, count = os.getpid(), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me and STUB.startswith(name):
            count += 1
    return count


# ---------------------------------------------------------------- the cell


class Report:
    """The report's lines, each printed as it comes (a crash shows how far the run got)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def append(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="repro.py",
        description=f"Reproduce {CELL.get('title', 'a triton-soak-rig cell')} with Triton's C API alone.",
    )
    p.add_argument(
        "--triton",
        default=os.environ.get("TRITON_HOME"),
        help="the Triton install: lib/libtritonserver.so and backends/ (default $TRITON_HOME)",
    )
    p.add_argument(
        "--exit-timeout",
        type=int,
        default=CELL.get("exit_timeout", 5),
        help=f"the server's exit timeout, seconds (default {CELL.get('exit_timeout', 5)})",
    )
    p.add_argument(
        "--stub-site",
        default=os.environ.get("REPRO_STUB_SITE") or None,
        help="a folder with numpy<2 for backend stubs built against numpy 1 (default $REPRO_STUB_SITE; "
        "none: this interpreter's numpy)",
    )
    p.add_argument(
        "--lib-path",
        default=os.environ.get("REPRO_LIB_PATH", ""),
        help="more library folders the core needs, ':'-separated (default $REPRO_LIB_PATH)",
    )
    p.add_argument("--models", default=str(Path(__file__).resolve().parent / "models"), help="the model repository")
    p.add_argument("--work", help="where the log, the evidence and the stubs' venv go (default a new temporary folder)")
    return p.parse_args(argv)


def reproduce(args: argparse.Namespace) -> int:
    cell = CELL
    triton = Path(args.triton).resolve()
    core_path = triton / "lib" / "libtritonserver.so"
    backends = triton / "backends"
    if not core_path.exists() or not (backends / "python").is_dir():
        print(f"repro.py: {triton} has no lib/libtritonserver.so and backends/python/", file=sys.stderr)
        return 2
    extra = [d for d in args.lib_path.split(os.pathsep) if d]
    ensure_environment(triton, extra)
    work = Path(args.work or tempfile.mkdtemp(prefix="triton-repro-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    evidence = work / "evidence.jsonl"
    evidence.unlink(missing_ok=True)
    log_file = work / "triton.log"
    log_file.unlink(missing_ok=True)
    stub_numpy = stub_environment(work, args.stub_site)
    os.environ["REPRO_EVIDENCE"] = str(evidence)  # the models' finalize evidence (their model.py's last lines)
    models: list[str] = cell["models"]
    exit_timeout = int(args.exit_timeout)
    report = Report()
    report.append(f"reproducing: {cell['title']}")
    report.append(f"Triton install: {triton} (core {os.path.realpath(core_path)})")
    report.append(
        f"python: {sys.executable} {platform.python_version()}, numpy {np.__version__}; the stubs' numpy: "
        + (f"{stub_numpy} (REPRO_STUB_SITE)" if args.stub_site else f"this one's, linked alone in {stub_numpy}")
    )

    server = Server(Core(str(core_path)))
    load: Load | None = None
    kept = Kept()
    version = "unknown"
    load_failed = None
    t_stop = t_ret = None
    stop_error: str | None = None
    try:
        server.start(
            str(Path(args.models).resolve()), str(backends), exit_timeout, str(log_file), f"repro{os.getpid()}_"
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not server.ready(models):
            if time.monotonic() > deadline:
                raise TritonError(f"not ready after {STARTUP_TIMEOUT_S:g} s", "UNAVAILABLE")
            time.sleep(0.005)
    except TritonError as e:
        load_failed = str(e)
    if load_failed is None:
        version = server.version()
        report.append(f"Triton version (server metadata): {version}")
        report.append(
            f"server: model control NONE, strict model config and readiness, exit_timeout {exit_timeout} s, "
            f"backends {backends}"
        )
        model = models[0]
        inputs = make_inputs(server.inputs_of(model))
        check = template_check(int(cell["size"]), inputs) if cell.get("template") else None
        timeout_s = float(cell.get("request_timeout", 5.0))
        workload = cell.get("workload")
        if workload:
            load = closed_loop(
                server, model, inputs, int(workload["users"]), float(workload["seconds"]), timeout_s, check
            )
            said = f"{workload['users']} clients in a closed loop for {workload['seconds']:g} s"
            last = 0
            if cell["retain"] != "none":  # one more request, kept
                extra_load, last = fixed_count(server, model, inputs, 1, 1, timeout_s, check)
                load.sent += extra_load.sent
                load.errors += extra_load.errors
                load.timeouts += extra_load.timeouts
                load.bad_outputs += extra_load.bad_outputs
                for message, count in extra_load.messages.items():
                    load.messages[message] = load.messages.get(message, 0) + count
        else:
            group = int(cell.get("in_flight", 1))
            load, last = fixed_count(server, model, inputs, int(cell["requests"]), group, timeout_s, check)
            said = f"{cell['requests']} requests, {group} at a time" if group > 1 else f"{cell['requests']} requests"
        if last:
            kept.keep(server, last, cell["retain"])
        else:
            server.delete_response(last)
        report.append(
            f"load: {said} to {model}: {load.sent} sent, {load.errors} failed ({load.timeouts} unanswered), "
            f"{load.bad_outputs} wrong outputs"
        )
        for message, count in sorted(load.messages.items(), key=lambda kv: -kv[1])[:3]:
            report.append(f"  {count} x {message[:200]}")
        report.append(f"kept across stop(): {kept.what}")

        t_stop = time.monotonic()
        err = server.stop()
        t_ret = time.monotonic()
        stop_error = None if err is None else str(err)
        before = finalize_summary(read_evidence(evidence), t_ret)
        report.append(
            f"stop: TRITONSERVER_ServerStop returned after {t_ret - t_stop:.2f} s ({stubs_alive()} stub(s) alive "
            f"then, {before['before']} of {before['expected']} finalize(s) done), "
            + (f"error: {stop_error}" if stop_error else "no error")
        )
        # What a careful client does next: let go of what it kept, let the models unload, then delete the
        # server (deleting it while a model still unloads has aborted core 2.51).
        kept.release(server)
        grace = time.monotonic() + max(GRACE_AFTER_STOP_S, exit_timeout)
        while time.monotonic() < grace:
            s = finalize_summary(read_evidence(evidence), t_ret)
            if s["before"] + s["after"] >= s["expected"] and not stubs_alive() and not server.models_loaded():
                break
            time.sleep(0.02)
    finalize = finalize_summary(read_evidence(evidence), t_ret)
    if load_failed is not None:
        report.append(f"start: the server or a model did not become ready: {load_failed}")
    else:
        report.append(
            f"finalize: {finalize['expected']} instance(s): {finalize['before']} before stop() returned, "
            f"{finalize['after']} after, {finalize['never']} never"
        )
        for i in finalize["instances"]:
            if i["when"] == "before":
                when = f"finalize ended {-i['seconds']:.2f} s before stop() returned"
            elif i["when"] == "after":
                when = f"finalize ended {i['seconds']:.2f} s after stop() returned"
            else:
                when = "finalize never ended" + ("" if i["called"] else " (never called)")
            report.append(
                f"  {i['instance']} (stub pid {i['pid']}): {when}" + (f": {i['error']}" if i["error"] else "")
            )
    lines = log_lines(log_file.read_text(errors="replace") if log_file.exists() else "")
    if lines:
        report.append("server log (the lines that matter):")
        for line in lines:
            report.append(f"  {line}")

    lifecycle = lifecycle_verdict(load_failed is not None, stop_error, finalize)
    load_verdict = "not_measured" if load is None else load.verdict()
    want = cell["expected"]
    meaning = cell.get("meanings", {}).get(lifecycle, "")
    report.append(f"verdict: {lifecycle}" + (f" ({meaning})" if meaning else "") + f"; load: {load_verdict}")
    ok = admits(want["lifecycle"], lifecycle) and admits(want["load"], load_verdict)
    report.append(
        f"expected: {want['lifecycle']}, load {want['load']} ({want['source']}): "
        + ("REPRODUCED" if ok else "NOT reproduced")
    )
    result = {
        "triton_version": version,
        "exit_timeout": exit_timeout,
        "load_failed": load_failed,
        "stop_seconds": None if t_ret is None or t_stop is None else t_ret - t_stop,
        "stop_error": stop_error,
        "lifecycle": lifecycle,
        "load": load_verdict,
        "finalize": {k: v for k, v in finalize.items() if k != "instances"},
        "reproduced": ok,
    }
    (work / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    # The verdict is out: a crash in the teardown (core 2.51 has aborted there) cannot take it away.
    t_delete = time.monotonic()
    deleted = threading.Thread(target=server.delete, daemon=True)
    deleted.start()
    deleted.join(exit_timeout + 30)
    if deleted.is_alive():
        report.append(f"TRITONSERVER_ServerDelete still blocked after {exit_timeout + 30} s")
    elif load_failed is None:
        report.append(f"TRITONSERVER_ServerDelete returned after {time.monotonic() - t_delete:.2f} s")
    report.append(f"work folder: {work} (triton.log, evidence.jsonl, result.json)")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    if not CELL:
        print("repro.py: no cell: this is the template `rig repro` copies; run the repro.py it writes", file=sys.stderr)
        return 2
    args = _parse(argv)
    if not args.triton:
        print("repro.py: give the Triton install: --triton DIR or TRITON_HOME=DIR", file=sys.stderr)
        return 2
    return reproduce(args)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the core's threads must not hold the exit
