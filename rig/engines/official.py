"""Engine over Triton's official in-process Python API (the ``tritonserver`` package).

The package ships as a wheel in the NGC images ``nvcr.io/nvidia/tritonserver:<yy.mm>-py3``
(``/opt/tritonserver/python/tritonserver-*.whl``) and, for 2.70+, on PyPI for CPython 3.12 on
manylinux_2_39 only. It wraps ``libtritonserver.so`` of the same release with pybind11.

What this engine relies on, read from triton-inference-server/core ``python/tritonserver``
(``_api/_server.py``, ``_api/_model.py``, ``_api/_response.py``, ``_api/_tensor.py``,
``_api/_request.py``, ``_c/tritonserver_pybind.cc``, ``python/test/test_api.py``):

* ``Options`` is a slots dataclass; ``Server(options).start(wait_until_ready=False)`` calls
  ``TRITONSERVER_ServerNew`` (models load there in NONE/POLL mode).
* ``Server.ready()``, ``Server.metadata()["version"]``, ``Server.model(name)`` (a cheap handle,
  not validated), ``Server.models()`` (a dict keyed by ``(name, version)`` of ``Model`` objects
  that carry ``.state``), ``Server.load(name)``, ``Server.unload(name)``, ``Server.stop()``.
* ``Model.ready()``, ``Model.metadata()``, ``Model.config()``, ``Model.infer(inputs=...)``
  (a blocking iterator of ``InferenceResponse``) and ``Model.async_infer(inputs=...)``.
* ``InferenceResponse.outputs`` is a dict of ``Tensor``; ``.error`` a ``TritonError`` or None.
* Errors are ``tritonserver.TritonError`` subclasses named after Triton's error codes.

The rig measures upstream issue server#8755 (a referenced response keeps its model loaded and
``stop()`` waits out ``exit_timeout``), so this engine keeps **no** reference to a response
once it has handed it over: no caches, no lists, no exception chains that hold one, and it
cuts the reference cycle the bindings build around an error response (see ``_scrub``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import threading
import time
from typing import Any, Callable

import numpy as np

from rig.engines.base import (
    Engine,
    EngineError,
    ModelMetadata,
    Response,
    ServerOptions,
    TensorSpec,
)

# Error classes of the bindings (tritonserver._c) → Triton's error-code names
# (TRITONSERVER_ERROR_*). ``CancelledError`` only exists in newer bindings, if at all.
_CODE_BY_CLASS = {
    "NotFoundError": "NOT_FOUND",
    "InternalError": "INTERNAL",
    "InvalidArgumentError": "INVALID_ARG",
    "UnavailableError": "UNAVAILABLE",
    "UnsupportedError": "UNSUPPORTED",
    "AlreadyExistsError": "ALREADY_EXISTS",
    "CancelledError": "CANCELLED",
    "UnknownError": "UNKNOWN",
    "TritonError": "UNKNOWN",
}

_STATE_PRIORITY = ("UNLOADING", "LOADING", "READY", "UNAVAILABLE")

_log = logging.getLogger(__name__)


# ---------------------------------------------------------------- probe

def _explain(message: str) -> str:
    """One line that says why the import failed and what to do about it."""
    lines = [ln.strip() for ln in str(message).splitlines() if ln.strip()]
    full = lines[0] if lines else "unknown error"
    first = full if len(full) <= 300 else full[:297] + "..."
    if "No module named" in full:
        return (first + "; the package ships in the NGC image nvcr.io/nvidia/tritonserver:<yy.mm>-py3 "
                "(pip install /opt/tritonserver/python/tritonserver-*.whl); the PyPI wheels need "
                "CPython 3.12 on glibc 2.39+")
    if "GLIBCXX" in full or "GLIBC_" in full or "CXXABI" in full:
        return (first + "; the bindings need a newer libstdc++/glibc (GCC 13+, glibc 2.39+) than "
                "this host has: run in the NGC image")
    if "libtritonserver" in full:
        return (first + "; the bindings need libtritonserver.so of the same release "
                "(in the NGC image: /opt/tritonserver/lib)")
    return first


def probe(isolated: bool = False) -> tuple[bool, str]:
    """Can ``import tritonserver`` work here? ``(True, what was found)`` or ``(False, why not)``.

    Never raises. ``isolated=True`` imports in a child interpreter instead, so a binding that
    crashes on import (a native fault, not an exception) cannot take this process down.
    """
    if isolated:
        import subprocess
        code = ("import tritonserver as t; "
                "print(getattr(t, '__version__', '?'), getattr(t, '__file__', '?'))")
        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, timeout=120)
        except Exception as e:  # noqa: BLE001 - probe must not raise
            return False, f"could not run {sys.executable} to probe tritonserver: {e}"
        if proc.returncode == 0:
            out = proc.stdout.strip().split()
            version = out[0] if out else "?"
            where = out[1] if len(out) > 1 else "?"
            return True, f"tritonserver {version} ({where}; checked in a child process)"
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        if lines:
            return False, _explain(lines[-1])
        return False, f"importing tritonserver ended the child process with status {proc.returncode}"
    try:
        import tritonserver as ts
    except Exception as e:  # noqa: BLE001 - ImportError, OSError, garbled binding errors, ...
        return False, _explain(f"{e}" if isinstance(e, ImportError) else f"{type(e).__name__}: {e}")
    missing = [a for a in ("Server", "Options", "ModelControlMode") if not hasattr(ts, a)]
    if missing:
        return False, (f"the tritonserver module at {getattr(ts, '__file__', '?')} has no "
                       f"{', '.join(missing)}: it is not Triton's in-process API package")
    return True, f"tritonserver {getattr(ts, '__version__', '?')} ({getattr(ts, '__file__', '?')})"


def _import_tritonserver():
    ok, why = probe()
    if not ok:
        raise EngineError(f"the official Python API is not usable here: {why}", "UNAVAILABLE")
    import tritonserver
    return tritonserver


# ---------------------------------------------------------------- helpers

def _message(exc: BaseException) -> str:
    """The error's own text. The bindings append the failed ``InferenceResponse`` to a response
    error's ``args`` (``error.args += (result,)``), so ``str(exc)`` would render (and a kept
    exception would hold) the response: take only the first argument."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], str):
        return args[0]
    text = str(exc) if not args else str(args[0])
    return text or type(exc).__name__


