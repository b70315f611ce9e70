"""Responses of the official API: which one a request yields, and the rig's wrapper around it.

The wrapper is the only reference the rig holds to a response (server#8755: a referenced response
keeps its model loaded), so it never caches outputs, and a released wrapper holds nothing.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from rig.worker.engines import memory
from rig.worker.engines.base import EngineError, Response
from rig.worker.engines.official.errors import code as _code
from rig.worker.engines.official.errors import engine_error as _engine_error
from rig.worker.engines.official.errors import message as _message
from rig.worker.engines.official.errors import scrub as _scrub


def _enum_name(value: Any) -> str:
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    return str(value).rsplit(".", 1)[-1]


def prepare_inputs(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """C-contiguous numpy arrays, or CuPy arrays on the device with ``--input-memory gpu`` (BYTES
    stay on the host). The request points at their memory (no copy), so the caller
    keeps this dict alive until the request completes."""
    prepared = {}
    placement = memory.PLACEMENT
    for name, value in inputs.items():
        arr = np.asarray(value)
        if arr.dtype != object and not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        if placement.gpu and arr.dtype != object:
            arr = memory.device_memory().input(arr)  # a CuPy array: the bindings take it by DLPack
        prepared[name] = arr
    return prepared


def _is_host(tensor) -> bool:
    memory_type = getattr(tensor, "memory_type", None)
    return memory_type is None or _enum_name(memory_type) in ("CPU", "CPU_PINNED")


def _memory_label(tensor) -> str:
    """``cpu`` or ``gpu:N`` as the tensor itself reports it (a ``Tensor`` without the attribute,
    from bindings older than any read, is host memory)."""
    memory_type = getattr(tensor, "memory_type", None)
    if memory_type is None:
        return "cpu"
    value = getattr(memory_type, "value", None)
    if not isinstance(value, int):  # not TRITONSERVER_MemoryType's enum: judge it by its name
        value = memory.MEMORY_CPU if _is_host(tensor) else memory.MEMORY_GPU
    return memory.memory_label(value, getattr(tensor, "memory_type_id", 0) or 0)


# (memory type, id) -> label: the enums are pybind11 objects, costly to name once a response
_LABELS: dict = {}


def record_memory(response) -> None:
    """Note in ``memory.OUTPUTS`` where each output of ``response`` lives, as its tensor reports it:
    what the windows' ``output_memory`` says, for every response the engine hands over."""
    for tensor in (response.outputs or {}).values():
        key = (_enum_key(getattr(tensor, "memory_type", None)), getattr(tensor, "memory_type_id", 0))
        label = _LABELS.get(key)
        if label is None:
            label = _LABELS[key] = _memory_label(tensor)
        memory.OUTPUTS.record(label)


def _copy_tensor(tensor) -> np.ndarray:
    """A numpy copy of an output ``Tensor`` that shares nothing with the response."""
    if _enum_name(getattr(tensor, "data_type", "")) == "BYTES":
        return np.array(tensor.to_bytes_array(), dtype=object, copy=True)
    if not _is_host(tensor):
        # to_host() needs cupy in the bindings; it allocates a fresh host tensor.
        tensor = tensor.to_host()
    return np.array(np.from_dlpack(tensor), copy=True)


class Picker:
    """Walks a request's responses: keeps the one with outputs (or the last), or the first error.

    Version differences: up to about 2.54 ``Model.infer`` defaults to ``raise_on_error=True`` and
    the iterator raises the response's error; newer iterators return it in ``response.error``.
    Both are handled. Non-decoupled models send one response flagged FINAL; a separate empty
    final response (decoupled models) is skipped in favour of the one with outputs.
    """

    __slots__ = ("chosen", "error")

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


async def pick_async(iterator) -> tuple[Any, EngineError | None]:
    """The response (or the error) of one request, from ``Model.async_infer``'s iterator."""
    picker = Picker()
    try:
        async for response in iterator:
            picker.take(response)
            response = None
    except Exception as e:  # noqa: BLE001 - older iterators raise the response's error
        picker.raised(e)
    return picker.result()


def _slow_match(tensor, check: dict) -> bool:
    """An output whose memory the rig cannot read in place (an older ``Tensor``, device memory):
    compared through a numpy copy."""
    from rig.worker.outputs import output_fits

    try:
        got = _copy_tensor(tensor)
    except Exception:  # noqa: BLE001 - an output that cannot be read is a wrong one
        return False
    nbytes = 0 if got.dtype == object else got.nbytes
    return output_fits(check, _enum_name(getattr(tensor, "data_type", None)), got.shape, nbytes) and (
        check["bytes"] is None or got.tobytes() == check["bytes"]
    )


