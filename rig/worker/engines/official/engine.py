"""``OfficialEngine``: the rig's engine interface over Triton's official in-process Python API.

What it relies on, read from triton-inference-server/core ``python/tritonserver/_api`` and checked
against the 2.70–2.73 wheels: ``Server(Options(...)).start(wait_until_ready=False)`` calls
``TRITONSERVER_ServerNew`` (models load there in NONE/POLL mode); ``Server.ready()``,
``.metadata()``, ``.model(name)`` (a cheap handle), ``.models()`` (keyed by ``(name, version)``,
each with ``.state``), ``.load()``, ``.unload()``, ``.stop()``; ``Model.async_infer(inputs=...)``
(an asyncio iterator of ``InferenceResponse``). Its blocking ``Model.infer`` is not used: it
waits on a ``concurrent.futures.Future`` that a gevent-patched process cannot be woken from
(see ``loop.py``); ``infer`` here waits on the engine's loop instead, with a real timeout.

The rig measures server#8755 (a referenced response keeps its model loaded and ``stop()`` waits
out ``exit_timeout``), so this engine keeps **no** reference to a response once it has handed
it over: no caches, no exception chains (see ``errors.py``).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from rig.contract.engines import ModelMetadata, TensorSpec
from rig.worker.crossthread import Signal
from rig.worker.engines import memory
from rig.worker.engines.base import (
    Engine,
    EngineError,
    Lane,
    Response,
    Sequence,
    ServerOptions,
)
from rig.worker.engines.official import allocation, loader
from rig.worker.engines.official.errors import call, engine_error
from rig.worker.engines.official.loop import LoopThread
from rig.worker.engines.official.responses import OfficialResponse, pick_async, prepare_inputs

_STATE_PRIORITY = ("UNLOADING", "LOADING", "READY", "UNAVAILABLE")

_log = logging.getLogger(__name__)


def options_kwargs(options: ServerOptions, ts) -> dict[str, Any]:
    """Map the rig's ``ServerOptions`` onto keyword arguments of ``ts.Options``."""
    modes = {"none": "NONE", "explicit": "EXPLICIT", "poll": "POLL"}
    mode_name = modes.get(str(options.model_control).lower())
    if mode_name is None:
        raise EngineError(
            f"unknown model_control {options.model_control!r} (one of: {', '.join(modes)})", "INVALID_ARG"
        )
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
        optional = {
            "log_info",
            "log_warn",
            "log_error",
            "log_verbose",
            "strict_readiness",
            "model_load_retry_count",
            "strict_model_config",
        }
        for key in [k for k in kwargs if k not in known]:
            if key not in optional:
                raise EngineError(
                    f"this tritonserver package's Options has no {key!r}; it cannot honour that server option",
                    "UNSUPPORTED",
                )
            del kwargs[key]
    return kwargs


async def infer_once(handle, arrays: dict, kwargs: dict, request=None) -> tuple[Any, EngineError | None]:
    """One request through ``Model.async_infer``, on the engine's loop: ``(response, None)`` or
    ``(None, error)``. ``request``: an ``InferenceRequest`` built once for these inputs
    (``OfficialEngine.prebuilt_request``), sent instead of ``inputs=arrays``. Nothing of a failed request is kept."""
    try:  # refused at submission: bad input, unknown model
        if request is not None:
            iterator = call(handle.async_infer, inference_request=request, **kwargs)
        else:
            iterator = call(handle.async_infer, inputs=arrays, **kwargs)
    except EngineError as error:
        return None, error
    return await pick_async(iterator)


def config_decoupled(config: dict) -> bool:
    """Whether a model's config (``Model.config()``) says it streams."""
    return bool((config.get("model_transaction_policy") or {}).get("decoupled"))


