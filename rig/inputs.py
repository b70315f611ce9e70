"""Inputs generated from a model's metadata, as perf_analyzer does by default."""

from __future__ import annotations

import numpy as np

from rig.engines.base import ModelMetadata
from rig.engines.capi_core import NUMPY_OF


def inputs_for(meta: ModelMetadata, batch: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    """Random data of the right type and shape: variable dimensions become 1; a batch dimension is
    added where the model batches (``max_batch_size > 0``)."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in meta.inputs:
        dims = [1 if d < 0 else d for d in spec.shape]
        if meta.max_batch_size > 0 and (not dims or len(dims) == len(spec.shape)):
            # Metadata of a batching model already has the -1 batch dimension first.
            if spec.shape and spec.shape[0] == -1:
                dims[0] = batch
            else:
                dims = [batch, *dims]
        if spec.datatype == "BYTES":
            out[spec.name] = np.array([b"0"] * int(np.prod(dims, dtype=np.int64)), dtype=np.object_).reshape(dims)
            continue
        dtype = np.dtype(NUMPY_OF.get(spec.datatype, np.float32))
        if dtype.kind == "f":
            arr = rng.random(dims).astype(dtype)
        elif dtype.kind == "b":
            arr = rng.integers(0, 2, dims).astype(dtype)
        else:
            arr = rng.integers(0, 8, dims).astype(dtype)
        out[spec.name] = arr
    return out
