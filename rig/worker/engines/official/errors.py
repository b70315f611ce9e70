"""Errors of the ``tritonserver`` bindings, turned into ``EngineError`` values that hold nothing.

A ``TritonError`` from a failed response holds that response (``error.args += (result,)``), and
its traceback holds the frames that held it: kept anywhere, it keeps the model loaded, the very
symptom the rig measures (server#8755). So every error leaves the engine as a fresh
``EngineError`` with only a message and a code, raised outside the ``except`` block that caught
the original, so that its ``__context__`` stays empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rig.worker.engines.base import EngineError

T = TypeVar("T")

# Error classes of the bindings (tritonserver._c) → Triton's error-code names (TRITONSERVER_ERROR_*).
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


def message(exc: BaseException) -> str:
    """The error's own text: the first argument only (the others may be the failed response)."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], str):
        return args[0]
    text = str(exc) if not args else str(args[0])
    return text or type(exc).__name__


def code(exc: BaseException) -> str:
    for klass in type(exc).__mro__:
        found = _CODE_BY_CLASS.get(klass.__name__)
        if found:
            return found
    if isinstance(exc, (TypeError, ValueError, KeyError)):
        return "INVALID_ARG"
    return "UNKNOWN"


def engine_error(exc: BaseException, prefix: str = "") -> EngineError:
    """A fresh ``EngineError`` that keeps nothing of ``exc`` but its text and code."""
    if isinstance(exc, EngineError):
        return EngineError(prefix + str(exc), exc.code)
    return EngineError(prefix + message(exc), code(exc))


def scrub(exc: BaseException, response: Any = None) -> None:
    """Break the reference cycle the bindings build around a failed response.

    ``InferenceResponse._from_tritonserver_inference_response`` sets ``result.error = error`` and
    ``error.args += (result,)``, and a raised error's traceback holds the iterator frame that
    held the response. Only the cyclic GC frees that cycle, and until then the response keeps
    its model loaded. Cut it so that plain reference counting frees the response.
    """
    extra = exc.args[1:]
    exc.args = exc.args[:1]
    for obj in (*extra, response):
        if obj is not None and getattr(obj, "error", None) is exc:
            obj.error = None  # InferenceResponse is a plain dataclass: writable
    exc.__traceback__ = None


def call(fn: Callable[..., T], *args: Any, prefix: str = "", **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``; whatever it raises comes out as an ``EngineError`` with no context."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - TritonError subclasses, TypeError, garbled binding errors
        error = engine_error(e, prefix)
        scrub(e)
    raise error