class OfficialEngine(Engine):
    name = "tritonserver"

    def __init__(self, core_library: str | None = None):
        """``core_library``: the runtime's ``libtritonserver.so``, loaded globally before the
        bindings are imported (None: whatever core the bindings find on their own)."""
        self._core_library = core_library
        self._ts = None
        self._server = None  # tritonserver.Server
        self._closed = False
        self._stopped = False
        self._stop_message: str | None = None
        self._loop: LoopThread | None = None
        self.infer_kwargs: dict[str, Any] = {}
        self.request_kwargs: dict[str, Any] = {}  # what every InferenceRequest carries (its output memory)
        self.output_allocation: allocation.OutputAllocation | None = None  # what the bindings do with it
        self._stateful: dict[str, bool] = {}

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
        ts = loader.load(self._core_library)
        kwargs = options_kwargs(options, ts)
        server = call(ts.Server, call(ts.Options, **kwargs))
        call(server.start, wait_until_ready=False)
        self._ts, self._server = ts, server
        # Errors come back in response.error (cheaper than raising, and no traceback to scrub);
        # iterators of packages without the keyword raise, and the picker handles both.
        if "raise_on_error" in inspect.signature(ts.Model.async_infer).parameters:
            self.infer_kwargs = {"raise_on_error": False}
        # Asked only of bindings that allocate there: the others copy each output afterwards and
        # drop what owns the core's response (see allocation.py).
        self.output_allocation = allocation.output_allocation(ts)
        self.request_kwargs = allocation.request_kwargs(memory.PLACEMENT, self.output_allocation)
        self.infer_kwargs = {**self.infer_kwargs, **self.request_kwargs}

    def start_notes(self) -> list[str]:
        """Under a GPU placement, whether outputs were asked in GPU memory, and why not."""
        allocation = self.output_allocation
        if not memory.PLACEMENT.gpu or allocation is None or allocation.honoured:
            return []
        return [f"outputs not asked in {memory.PLACEMENT.label}: {allocation.why}"]

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
            message = engine_error(e).args[0]
        self._stopped = True
        self._stop_message = message
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

    def loop(self) -> LoopThread:
        """The engine's asyncio loop thread, started on first use."""
        if self._loop is None:
            self._loop = LoopThread()
        return self._loop

    def _shutdown_loop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.shutdown()

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
        version = call(self._require().metadata).get("version")
        return str(version) if version else str(getattr(self._ts, "__version__", "unknown"))

    def model_handle(self, model: str):
        return call(self._require().model, model)

    def prebuilt_request(self, handle, arrays: dict):
        """An ``InferenceRequest`` of ``handle`` over ``arrays`` (numeric ones as ``Tensor``s made
        once), for sending the same inputs again and again: ``async_infer(inference_request=...)``.
        Each send still makes its own core request, but skips the request object's construction
        and the inputs' conversion (4-19 % of a plain loop's throughput, measured). None
        before the server starts, or where these bindings have no such parts or refuse these
        inputs (the lane then sends ``inputs=`` as a user would)."""
        ts = self._ts
        if ts is None:
            return None
        try:
            tensors = {name: ts.Tensor.from_dlpack(arr) if arr.dtype != object else arr for name, arr in arrays.items()}
            return ts.InferenceRequest(model=handle, inputs=tensors, **self.request_kwargs)
        except Exception:  # noqa: BLE001 - older bindings, an input dlpack cannot carry (bool, say)
            return None

    def decoupled(self, model: str) -> bool:
        """Whether the model streams (``model_transaction_policy { decoupled: true }``): several
        responses a request, then the final flag. False where its config cannot be read."""
        try:
            return config_decoupled(self.model_handle(model).config())
        except Exception:  # noqa: BLE001 - older bindings, a model gone
            return False

    def stateful(self, model: str) -> bool:
        """Whether the model's config has ``sequence_batching`` (read once a model)."""
        if model not in self._stateful:
            try:
                self._stateful[model] = "sequence_batching" in self.model_handle(model).config()
            except Exception:  # noqa: BLE001 - older bindings, a model gone
                return False
        return self._stateful[model]

    def _kwargs(self, model: str, sequence: Sequence | None) -> dict[str, Any]:
        """``async_infer``'s keywords for one request: the engine's, and the request's
        ``correlation_id`` and ``flags`` where it goes in a sequence (``Engine.sequence_of``)."""
        sequence = self.sequence_of(model, sequence)
        if sequence is None:
            return self.infer_kwargs
        return {**self.infer_kwargs, "correlation_id": sequence.correlation_id, "flags": sequence.flags}

    def model_metadata(self, model: str) -> ModelMetadata:
        handle = self.model_handle(model)
        meta = call(handle.metadata)
        try:
            # Model.config() is TRITONSERVER_ServerModelConfig; metadata has no batch size.
            max_batch_size = int(handle.config().get("max_batch_size", 0) or 0)
        except Exception:  # noqa: BLE001 - a config the core will not give: report no batching
            max_batch_size = 0

        def specs(items):
            return tuple(
                TensorSpec(name=i["name"], datatype=i["datatype"], shape=tuple(int(d) for d in i.get("shape", ())))
                for i in items or ()
            )

        return ModelMetadata(
            name=meta.get("name", model),
            versions=tuple(str(v) for v in meta.get("versions", ())),
            platform=meta.get("platform", "") or "",
            inputs=specs(meta.get("inputs")),
            outputs=specs(meta.get("outputs")),
            max_batch_size=max_batch_size,
        )

    def model_states(self) -> dict[str, str]:
        # ModelDictionary: {(name, version): Model(state=...)}; a model never loaded in
        # EXPLICIT mode has version -1 and state None.
        states: dict[str, list[str]] = {}
        for key, handle in call(self._require().models).items():
            name = getattr(handle, "name", None) or (key[0] if isinstance(key, tuple) else str(key))
            state = getattr(handle, "state", None)
            states.setdefault(name, []).append(str(state) if state else "UNAVAILABLE")
        return {name: next((s for s in _STATE_PRIORITY if s in seen), seen[0]) for name, seen in states.items()}

    def model_statistics(self, model: str) -> dict | None:
        """``Model.statistics()``: ``TRITONSERVER_ServerModelStatistics`` of every version, its JSON
        message as a dict; None where these bindings have no such method."""
        stats = getattr(self.model_handle(model), "statistics", None)
        return None if stats is None else call(stats)

    def load_model(self, model: str) -> None:
        call(self._require().load, model)  # blocking; releases the GIL in the bindings

    def unload_model(self, model: str) -> None:
        """Starts the unload and returns (as ``TRITONSERVER_ServerUnloadModel`` does); watch
        ``model_states()`` for the model to leave UNLOADING."""
        call(self._require().unload, model)

    # ------------------------------------------------------------ inference

    def infer(
        self, model: str, inputs: dict[str, np.ndarray], timeout_s: float = 60.0, sequence: Sequence | None = None
    ) -> Response:
        """One request, waited for (cooperatively under gevent) for at most ``timeout_s``.

        A request that times out goes on in the core; the rig stops waiting for it (its wait is
        cancelled) and keeps no reference to it.
        """
        handle = self.model_handle(model)
        done = Signal()
        arrays = prepare_inputs(inputs)  # the request points at these until it completes
        kwargs = self._kwargs(model, sequence)

        async def run():
            done.set(await infer_once(handle, arrays, kwargs))

        future = self.loop().submit(run())
        if not done.wait(timeout_s):
            # Let go of it, as a user's timeout would: the wait is cancelled and with it the
            # response iterator, so the rig holds nothing of the request (a reference kept by
            # the rig must not hold the model across stop()).
            future.cancel()
            raise EngineError(f"no response from {model} within {timeout_s:g} s", "TIMEOUT")
        (chosen, error), done.value = done.value, None
        if error is not None:
            raise error
        return OfficialResponse(chosen)

    def infer_async(
        self,
        model: str,
        inputs: dict[str, np.ndarray],
        done: Callable[[Response | None, EngineError | None], Any],
        sequence: Sequence | None = None,
    ) -> None:
        """``Model.async_infer`` on the engine's loop; ``done`` runs on the loop's thread."""
        try:
            handle = self.model_handle(model)
        except EngineError as e:
            done(None, e)
            return
        arrays = prepare_inputs(inputs)
        kwargs = self._kwargs(model, sequence)

        async def run():
            chosen, error = await infer_once(handle, arrays, kwargs)
            wrapped = OfficialResponse(chosen) if error is None else None
            chosen = None
            try:
                done(wrapped, error)
            except Exception as e:  # noqa: BLE001 - a kept traceback would keep the response
                _log.error("completion callback raised %s: %s", type(e).__name__, e)

        self.loop().submit(run())

    def lane(self, model: str, inputs: dict[str, np.ndarray] | list[dict], in_flight: int) -> Lane | None:
        """The lane on the engine's loop; ``inputs``: one entry, or a list of them cycled request
        by request (see ``OfficialLane``). None for a stateful model (it sets no correlation id):
        the Python lane serves it."""
        from rig.worker.engines.official.lane import OfficialLane

        if self.stateful(model):
            return None
        return OfficialLane(self, model, inputs, in_flight=in_flight)
