"""The small interface every in-process engine offers, and the options it starts a server with."""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable

import numpy as np


class EngineError(Exception):
    """An error the core (or the binding) returned; ``code`` is Triton's error code name."""

    def __init__(self, message: str, code: str = "UNKNOWN"):
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """Options of one server start; each field names the C API call it maps to."""

    model_repository: str                 # TRITONSERVER_ServerOptionsSetModelRepositoryPath
    backend_directory: str | None = None  # TRITONSERVER_ServerOptionsSetBackendDirectory
    exit_timeout_s: int = 30              # TRITONSERVER_ServerOptionsSetExitTimeout
    model_control: str = "none"           # TRITONSERVER_ServerOptionsSetModelControlMode: none|explicit|poll
    startup_models: tuple[str, ...] = ()  # TRITONSERVER_ServerOptionsSetStartupModel (explicit mode)
    model_load_retries: int = 0           # TRITONSERVER_ServerOptionsSetModelLoadRetryCount (2.4x+)
    strict_model_config: bool = True      # TRITONSERVER_ServerOptionsSetStrictModelConfig
    strict_readiness: bool = True         # TRITONSERVER_ServerOptionsSetStrictReadiness
    log_file: str | None = None           # TRITONSERVER_ServerOptionsSetLogFile
    log_verbose: int = 0                  # TRITONSERVER_ServerOptionsSetLogVerbose
    backend_config: tuple[tuple[str, str, str], ...] = ()  # ...SetBackendConfig(backend, key, value)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str          # Triton's name: FP32, INT64, BYTES, ...
    shape: tuple[int, ...]  # -1 for a variable dimension


@dataclasses.dataclass(frozen=True)
class ModelMetadata:
    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int = 0


class Response(abc.ABC):
    """One inference response. Holding it holds the model (server#8755): release it."""

    @abc.abstractmethod
    def outputs(self) -> dict[str, np.ndarray]:
        """Copies of the outputs, safe to keep after ``release()``."""

    @abc.abstractmethod
    def output_view(self, name: str) -> np.ndarray:
        """An array over the response's own memory (DLPack in the official API): it keeps the
        response alive for as long as it lives, exactly as a user's array would."""

    @abc.abstractmethod
    def release(self) -> None:
        """Drop the engine's reference to the response (idempotent)."""


class Engine(abc.ABC):
    """One in-process Triton server, driven through some binding."""

    name: str = "?"

    @abc.abstractmethod
    def start(self, options: ServerOptions) -> None:
        """Create the server (models load here in ``none`` control mode)."""

    @abc.abstractmethod
    def is_ready(self) -> bool: ...

    @abc.abstractmethod
    def model_ready(self, model: str) -> bool: ...

    @abc.abstractmethod
    def server_version(self) -> str: ...

    @abc.abstractmethod
    def model_metadata(self, model: str) -> ModelMetadata: ...

    @abc.abstractmethod
    def model_states(self) -> dict[str, str]:
        """Model name → state (READY, UNLOADING, UNAVAILABLE, ...) of every model in the repository."""

    @abc.abstractmethod
    def load_model(self, model: str) -> None: ...

    @abc.abstractmethod
    def unload_model(self, model: str) -> None: ...

    @abc.abstractmethod
    def infer(self, model: str, inputs: dict[str, np.ndarray], timeout_s: float = 60.0) -> Response:
        """One synchronous request; raises ``EngineError`` on an error response."""

    def infer_async(self, model: str, inputs: dict[str, np.ndarray],
                    done: Callable[[Response | None, EngineError | None], Any]) -> None:
        """Submit one request; ``done`` is called from a native thread. Default: synchronous."""
        try:
            done(self.infer(model, inputs), None)
        except EngineError as e:
            done(None, e)

    def lane(self, model: str, inputs: dict[str, np.ndarray], in_flight: int):
        """The engine's own way to keep requests in flight for a workload (see ``rig.load``), or
        None: then a generic Python lane over ``infer_async`` serves."""
        return None

    @abc.abstractmethod
    def stop(self) -> str | None:
        """``Server.stop()``: returns None when it returned cleanly, else the error's message."""

    @abc.abstractmethod
    def close(self) -> None:
        """Free the server object (after ``stop``); the engine cannot be started again."""


def timeout_message(seconds: float) -> str:
    """The error message of a request with no final response within the request timeout: every
    lane's words, so that the messages of one cycle count together whichever lane sent it."""
    return f"no response within {seconds:g} s (request timeout)"
