"""What both sides name of an engine: the engines a run may ask for, a model's metadata as an engine
reads it (the parent makes it from a config.pbtxt too), and Triton's datatypes with their numpy types
(the binding's, ``rig.capi.core``)."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np

from rig.capi.core import DATATYPES as DATATYPES
from rig.capi.core import NUMPY_OF as NUMPY_OF

# The engines a run may ask for: "auto" picks one (rig.parent.engines.select); the config reads them from here.
EngineName = typing.Literal["auto", "capi", "tritonserver"]
ENGINES: tuple[str, ...] = typing.get_args(EngineName)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str  # Triton's name: FP32, INT64, BYTES, ...
    shape: tuple[int, ...]  # -1 for a variable dimension


@dataclasses.dataclass(frozen=True)
class ModelMetadata:
    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int = 0


def explain_bindings(text: str) -> str:
    """One line that says why the bindings are not usable and what to do about it."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    full = lines[0] if lines else "unknown error"
    first = full if len(full) <= 300 else full[:297] + "..."
    if "No module named" in full:
        return (
            first + "; install it with pip install -e '.[official]' (PyPI has it for CPython 3.12 "
            "on glibc 2.39+), or use the NGC image's wheel "
            "(/opt/tritonserver/python/tritonserver-*.whl)"
        )
    if "GLIBCXX" in full or "GLIBC_" in full or "CXXABI" in full:
        return (
            first + "; the bindings need a newer libstdc++/glibc (GCC 13+, glibc 2.39+) than this "
            "host has: run in the NGC image, or in the sandbox (tests/sandbox/official.sh)"
        )
    if "libtritonserver" in full:
        return first + "; the bindings need a Triton core: pass --runtime, or set TRITON_HOME"
    return first


def serialize_bytes(array: np.ndarray) -> bytes:
    """Triton's BYTES wire form: each element as a 4-byte little-endian length, then its bytes."""
    parts = []
    for item in array.reshape(-1):
        b = item if isinstance(item, bytes) else str(item).encode()
        parts.append(len(b).to_bytes(4, "little") + b)
    return b"".join(parts)
