"""A native load generator for the C API engine: requests that never enter Python.

A Python/ctypes loop makes four Python callbacks per request from Triton's threads and reaches
about half of perf_analyzer's throughput on a small machine (measured: 2-core VM, numpy model). A *lane* keeps
Python out of the per-request path: ``_fastpath.c`` (plain C, compiled here on first use with
the system compiler) builds its request objects once, submits them, and records each latency
in native memory; Python only drains the latencies now and then.

A streaming (decoupled) model's requests are measured further, natively too: the time to each
request's first response, the gaps between its responses and how many it got (``stream``).

* closed loop (``start_closed``): ``in_flight`` requests, each re-submitted by the core's own
  thread as soon as its response has completed and the core has released it; latency counts
  from the submission.
* open loop (``start_open``): one submission per scheduled time (absolute ``CLOCK_MONOTONIC``
  ns, the clock of ``time.monotonic_ns()``); latency counts from the *scheduled* time, so a
  server that stalls shows in the latencies (MLPerf LoadGen's rule against coordinated omission).

Completions wake ``fileno()`` (an eventfd, coalesced until the next ``drain``), which a gevent
greenlet can wait on with ``gevent.socket.wait_read``. Drain at a pace (tens of ms): each wake
costs Python time, the very cost a lane exists to avoid.

Each request object holds its model, so ``stop()`` drops them once all are back: a stopped lane
does not keep a model loaded (a response kept with ``keep_last`` does, on purpose).
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p
from pathlib import Path

import numpy as np

from rig.capi.core import DATATYPES, datatype_of
from rig.common.errors import RigError
from rig.worker import native
from rig.worker.engines.base import EngineError, as_entries
from rig.worker.engines.capi.response import CapiResponse

SOURCE = Path(__file__).with_name("_fastpath.c")
CFLAGS = ("-O2", "-shared", "-fPIC", "-pthread")
MAX_DIMS = 16  # as in _fastpath.c
_ERRLEN = 1024
_MSG_TOP = 8  # MSG_TOP in _fastpath.c
_STATS = (
    "submitted",
    "completed",
    "errors",
    "in_flight",
    "issued",
    "slots",
    "output_bytes",
    "dropped",
    "issuing_done",
    "bad_outputs",
    "timeouts",
    "peak_in_server",
)

_EMPTY = np.empty(0, dtype=np.int64)
_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def build_dir() -> Path:
    return native.build_dir()


def _compiler() -> str | None:
    return native.compiler()


def build(log=print) -> str:
    """Compile ``_fastpath.c`` once per source version; returns the shared library's path."""
    return native.build(SOURCE, CFLAGS, "the native load generator", libs=("-ldl",), find_compiler=_compiler, log=log)


def _library(log=lambda msg: None) -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(build(log=log))
            sig = {
                "fp_init": (c_int, [c_char_p, c_char_p, c_size_t]),
                "fp_now_ns": (c_int64, []),
                "fp_lane_new": (
                    c_void_p,
                    [
                        c_void_p,
                        c_char_p,
                        c_int64,
                        c_int,
                        POINTER(c_int),
                        POINTER(c_char_p),
                        POINTER(c_int),
                        POINTER(c_int64),
                        POINTER(c_uint64),
                        POINTER(c_void_p),
                        POINTER(c_size_t),
                        c_int,
                        c_int,
                        c_char_p,
                        c_size_t,
                    ],
                ),
                "fp_lane_start_closed": (c_int, [c_void_p]),
                "fp_lane_start_open": (c_int, [c_void_p, c_void_p, c_size_t, c_int]),
                "fp_lane_stop": (c_int, [c_void_p, c_int64]),
                "fp_lane_drain": (None, [c_void_p, POINTER(POINTER(c_int64)), POINTER(c_size_t)]),
                "fp_lane_set_streaming": (None, [c_void_p, c_int]),
                "fp_lane_stats": (None, [c_void_p, POINTER(c_uint64)]),
                "fp_lane_set_timeout": (None, [c_void_p, c_int64]),
                "fp_lane_set_check": (c_int, [c_void_p, c_char_p, c_size_t, c_void_p, c_int, c_int, POINTER(c_int64)]),
                "fp_lane_fileno": (c_int, [c_void_p]),
                "fp_lane_first_error": (c_char_p, [c_void_p]),
                "fp_lane_error_message": (c_int, [c_void_p, c_int, c_char_p, c_size_t, POINTER(c_uint64)]),
                "fp_lane_take_last": (c_void_p, [c_void_p]),
                "fp_lane_free": (c_int, [c_void_p]),
            }
            for name, (res, args) in sig.items():
                fn = getattr(lib, name)
                fn.restype = res
                fn.argtypes = args
            _lib = lib
        return _lib