def _enum_key(value: Any) -> Any:
    """A hashable stand-in for an enum of the bindings: its integer value. The bindings make a
    new pybind11 enum object for every output, and hashing and comparing those goes through
    pybind11's dispatch (measured: the dictionary lookup on them cost 7 us a response on the
    loop's thread under load; reading ``.value`` costs 0.4 us in a tight loop)."""
    return getattr(value, "value", value)


class OutputCheck:
    """Holds every response of a lane to a reference (``name``; the ``datatype``, ``shape`` and
    byte ``size`` promised, where known; ``bytes`` where given; see
    ``rig.worker.outputs.reference_output``): ``check(response)`` is True when its output fits.

    It runs once per request on the loop's thread, where its time is the lane's latency: what a
    tensor's type, memory kind and shape say is judged once per distinct combination and
    remembered (keyed by the enums' integer values), so a response in host memory costs a
    dictionary lookup, its byte size and one comparison of its bytes in place (measured on the
    loop's thread under load: 7.8 us a response; 12 us with the enums themselves as the key and
    ``ctypes.string_at``)."""

    __slots__ = ("_seen", "_view", "check", "name", "size", "want")

    def __init__(self, check: dict):
        self.check = check
        self.name = check["name"]
        self.want = check.get("bytes")
        self.size = len(self.want) if self.want is not None else check.get("size")
        self._seen: dict = {}  # (data_type, memory_type, shape) -> (readable in place, fits, BYTES)
        # A ctypes array type of the reference's length, made once: ``from_address(ptr).raw``
        # reads the bytes without a foreign-function call (string_at is one).
        self._view = ctypes.c_char * len(self.want) if self.want else None

    def _judge(self, key, tensor) -> tuple[bool, bool, bool]:
        from rig.worker.outputs import output_fits

        data_type = getattr(tensor, "data_type", None)
        in_place = getattr(tensor, "memory_buffer", None) is not None and _is_host(tensor)
        datatype = _enum_name(data_type) if data_type is not None else None
        verdict = (in_place, output_fits({**self.check, "size": None}, datatype, key[2], 0), datatype == "BYTES")
        if len(self._seen) < 64:  # a model whose shapes vary endlessly is judged every time
            self._seen[key] = verdict
        return verdict

    def __call__(self, response) -> bool:
        tensor = response.outputs.get(self.name)
        if tensor is None:
            return False
        shape = getattr(tensor, "shape", None)
        key = (
            _enum_key(getattr(tensor, "data_type", None)),
            _enum_key(getattr(tensor, "memory_type", None)),
            tuple(shape.tolist()) if isinstance(shape, np.ndarray) else (tuple(shape) if shape is not None else None),
        )
        verdict = self._seen.get(key)
        if verdict is None:
            verdict = self._judge(key, tensor)
        in_place, fits, is_bytes = verdict
        if not in_place:
            return _slow_match(tensor, self.check)
        if not fits:
            return False
        buffer = tensor.memory_buffer
        if self.want is not None:
            if buffer.size != self.size:
                return False
            return self._view is None or self._view.from_address(buffer.data_ptr).raw == self.want
        return self.size is None or is_bytes or buffer.size == self.size


class OfficialResponse(Response):
    """Wraps one ``tritonserver.InferenceResponse``; the only reference the rig gets to it."""

    __slots__ = ("_response",)

    def __init__(self, response):
        self._response = response
        record_memory(response)

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
        is owned by the core response, so the array keeps the response (and its model) alive,
        with either placement: the engine never asks those bindings for the device copy that
        would replace it (``allocation.py``). Before, the bindings' allocator owned a separate
        buffer, in the memory asked; one in GPU memory comes back as a cupy array (numpy cannot
        view device memory)."""
        outputs = self._live().outputs
        if name not in outputs:
            raise EngineError(f"no output {name!r} (have: {', '.join(outputs) or 'none'})", "NOT_FOUND")
        tensor = outputs[name]
        if not _is_host(tensor):
            try:
                import cupy
            except ImportError:
                raise EngineError(
                    f"output {name!r} is in GPU memory and cupy is not installed", "UNSUPPORTED"
                ) from None
            return cupy.from_dlpack(tensor)
        return np.from_dlpack(tensor)

    def release(self) -> None:
        self._response = None