def _code(exc: BaseException) -> str:
    for klass in type(exc).__mro__:
        code = _CODE_BY_CLASS.get(klass.__name__)
        if code:
            return code
    if isinstance(exc, (TypeError, ValueError, KeyError)):
        return "INVALID_ARG"
    return "UNKNOWN"


def _engine_error(exc: BaseException) -> EngineError:
    """A fresh ``EngineError`` that keeps nothing of ``exc`` but its text and code.

    Callers raise it *outside* their ``except`` block so that ``__context__`` stays empty: a
    chained ``TritonError`` would keep the failed response (and so the model) alive.
    """
    if isinstance(exc, EngineError):
        return EngineError(str(exc), exc.code)
    return EngineError(_message(exc), _code(exc))


def _scrub(exc: BaseException, response: Any = None) -> None:
    """Break the reference cycle the bindings build around a failed response.

    ``InferenceResponse._from_tritonserver_inference_response`` sets ``result.error = error`` and
    ``error.args += (result,)`` (older releases append ``asdict(result)`` items instead), and a
    raised error's traceback holds the iterator frame that held the response. That cycle is
    freed only by the cyclic GC, and until then it keeps the response, and so its model, alive:
    the very symptom the rig measures. Cut it so plain reference counting frees the response.
    """
    extra = exc.args[1:]
    exc.args = exc.args[:1]
    for obj in (*extra, response):
        if obj is not None and getattr(obj, "error", None) is exc:
            # InferenceResponse is a plain (non-frozen) dataclass: the attribute is writable.
            obj.error = None
    exc.__traceback__ = None


def _enum_name(value: Any) -> str:
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    return str(value).rsplit(".", 1)[-1]


