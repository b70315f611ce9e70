"""Whether the ``tritonserver`` bindings put a response's outputs in the memory a request asks
(``InferenceRequest.output_memory_type``), read from the bindings themselves.

Two designs have shipped (triton-inference-server/core, ``python/tritonserver``):

- **a Python allocator** (from the API's first commit to r25.01, Triton 2.54):
  ``_api/_allocators.py``'s ``ResponseAllocator`` answers the core's query with the asked memory
  (``query_preferred_memory_type``) and allocates there (``GPUAllocator``: ``cupy.empty``); each
  output's ``MemoryBuffer`` is owned by that allocator's array, and the Python response keeps no
  reference to the core's. Asking GPU memory costs no copy and changes no owner.
- **a C++ allocator that gives host memory only** (r25.02, Triton 2.55, core PR #426, to r26.06
  and main): ``tritonserver_pybind.cc``'s query and alloc functions answer ``TRITONSERVER_MEMORY_CPU``
  whatever was asked ("TODO: Support GPU memory"); each output's ``MemoryBuffer`` is owned by the
  core's response (``owner=response``), and ``InferenceResponse._from_tritonserver_inference_response``
  then *replaces* each output by ``Tensor.to_device(output_memory_type)`` ("TODO: [DLIS-7824]"): a
  CuPy copy that owns nothing of the core's response. Asking GPU memory there costs a copy a
  response (and another to read it back), puts GPU outputs in the windows that the core never
  made, and lets a retained response or array hold only copies: server#8755 would read clean.

So the engine asks for an output memory only where the bindings show the first design: the
module ``_api._allocators`` with its ``ResponseAllocator``, and a response builder that does not
copy afterwards. A version number would not do: the bindings' own version is not the core's (the
rig runs PyPI's 2.70 bindings over older cores), and an image or a build may carry bindings of
another commit than its release's. A design the
rig cannot recognise (a future C++ allocator that honours the request, DLIS-7824's fix) is not
asked either: its outputs then stay where the core's allocator puts them, and the windows say so,
which may cost a GPU model a copy to the host but never a false reading.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Any

from rig.worker.engines.memory import Placement

ALLOCATES = "allocates"  # the bindings allocate outputs in the asked memory
COPIES = "copies"  # the bindings allocate host memory and copy to the asked memory afterwards
UNKNOWN = "unknown"  # neither recognised: nothing is asked


@dataclasses.dataclass(frozen=True)
class OutputAllocation:
    """What the bindings do with ``output_memory_type``: ``design`` (one of the names above) and why."""

    design: str
    why: str

    @property
    def honoured(self) -> bool:
        return self.design == ALLOCATES


def _python_allocator(ts: Any) -> bool:
    """Whether the bindings carry the Python ``ResponseAllocator`` that answers the core's query
    with the asked memory."""
    try:
        allocators = importlib.import_module(f"{ts.__name__}._api._allocators")
    except ImportError:
        return False
    allocator = getattr(allocators, "ResponseAllocator", None)
    return callable(getattr(allocator, "query_preferred_memory_type", None))


def _copies_afterwards(ts: Any) -> bool | None:
    """Whether the response builder replaces outputs by ``to_device`` copies; None where its
    source cannot be read (an install without the ``.py`` files)."""
    builder = getattr(getattr(ts, "InferenceResponse", None), "_from_tritonserver_inference_response", None)
    if builder is None:
        return None
    try:
        source = inspect.getsource(builder)
    except (OSError, TypeError):
        return None
    return "to_device(" in source


def output_allocation(ts: Any) -> OutputAllocation:
    """Read from the imported ``tritonserver`` module ``ts``."""
    copies = _copies_afterwards(ts)
    if copies:
        return OutputAllocation(
            COPIES,
            "these bindings allocate every output in host memory and copy it to the asked memory "
            "afterwards (InferenceResponse._from_tritonserver_inference_response: Tensor.to_device), "
            "dropping the tensors that own the core's response; no output memory is asked",
        )
    if _python_allocator(ts):
        return OutputAllocation(
            ALLOCATES, "these bindings' ResponseAllocator (_api._allocators) allocates outputs in the asked memory"
        )
    return OutputAllocation(
        UNKNOWN,
        "these bindings have no allocator the rig recognises as honouring output_memory_type; "
        "no output memory is asked, and outputs stay where the core's allocator puts them",
    )


def request_kwargs(placement: Placement, allocation: OutputAllocation) -> dict[str, Any]:
    """What every ``InferenceRequest`` of the engine carries for its outputs' memory."""
    if placement.gpu and allocation.honoured:
        return {"output_memory_type": placement.label}
    return {}