_available: tuple[bool, str] | None = None


def available() -> tuple[bool, str]:
    """Whether lanes can run here, and why not (or the library's path). Asked once a process:
    every lane asks, on the hub, and the answer does not change."""
    global _available
    if _available is None:
        try:
            _library()
            _available = (True, build(log=lambda msg: None))
        except (RigError, OSError) as e:
            _available = (False, str(e))
    return _available


def now_ns() -> int:
    """The lanes' clock: CLOCK_MONOTONIC, the same as ``time.monotonic_ns()``."""
    return _library().fp_now_ns()


class NativeLane:
    """``in_flight`` requests to one model, driven natively (see module doc): a
    ``rig.worker.engines.base.Lane``. ``engine``: a started ``CapiEngine`` (the lane reads its
    ``server``, ``core`` and ``decoupled``; the engine makes its lanes, the lane never imports
    it). ``inputs``: one entry (a dict name -> array) sent with every request, or a list of
    entries, request k of the lane carrying entry k mod N (they may differ in shape)."""

    kind = "native"
    supports_open_loop = True
    blocking_stop = True  # stop() waits in C: call it off the hub (see rig.worker.load.lanes.stop_lane)

    def __init__(
        self,
        engine,
        model: str,
        inputs: dict[str, np.ndarray] | list[dict],
        in_flight: int = 1,
        keep_last: bool = False,
        version: int = -1,
    ):
        self._h = None
        if in_flight < 1:
            raise RigError(f"in_flight must be >= 1, not {in_flight}")
        entries = as_entries(inputs)
        flat = [item for entry in entries for item in entry.items()]
        n = len(flat)
        counts = (c_int * len(entries))(*(len(e) for e in entries))
        names = (c_char_p * max(n, 1))()
        dtypes = (c_int * max(n, 1))()
        shapes = (c_int64 * (MAX_DIMS * max(n, 1)))()
        ndims = (c_uint64 * max(n, 1))()
        datas = (c_void_p * max(n, 1))()
        sizes = (c_size_t * max(n, 1))()
        keep = []
        for i, (name, arr) in enumerate(flat):
            arr = np.asarray(arr)
            dtype = datatype_of(arr, EngineError)
            if DATATYPES[dtype] == "BYTES":
                raise RigError(
                    f"input {name!r} is BYTES: lanes send fixed-size tensors only; "
                    "drive BYTES models with the Python engine"
                )
            if arr.ndim > MAX_DIMS:
                raise RigError(f"input {name!r} has {arr.ndim} dimensions, lanes take <= {MAX_DIMS}")
            arr = np.ascontiguousarray(arr)
            keep.append(arr)
            bname = name.encode()
            keep.append(bname)
            names[i] = bname
            dtypes[i] = dtype
            for k, d in enumerate(arr.shape):
                shapes[i * MAX_DIMS + k] = d
            ndims[i] = arr.ndim
            datas[i] = arr.ctypes.data
            sizes[i] = arr.nbytes
        if not engine.server:
            raise RigError("the engine has no running server: start it before making a lane")
        lib = _library()
        self._lib = lib
        self._engine = engine
        self.model = model
        self.n_entries = len(entries)
        self.in_flight = in_flight
        self.keep_last = keep_last
        self._lock = threading.Lock()  # stop / close
        self._drain_lock = threading.Lock()  # one drainer at a time (the buffer it gets is reused)
        self._errors_seen = 0
        err = ctypes.create_string_buffer(_ERRLEN)
        if lib.fp_init(engine.core.lib._name.encode(), err, _ERRLEN) != 0:
            raise RigError(f"the native load generator cannot bind to the core: {err.value.decode()}")

        h = lib.fp_lane_new(
            engine.server,
            model.encode(),
            version,
            len(entries),
            counts,
            names,
            dtypes,
            shapes,
            ndims,
            datas,
            sizes,
            in_flight,
            int(keep_last),
            err,
            _ERRLEN,
        )
        if not h:
            raise EngineError(f"cannot prepare requests to {model}: {err.value.decode()}", "INVALID_ARG")
        self._h = h  # the lane copied the inputs; `keep` may go
        self._stream: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # drained, not yet taken
        # A decoupled model streams: measure its responses from the first request on (the lane
        # would notice by itself at the first response sent before the final flag, but not a
        # stream of one response a request).
        if engine.decoupled(model):
            lib.fp_lane_set_streaming(h, 1)

    def _handle(self) -> int:
        if not self._h:
            raise RigError("this lane is closed")
        return self._h

    def set_check(self, check: dict | None) -> None:
        """Hold every response's output ``check["name"]`` to the check's datatype, shape (-1
        where it varies) and byte size where given, and to ``check["bytes"]`` where given (see
        ``rig.worker.outputs.reference_output``). Before starting."""
        if not check:
            self._lib.fp_lane_set_check(self._handle(), None, 0, None, -1, -1, None)
            return
        data = check.get("bytes")
        size = check.get("size")
        datatype = DATATYPES.index(check["datatype"]) if check.get("datatype") in DATATYPES else -1
        shape = check.get("shape")
        dims = (c_int64 * max(1, len(shape or ())))(*(shape or ()))
        if (
            self._lib.fp_lane_set_check(
                self._handle(),
                check["name"].encode(),
                2**64 - 1 if size is None else int(size),
                data,
                datatype,
                -1 if shape is None else len(shape),
                dims,
            )
            != 0
        ):
            raise RigError("out of memory setting the lane's output check")

    def set_request_timeout(self, seconds: float) -> None:
        """Count a request that has no final response ``seconds`` after its submission (its
        actual one in the open loop, not its scheduled time) as failed, once: an error with the
        message "no response within {seconds:g} s (request timeout)", a ``timeouts``, and a
        latency of minus ``seconds`` from ``drain``. A response that comes later is not counted
        again; the request's slot stays busy until it does (in the closed loop, requests that
        never come back stop the sending: the lane never holds more than ``in_flight``).
        0: no timeout (the default). Any time, running or not."""
        if seconds < 0:
            raise RigError(f"a request timeout must be >= 0 s, not {seconds}")
        self._lib.fp_lane_set_timeout(self._handle(), int(round(seconds * 1e9)))

    def counters(self) -> dict[str, int]:
        """Cumulative: responses with a wrong output, latencies lost to a full buffer, requests
        timed out, and the most requests the server held at once (submitted, not yet released)."""
        st = self.stats()
        return {
            "bad_outputs": st["bad_outputs"],
            "lost_samples": st["dropped"],
            "timeouts": st["timeouts"],
            "peak_in_server": st["peak_in_server"],
        }

    def start_closed(self) -> None:
        rc = self._lib.fp_lane_start_closed(self._handle())
        if rc != 0:
            raise RigError(
                "the lane is already running (or still has requests in flight)"
                if rc == -1
                else "cannot start the lane's thread"
            )

    def start_open(self, send_times_ns: np.ndarray, max_in_flight: int = 4096) -> None:
        """Send one request at each absolute time (``time.monotonic_ns()`` clock, sorted)."""
        times = np.ascontiguousarray(send_times_ns, dtype=np.int64)
        rc = self._lib.fp_lane_start_open(self._handle(), times.ctypes.data, times.size, int(max_in_flight))
        if rc != 0:
            raise RigError(
                "the lane is already running (or still has requests in flight)"
                if rc == -1
                else "cannot start the lane's thread"
            )

    def stop(self, timeout_s: float = 30) -> bool:
        """Stop issuing and wait (at most ``timeout_s``) until the core has released every request.

        True when nothing is in flight; the request objects are then dropped (they hold the model).
        Blocks the calling thread (and a gevent hub: call it from a thread pool there).
        """
        with self._lock:
            return bool(self._lib.fp_lane_stop(self._handle(), int(timeout_s * 1e9)))

    def drain(self) -> tuple[np.ndarray, int]:
        """Latencies (int64 ns) completed since the last drain, and the errors since then. A
        streaming model's first responses, gaps and counts of the same requests wait for
        ``stream``."""
        with self._drain_lock:
            h = self._handle()
            ptrs, ns = (POINTER(c_int64) * 4)(), (c_size_t * 4)()
            self._lib.fp_lane_drain(h, ptrs, ns)
            got = [np.ctypeslib.as_array(ptrs[i], shape=(ns[i],)).copy() if ns[i] else _EMPTY for i in range(4)]
            if ns[1] or ns[2]:
                self._stream.append((got[1], got[2], got[3]))
            errors = self.stats()["errors"]
            new, self._errors_seen = errors - self._errors_seen, errors
            return got[0], new

    def stream(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """What the drains since the last call recorded of a streaming model's requests: the
        time from each answered request's submission (its scheduled time in the open loop) to
        its first response carrying data (to its final flag where none did), the gaps between
        consecutive data responses of a request, and each answered request's count of data
        responses (int64 ns, ns, counts). None where nothing streamed."""
        with self._drain_lock:
            parts, self._stream = self._stream, []
        if not parts:
            return None
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))

    def stats(self) -> dict[str, int]:
        """Counters since the lane was made: submitted, completed, errors, in_flight, issued
        (open loop), slots (request objects), output_bytes, dropped (samples lost to an
        undrained buffer: latencies, and a streaming model's first responses, gaps and
        counts), issuing_done (1 once the open-loop schedule is through), bad_outputs,
        timeouts (``set_request_timeout``; also in errors), peak_in_server (the most requests
        between ServerInferAsync and their release at any moment)."""
        out = (c_uint64 * len(_STATS))()
        self._lib.fp_lane_stats(self._handle(), out)
        return dict(zip(_STATS, (int(v) for v in out)))

    def done(self) -> bool:
        """The open-loop schedule is sent and every request is back."""
        s = self.stats()
        return bool(s["issuing_done"]) and s["in_flight"] == 0

    def fileno(self) -> int:
        return self._lib.fp_lane_fileno(self._handle())

    def first_error(self) -> str | None:
        msg = self._lib.fp_lane_first_error(self._handle())
        return None if msg is None else msg.decode(errors="replace")

    def error_messages(self) -> dict[str, int]:
        """The distinct error messages so far and their counts (the first eight distinct ones;
        later ones count under "(other messages)")."""
        out: dict[str, int] = {}
        buf, count = ctypes.create_string_buffer(256), c_uint64()
        for i in range(_MSG_TOP + 1):
            if self._lib.fp_lane_error_message(self._handle(), i, buf, len(buf), byref(count)):
                out[buf.value.decode(errors="replace") if i < _MSG_TOP else "(other messages)"] = count.value
        return out

    def take_last_response(self) -> CapiResponse | None:
        """The response kept by ``keep_last`` (the latest successful one), now the caller's."""
        handle = self._lib.fp_lane_take_last(self._handle())
        return CapiResponse(self._engine, handle) if handle else None

    def close(self, timeout_s: float = 30) -> bool:
        """Stop (waiting at most ``timeout_s``) and free the lane; a response still kept is
        deleted. Call it before the server is deleted. False if requests were still in flight:
        the lane is then leaked on purpose (the core would call back into freed memory)."""
        with self._lock, self._drain_lock:
            h, self._h = self._h, None
            if not h:
                return True
            self._lib.fp_lane_stop(h, int(timeout_s * 1e9))
            return bool(self._lib.fp_lane_free(h))

    def __enter__(self) -> NativeLane:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if getattr(self, "_h", None):
            self.close()