def _options_kwargs(options: ServerOptions, ts) -> dict[str, Any]:
    """Map the rig's ``ServerOptions`` onto keyword arguments of ``ts.Options``."""
    modes = {"none": "NONE", "explicit": "EXPLICIT", "poll": "POLL"}
    mode_name = modes.get(str(options.model_control).lower())
    if mode_name is None:
        raise EngineError(f"unknown model_control {options.model_control!r} "
                          f"(one of: {', '.join(modes)})", "INVALID_ARG")
    kwargs: dict[str, Any] = {
        "model_repository": options.model_repository,
        "model_control_mode": getattr(ts.ModelControlMode, mode_name),
        "exit_timeout": int(options.exit_timeout_s),
        "strict_readiness": bool(options.strict_readiness),
        "log_verbose": int(options.log_verbose),
        # The package defaults these to False; the C API and the tritonserver binary log
        # INFO/WARN/ERROR. Enable them so both engines leave the same evidence (stop()'s
        # "Timeout N: Found 1 live models ..." lines are INFO).
        "log_info": True,
        "log_warn": True,
        "log_error": True,
        "model_load_retry_count": int(options.model_load_retries),
        "strict_model_config": bool(options.strict_model_config),
    }
    if options.startup_models:
        kwargs["startup_models"] = list(options.startup_models)
    if options.backend_directory:
        kwargs["backend_directory"] = options.backend_directory
    # else: the package's default, /opt/tritonserver/backends (the NGC layout)
    if options.log_file:
        kwargs["log_file"] = options.log_file
    if options.backend_config:
        config: dict[str, dict[str, str]] = {}
        for backend, key, value in options.backend_config:
            config.setdefault(backend, {})[key] = str(value)
        kwargs["backend_configuration"] = config

    # Options is a dataclass in every release read (2.41 … 2.6x); drop what an older one lacks,
    # but refuse to silently ignore something the user asked for.
    if dataclasses.is_dataclass(ts.Options):
        known = {f.name for f in dataclasses.fields(ts.Options)}
        optional = {"log_info", "log_warn", "log_error", "log_verbose", "strict_readiness",
                    "model_load_retry_count", "strict_model_config"}
        for key in [k for k in kwargs if k not in known]:
            if key not in optional:
                raise EngineError(f"this tritonserver package's Options has no {key!r}; "
                                  f"it cannot honour that server option", "UNSUPPORTED")
            del kwargs[key]
    return kwargs


