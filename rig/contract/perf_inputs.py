"""The rig's request inputs in perf_analyzer's JSON format (``--input-data``), so that perf_analyzer
sends what the rig sends (``rig bench --compare perf-analyzer``)."""

from __future__ import annotations

import base64

import numpy as np

from rig.contract.engines import ModelMetadata, serialize_bytes


def perf_analyzer_file(meta: ModelMetadata, entries: list[dict]) -> dict:
    """Entries in perf_analyzer's JSON format, each input as base64 of its raw bytes with its
    shape (the batch dimension left out), so that perf_analyzer sends what the rig sends."""
    data = []
    for entry in entries:
        row = {}
        for name, arr in entry.items():
            arr = np.asarray(arr)
            if meta.max_batch_size > 0:
                arr = arr.reshape(arr.shape[1:])
            raw = (
                serialize_bytes(arr)
                if arr.dtype == np.object_
                else np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
            )
            row[name] = {"content": {"b64": base64.b64encode(raw).decode()}, "shape": list(arr.shape)}
        data.append(row)
    return {"data": data}