def _prepare_inputs(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """C-contiguous numpy arrays. The request points at their memory (no copy), so the caller
    keeps this dict alive until the request completes."""
    prepared = {}
    for name, value in inputs.items():
        arr = np.asarray(value)
        if arr.dtype != object and not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        prepared[name] = arr
    return prepared


def _is_host(tensor) -> bool:
    memory_type = getattr(tensor, "memory_type", None)
    return memory_type is None or _enum_name(memory_type) in ("CPU", "CPU_PINNED")


def _copy_tensor(tensor) -> np.ndarray:
    """A numpy copy of an output ``Tensor`` that shares nothing with the response."""
    if _enum_name(getattr(tensor, "data_type", "")) == "BYTES":
        return np.array(tensor.to_bytes_array(), dtype=object, copy=True)
    if not _is_host(tensor):
        # to_host() needs cupy in the bindings; it allocates a fresh host tensor.
        tensor = tensor.to_host()
    return np.array(np.from_dlpack(tensor), copy=True)


class _Picker:
    """Walks a request's responses: keeps the one with outputs (or the last), or the first error.

    Version differences: up to about 2.54 ``Model.infer`` defaults to ``raise_on_error=True`` and
    the iterator raises the response's error; newer iterators return it in ``response.error``.
    Both are handled. Non-decoupled models send one response flagged FINAL; a separate empty
    final response (decoupled models) is skipped in favour of the one with outputs.
    """

    def __init__(self):
        self.chosen = None
        self.error: EngineError | None = None

    def take(self, response) -> None:
        failure = getattr(response, "error", None)
        if failure is not None:
            if self.error is None:
                self.error = _engine_error(failure)
            _scrub(failure, response)
        elif self.chosen is None or (not self.chosen.outputs and response.outputs):
            self.chosen = response

    def raised(self, exc: BaseException) -> None:
        """Older iterators raise the response's error."""
        if self.error is None:
            self.error = _engine_error(exc)
        _scrub(exc)

    def result(self) -> tuple[Any, EngineError | None]:
        chosen, self.chosen = self.chosen, None
        if self.error is not None:
            return None, self.error
        if chosen is None:
            return None, EngineError("the request completed without a response", "INTERNAL")
        return chosen, None


def _pick_response(iterator) -> tuple[Any, EngineError | None]:
    picker = _Picker()
    try:
        for response in iterator:
            picker.take(response)
            response = None  # noqa: F841 - drop the loop variable's reference now
    except Exception as e:  # noqa: BLE001
        picker.raised(e)
    return picker.result()


async def _pick_response_async(iterator) -> tuple[Any, EngineError | None]:
    picker = _Picker()
    try:
        async for response in iterator:
            picker.take(response)
            response = None  # noqa: F841
    except Exception as e:  # noqa: BLE001
        picker.raised(e)
    return picker.result()


# ---------------------------------------------------------------- response

class OfficialResponse(Response):
    """Wraps one ``tritonserver.InferenceResponse``; the only reference the rig gets to it."""

    __slots__ = ("_response",)

    def __init__(self, response):
        self._response = response

    def _live(self):
        response = self._response
        if response is None:
            raise EngineError("the response was released", "INVALID_ARG")
        return response

    def outputs(self) -> dict[str, np.ndarray]:
        tensors = self._live().outputs
        copies = {}
        error = None
        try:
            for name, tensor in tensors.items():
                copies[name] = _copy_tensor(tensor)
        except Exception as e:  # noqa: BLE001 - e.g. BF16 (no numpy dtype), GPU memory without cupy
            error = EngineError(f"cannot copy output: {_message(e)}", _code(e))
        if error is not None:
            raise error
        return copies

    def output_view(self, name: str) -> np.ndarray:
        """``np.from_dlpack`` over the output ``Tensor``. Since 2.55 (core PR #426) that memory
        is owned by the core response, so the array keeps the response (and its model) alive;
        before, the bindings' allocator owned a separate buffer. An output in GPU memory comes
        back as a cupy array (numpy cannot view device memory)."""
        outputs = self._live().outputs
        if name not in outputs:
            raise EngineError(f"no output {name!r} (have: {', '.join(outputs) or 'none'})",
                              "NOT_FOUND")
        tensor = outputs[name]
        if not _is_host(tensor):
            try:
                import cupy
            except ImportError:
                raise EngineError(f"output {name!r} is in GPU memory and cupy is not installed",
                                  "UNSUPPORTED") from None
            return cupy.from_dlpack(tensor)
        return np.from_dlpack(tensor)

    def release(self) -> None:
        self._response = None


# ---------------------------------------------------------------- engine

def _native_thread_class():
    """A real OS thread even where Locust's gevent has patched ``threading`` (a greenlet running
    an asyncio loop forever would block the hub)."""
    try:
        from gevent import monkey

        if monkey.is_module_patched("threading"):
            return monkey.get_original("threading", "Thread")
    except ImportError:
        pass
    return threading.Thread


class _LoopThread:
    """One asyncio loop on a daemon thread, for ``Model.async_infer``."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = _native_thread_class()(target=self._run, name="tritonserver-async", daemon=True)
        self.thread.start()

    def _run(self):
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # already closed
            pass
        self.thread.join(timeout_s)


class OfficialEngine(Engine):
    name = "tritonserver"

    def __init__(self):
        self._ts = None
        self._server = None          # tritonserver.Server
        self._closed = False
        self._stopped = False
        self._stop_message: str | None = None
        self._loop: _LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._tasks: set = set()     # in-flight async requests only (removed when done)

    # ------------------------------------------------------------ lifecycle

    def _require(self):
        if self._server is None:
            raise EngineError("the server is not started", "UNAVAILABLE")
        return self._server

    def start(self, options: ServerOptions) -> None:
        if self._closed:
            raise EngineError("this engine was closed; make a new one", "UNAVAILABLE")
        if self._server is not None:
            raise EngineError("the server is already started", "ALREADY_EXISTS")
        ts = _import_tritonserver()
        kwargs = _options_kwargs(options, ts)
        server = None
        error = None
        try:
            server = ts.Server(ts.Options(**kwargs))
            server.start(wait_until_ready=False)
        except Exception as e:  # noqa: BLE001
            error = _engine_error(e)
            server = None
        if error is not None:
            raise error
        self._ts = ts
        self._server = server

    def stop(self) -> str | None:
        server = self._server
        if server is None:
            return "the server is not started"
        if self._stopped:
            # A second TRITONSERVER_ServerStop returns at once (the core is already EXITING),
            # and after a clean stop the Server object refuses calls: report the first outcome.
            return self._stop_message
        message = None
        try:
            # Releases the GIL from 2.49 (core PR #381); before, it held the GIL for the whole
            # exit_timeout, so Python threads (and request-release callbacks) stalled meanwhile.
            server.stop()
        except Exception as e:  # noqa: BLE001 - "Exit timeout expired. Exiting immediately."
            message = _message(e)
        finally:
            self._stopped = True
            self._stop_message = message
            self._drain_async(2.0)
            self._shutdown_loop()
        return message

    def close(self) -> None:
        """Drop the ``Server``. After a clean ``stop()`` the bindings already freed the core
        server; after a failed one this frees it (``TRITONSERVER_ServerDelete``, whose second
        stop returns at once) even if a response still holds a model."""
        self._shutdown_loop()
        self._server = None
        self._ts = None
        self._closed = True

    def _drain_async(self, timeout_s: float) -> None:
        """Give completions that arrived during stop() a moment to reach their callbacks."""
        deadline = time.monotonic() + timeout_s
        while self._loop is not None and self._tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def _shutdown_loop(self) -> None:
        with self._loop_lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.shutdown()
        self._tasks.clear()

    # ------------------------------------------------------------ queries

    def is_ready(self) -> bool:
        server = self._server
        if server is None:
            return False
        try:
            return bool(server.ready())
        except Exception:  # noqa: BLE001 - UNAVAILABLE "Server exiting" after stop
            return False

    def model_ready(self, model: str) -> bool:
        server = self._server
        if server is None:
            return False
        try:
            return bool(server.model(model).ready())
        except Exception:  # noqa: BLE001
            return False

    def server_version(self) -> str:
        server = self._require()
        error = None
        try:
            version = server.metadata().get("version")
            if version:
                return str(version)
        except Exception as e:  # noqa: BLE001
            error = _engine_error(e)
        if error is not None:
            raise error
        return str(getattr(self._ts, "__version__", "unknown"))

    def model_metadata(self, model: str) -> ModelMetadata:
        server = self._require()
        error = None
        meta = None
        try:
            handle = server.model(model)
            meta = handle.metadata()
        except Exception as e:  # noqa: BLE001
            error = _engine_error(e)
        if error is not None:
            raise error
        try:
            # Model.config() is TRITONSERVER_ServerModelConfig; metadata has no batch size.
            max_batch_size = int(handle.config().get("max_batch_size", 0) or 0)
        except Exception:  # noqa: BLE001 - a config the core will not give: report no batching
            max_batch_size = 0

        def specs(items):
            return tuple(TensorSpec(name=i["name"], datatype=i["datatype"],
                                    shape=tuple(int(d) for d in i.get("shape", ())))
                         for i in items or ())

        return ModelMetadata(name=meta.get("name", model),
                             versions=tuple(str(v) for v in meta.get("versions", ())),
                             platform=meta.get("platform", "") or "",
                             inputs=specs(meta.get("inputs")), outputs=specs(meta.get("outputs")),
                             max_batch_size=max_batch_size)

    def model_states(self) -> dict[str, str]:
        server = self._require()
        error = None
        states: dict[str, list[str]] = {}
        try:
            # ModelDictionary: {(name, version): Model(state=...)}; a model never loaded in
            # EXPLICIT mode has version -1 and state None.
            for key, handle in server.models().items():
                name = getattr(handle, "name", None) or (key[0] if isinstance(key, tuple) else str(key))
                state = getattr(handle, "state", None)
                states.setdefault(name, []).append(str(state) if state else "UNAVAILABLE")
        except Exception as e:  # noqa: BLE001 - UNAVAILABLE "Server not ready" once stopping
            error = _engine_error(e)
        if error is not None:
            raise error
        result = {}
        for name, seen in states.items():
            pick = next((s for s in _STATE_PRIORITY if s in seen), seen[0])
            result[name] = pick
        return result

    def load_model(self, model: str) -> None:
        server = self._require()
        error = None
        try:
            server.load(model)  # blocking; releases the GIL in the bindings
        except Exception as e:  # noqa: BLE001
            error = _engine_error(e)
        if error is not None:
            raise error

    def unload_model(self, model: str) -> None:
        """Starts the unload and returns (as ``TRITONSERVER_ServerUnloadModel`` does); watch
        ``model_states()`` for the model to leave UNLOADING."""
        server = self._require()
        error = None
        try:
            server.unload(model)
        except Exception as e:  # noqa: BLE001
            error = _engine_error(e)
        if error is not None:
            raise error

    # ------------------------------------------------------------ inference

    def infer(self, model: str, inputs: dict[str, np.ndarray], timeout_s: float = 60.0) -> Response:
        """``for response in server.model(model).infer(inputs=...)``, as users write it.

        ``timeout_s`` is not enforced: the official iterator blocks without a timeout and the
        API offers no client-side deadline (``InferenceRequest.timeout`` is a server-side queue
        timeout that would change what is measured). A watchdog outside must catch hangs.
        """
        server = self._require()
        arrays = _prepare_inputs(inputs)
        error = None
        chosen = None
        try:
            iterator = server.model(model).infer(inputs=arrays)
            chosen, error = _pick_response(iterator)
            iterator = None  # noqa: F841
        except Exception as e:  # noqa: BLE001 - submission errors (bad input, unknown model)
            error = _engine_error(e)
        del arrays  # kept alive until the request completed; the request points at them
        if error is not None:
            raise error
        wrapped = OfficialResponse(chosen)
        chosen = None  # noqa: F841
        return wrapped

    def infer_async(self, model: str, inputs: dict[str, np.ndarray],
                    done: Callable[[Response | None, EngineError | None], Any]) -> None:
        """``Model.async_infer`` on the engine's asyncio thread; ``done`` runs on that thread.

        Falls back to the synchronous default where the package has no ``async_infer``.
        """
        error = None
        handle = None
        try:
            handle = self._require().model(model)
        except Exception as e:  # noqa: BLE001
            error = _engine_error(e)
        if error is not None:
            done(None, error)
            return
        if not hasattr(handle, "async_infer"):
            super().infer_async(model, inputs, done)
            return
        arrays = _prepare_inputs(inputs)
        loop = self._ensure_loop()
        loop.call_soon_threadsafe(self._spawn, loop, handle, arrays, done)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                self._loop = _LoopThread()
            return self._loop.loop

    def _spawn(self, loop, handle, arrays, done) -> None:
        task = loop.create_task(self._run_async(handle, arrays, done))
        # The set holds only in-flight tasks (asyncio keeps weak references to tasks);
        # a finished task holds no response: _run_async drops it before returning.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _run_async(handle, arrays, done) -> None:
        chosen = None
        error = None
        try:
            # Created inside the loop: older AsyncResponseIterators bind the running loop.
            iterator = handle.async_infer(inputs=arrays)
            chosen, error = await _pick_response_async(iterator)
            iterator = None  # noqa: F841
        except Exception as e:  # noqa: BLE001
            error = _engine_error(e)
        arrays = None  # noqa: F841
        wrapped = OfficialResponse(chosen) if error is None else None
        chosen = None  # noqa: F841
        try:
            done(wrapped, error)
        except Exception as e:  # noqa: BLE001 - a kept traceback would keep the response
            _log.error("completion callback raised %s: %s", type(e).__name__, e)
        wrapped = None  # noqa: F841
