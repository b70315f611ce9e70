"""The inputs a run's requests carry: generated from a model's metadata (``random``, the
default, or ``zero``, as perf_analyzer does), or read from a JSON file in perf_analyzer's
format (``--input-data FILE.json``), with ``--shape NAME:d1,d2`` fixing variable dimensions.

A model gets a list of **entries**, each a dict input name -> array; request k of a lane or of
the sequential loop carries entry k mod N. Every entry is checked against the model's metadata
before anything is sent: a name the model lacks, a value its datatype cannot hold, an element
count that is not its shape's, a variable dimension with no shape, each is one ``RigError``
line that names the input.

The file (perf_analyzer's "Real Input Data")::

    {"data": [
      {"INPUT": [1, 2, 3, 4]},                                  # flat, row-major
      {"INPUT": {"content": [1, 2, 3, 4, 5, 6], "shape": [2, 3]}},
      {"INPUT": {"b64": "AACAPwAAAEA=", "shape": [2]}},         # raw little-endian bytes
      {"TEXT": ["hello", "world"]}                              # BYTES as strings
    ]}

``{"content": {"b64": ...}, "shape": [...]}`` is perf_analyzer's spelling of the b64 form and is
read alike. For BYTES, b64 holds Triton's wire form: each element a 4-byte little-endian length,
then its bytes. Shapes leave out the batch dimension of a batching model (the rig sends batch 1),
as perf_analyzer's do.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from pathlib import Path

import numpy as np

from rig.common.errors import RigError
from rig.contract.engines import NUMPY_OF, ModelMetadata

GENERATED = ("zero", "random")
# Beyond this many entries of one model the reference check asks for no more answers before the
# load (each is a request, and up to a request timeout): the first ones stand for the rest.
MAX_REFERENCE_ENTRIES = 16


# ---------------------------------------------------------------- --shape


def parse_shapes(given) -> dict[str, list[int]]:
    """``--shape`` values (one string or a list of them) as ``{name: [dims]}``. Each is
    ``NAME:d1,d2``; several may share a string, separated by spaces or commas
    (``INPUT0:5,X:2,3``: a part with a colon starts the next input)."""
    if given is None:
        return {}
    texts = [given] if isinstance(given, str) else list(given)
    parts = [p for t in texts for chunk in str(t).split() for p in chunk.split(",") if p]
    shapes: dict[str, list[int]] = {}
    name = None
    for part in parts:
        if ":" in part:
            name, _, part = part.rpartition(":")
            if not name:
                raise RigError(f"--shape :{part}: give NAME:d1,d2 (the input's name, then its dimensions)")
            if name in shapes:
                raise RigError(f"--shape names input {name!r} twice: give each input's shape once")
            shapes[name] = []
            if not part:
                continue
        if name is None:
            raise RigError(f"--shape {part}: give NAME:d1,d2 (the input's name, then its dimensions)")
        if not part.isdigit():
            raise RigError(f"--shape {name}: dimensions are whole numbers >= 0, e.g. {name}:2,3 (got {part!r})")
        shapes[name].append(int(part))
    for name, dims in shapes.items():
        if not dims:
            raise RigError(f"--shape {name}: give its dimensions, e.g. {name}:4 or {name}:2,3")
    return shapes


def format_shapes(shapes: dict[str, list[int]]) -> str:
    """The canonical text of parsed shapes (``A:1,2 B:3``), as stored in the run's config."""
    return " ".join(f"{n}:{','.join(str(int(d)) for d in dims)}" for n, dims in shapes.items())


# ---------------------------------------------------------------- the data file


def read_data(path: str | Path) -> list[dict]:
    """The file's entries, each ``{name: {"values": list | None, "raw": bytes | None, "shape":
    list | None}}``, its structure checked (what needs the model's metadata comes later, in
    ``entries_for``). Any fault is one ``RigError`` line naming the file and the entry."""
    path = Path(path)
    where = f"--input-data {path}"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RigError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RigError(f"{where}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise RigError(
            f'{where} is not JSON ({e}); see perf_analyzer\'s input data format: {{"data": [{{"INPUT": [1, 2, 3]}}]}}'
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise RigError(
            f'{where}: the file holds no "data" list; perf_analyzer\'s format is '
            '{"data": [{"INPUT": [1, 2, 3]}, ...]}'
        )
    extra = sorted(set(doc) - {"data"})
    if "validation_data" in extra:
        raise RigError(
            f'{where}: "validation_data" is not checked by the rig (it holds responses to '
            "the model's metadata and, with one entry, to its first answer): remove it"
        )
    if extra:
        raise RigError(f'{where}: unknown key(s) {", ".join(map(repr, extra))}; the file holds "data" only')
    if not doc["data"]:
        raise RigError(f'{where}: "data" is empty: give at least one entry')
    entries = []
    for k, entry in enumerate(doc["data"], 1):
        if isinstance(entry, list):
            raise RigError(
                f"{where}: entry {k} is a list (perf_analyzer's streams of a sequence model), "
                "which the rig does not send: give one object per request"
            )
        if not isinstance(entry, dict) or not entry:
            raise RigError(f'{where}: entry {k} must be an object of inputs, e.g. {{"INPUT": [1, 2]}}')
        entries.append(
            {name: _read_value(f"{where}: entry {k}: input {name!r}", value) for name, value in entry.items()}
        )
    return entries


def _read_value(where: str, value) -> dict:
    shape = None
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"content", "shape", "b64"})
        if unknown:
            raise RigError(
                f'{where}: unknown key(s) {", ".join(map(repr, unknown))} (it takes "content" or "b64", and "shape")'
            )
        if "shape" in value:
            shape = value["shape"]
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
            ):
                raise RigError(f'{where}: "shape" must be a list of whole numbers >= 0 (got {shape!r})')
        if ("content" in value) == ("b64" in value):
            raise RigError(f'{where}: give its values in "content" (a list) or "b64" (a base64 string), one of the two')
        body = value.get("content", value)
        if isinstance(body, dict) and set(body) == {"b64"}:
            return {"values": None, "raw": _b64(where, body["b64"]), "shape": shape}
        if "b64" in value:
            return {"values": None, "raw": _b64(where, value["b64"]), "shape": shape}
        value = body
    if not isinstance(value, list):
        raise RigError(
            f'{where}: give a list of values, {{"content": [...], "shape": [...]}}, or '
            f'{{"b64": "...", "shape": [...]}} (got {type(value).__name__})'
        )
    return {"values": _flat(where, value), "raw": None, "shape": shape}


def _b64(where: str, text) -> bytes:
    if not isinstance(text, str):
        raise RigError(f'{where}: "b64" must be a base64 string')
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise RigError(f'{where}: "b64" is not valid base64') from None


def _flat(where: str, values: list) -> list:
    """Nested lists flattened row-major, as perf_analyzer reads them."""
    out: list = []
    stack = [iter(values)]
    while stack:
        for v in stack[-1]:
            if isinstance(v, list):
                stack.append(iter(v))
                break
            if isinstance(v, dict) or v is None:
                raise RigError(f"{where}: values are numbers, booleans or strings (got {json.dumps(v)})")
            out.append(v)
        else:
            stack.pop()
    return out


# ---------------------------------------------------------------- entries for a model


def batchless_dims(meta: ModelMetadata, spec) -> list[int]:
    """An input's dimensions without the batch one (the rig sends batch 1): metadata of a
    batching model reports it first, as -1."""
    dims = list(spec.shape)
    if meta.max_batch_size > 0 and dims and dims[0] == -1:
        dims = dims[1:]
    return dims


def _batched(meta: ModelMetadata, arr: np.ndarray) -> np.ndarray:
    return arr.reshape([1, *arr.shape]) if meta.max_batch_size > 0 else arr


def _fits(dims: list[int], shape: list[int]) -> bool:
    return len(dims) == len(shape) and all(d < 0 or d == s for d, s in zip(dims, shape))


def _dims_text(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def check_shapes(metas: dict[str, ModelMetadata], shapes: dict[str, list[int]]) -> None:
    """Each ``--shape`` names an input of the run's models, fits its fixed dimensions and its
    rank wherever that input is, and sets some variable dimension (else it says nothing)."""
    for name, shape in shapes.items():
        found = [(m, meta, s) for m, meta in metas.items() for s in meta.inputs if s.name == name]
        if not found:
            known = sorted({s.name for meta in metas.values() for s in meta.inputs})
            raise RigError(
                f"--shape {name}: no input {name!r} in model(s) {', '.join(metas)} "
                f"(their inputs: {', '.join(known) or 'none'})"
            )
        for model, meta, spec in found:
            dims = batchless_dims(meta, spec)
            if not _fits(dims, shape):
                raise RigError(
                    f"--shape {name}:{','.join(map(str, shape))} contradicts input {name!r} of "
                    f"model {model}, whose dimensions are {_dims_text(dims)} (-1: variable"
                    f"{'; the batch dimension is left out' if meta.max_batch_size > 0 else ''})"
                )


def entries_for(
    meta: ModelMetadata,
    source: str = "random",
    shapes: dict | None = None,
    data: list[dict] | None = None,
    *,
    model: str | None = None,
    optional=frozenset(),
    seed: int = 0,
    where: str = "--input-data FILE",
) -> list[dict]:
    """A model's entries: one generated (``source`` zero or random), or the file's (``data``,
    from ``read_data``: the names this model has, each checked and converted), with the batch
    dimension added where the model batches. ``optional``: inputs an entry may leave out. A
    fault is one ``RigError`` line naming the entry and the input."""
    shapes = shapes or {}
    model = model or meta.name
    if source in GENERATED:
        return [_generated(meta, source, shapes, seed)]
    if data is None:
        raise RigError(f"{where}: no data read")
    specs = {s.name: s for s in meta.inputs}
    out = []
    for k, entry in enumerate(data, 1):
        here = f"{where}: entry {k}"
        missing = [n for n in specs if n not in entry and n not in optional]
        if missing:
            raise RigError(
                f"{here} gives no data for input {missing[0]!r} of model {model} (its inputs: {', '.join(specs)})"
            )
        out.append(
            {
                name: _batched(
                    meta,
                    _array(
                        f"{here}: input {name!r} of model {model}",
                        specs[name],
                        batchless_dims(meta, specs[name]),
                        value,
                        shapes.get(name),
                    ),
                )
                for name, value in entry.items()
                if name in specs
            }
        )
    return out


def check_names(metas: dict[str, ModelMetadata], data: list[dict], where: str) -> None:
    """A name in the file that no model of the run has (a typo, or another model's file)."""
    known = {s.name for meta in metas.values() for s in meta.inputs}
    for k, entry in enumerate(data, 1):
        for name in entry:
            if name not in known:
                raise RigError(
                    f"{where}: entry {k}: input {name!r} is not an input of model(s) "
                    f"{', '.join(metas)} (their inputs: {', '.join(sorted(known)) or 'none'})"
                )


def build(
    metas: dict[str, ModelMetadata],
    source: str,
    shapes: dict | None = None,
    data: list[dict] | None = None,
    optional: dict | None = None,
    seed: int = 0,
) -> dict[str, list[dict]]:
    """Every model's entries, every check made: the one call a run needs (``metas``: model ->
    metadata; ``optional``: model -> names its entries may leave out)."""
    shapes = shapes or {}
    where = f"--input-data {source}"
    check_shapes(metas, shapes)
    if source not in GENERATED:
        check_names(metas, data or [], where)
    return {
        m: entries_for(
            meta, source, shapes, data, model=m, optional=frozenset((optional or {}).get(m, ())), seed=seed, where=where
        )
        for m, meta in metas.items()
    }


def _array(where: str, spec, dims: list[int], value: dict, default_shape) -> np.ndarray:
    shape = value["shape"] if value["shape"] is not None else default_shape
    if shape is None:
        if any(d < 0 for d in dims):
            raise RigError(
                f"{where} has variable dimensions {_dims_text(dims)} and no shape: give "
                f'"shape" in the entry, or --shape {spec.name}:d1,d2'
            )
        shape = dims
    elif not _fits(dims, shape):
        raise RigError(
            f"{where}: shape {_dims_text(shape)} does not fit its dimensions {_dims_text(dims)} (-1: variable)"
        )
    count = math.prod(shape)
    dtype = spec.datatype
    if dtype not in NUMPY_OF:
        raise RigError(f"{where} is {dtype}, which the rig cannot send from a file")
    if value["raw"] is not None:
        arr = _from_raw(where, dtype, value["raw"], count)
    else:
        arr = _from_values(where, dtype, value["values"])
    if arr.size != count:
        raise RigError(f"{where}: {arr.size} element(s) given, and shape {_dims_text(shape)} holds {count}")
    return arr.reshape(shape)


def _from_raw(where: str, dtype: str, raw: bytes, count: int) -> np.ndarray:
    if dtype == "BYTES":  # Triton's wire form: a 4-byte little-endian length, then the bytes
        items: list[bytes] = []
        pos = 0
        while pos < len(raw):
            if pos + 4 > len(raw):
                raise RigError(
                    f"{where}: b64 of BYTES holds each element as a 4-byte length, then its "
                    "bytes; the data ends inside a length"
                )
            n = int.from_bytes(raw[pos : pos + 4], "little")
            if pos + 4 + n > len(raw):
                raise RigError(
                    f"{where}: b64 of BYTES: element {len(items) + 1} claims {n} bytes, "
                    f"and {len(raw) - pos - 4} are left"
                )
            items.append(raw[pos + 4 : pos + 4 + n])
            pos += 4 + n
        return np.array(items, dtype=np.object_)
    item = np.dtype(NUMPY_OF[dtype]).newbyteorder("<")
    if len(raw) != count * item.itemsize:
        raise RigError(
            f"{where}: b64 holds {len(raw)} bytes, and {count} {dtype} element(s) are {count * item.itemsize}"
        )
    return np.frombuffer(raw, dtype=item).astype(item.newbyteorder("="))


def _from_values(where: str, dtype: str, values: list) -> np.ndarray:
    if dtype == "BYTES":
        bad = next((v for v in values if not isinstance(v, str)), None)
        if bad is not None:
            raise RigError(f"{where} is BYTES, which takes strings (got {json.dumps(bad)})")
        return np.array([v.encode() for v in values], dtype=np.object_)
    np_type = np.dtype(NUMPY_OF[dtype])
    if any(isinstance(v, str) for v in values):
        bad = next(v for v in values if isinstance(v, str))
        raise RigError(f"{where} is {dtype}, which takes numbers (got the string {json.dumps(bad)})")
    if np_type.kind == "b":
        bad = next((v for v in values if not (isinstance(v, bool) or v in (0, 1))), None)
        if bad is not None:
            raise RigError(f"{where} is BOOL, which takes true, false, 0 or 1 (got {json.dumps(bad)})")
        return np.array([bool(v) for v in values], dtype=np_type)
    if any(isinstance(v, bool) for v in values):
        raise RigError(f"{where} is {dtype}, which takes numbers (got a boolean)")
    if np_type.kind in "iu":
        bad = next((v for v in values if not float(v).is_integer()), None)
        if bad is not None:
            raise RigError(f"{where} is {dtype}, which takes whole numbers (got {json.dumps(bad)})")
        info = np.iinfo(np_type)
        bad = next((v for v in values if not info.min <= int(v) <= info.max), None)
        if bad is not None:
            raise RigError(f"{where} is {dtype}, which holds {info.min}..{info.max} (got {json.dumps(bad)})")
        return np.array([int(v) for v in values], dtype=np_type)
    return np.array(values, dtype=np_type)


def _generated(meta: ModelMetadata, source: str, shapes: dict, seed: int) -> dict[str, np.ndarray]:
    """zero or random data of the right type and shape: variable dimensions from ``--shape``,
    else 1; a batch dimension of 1 where the model batches."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in meta.inputs:
        dims = shapes.get(spec.name) or [1 if d < 0 else d for d in batchless_dims(meta, spec)]
        if spec.datatype == "BYTES":
            fill = b"" if source == "zero" else b"0"
            arr = np.array([fill] * math.prod(dims), dtype=np.object_).reshape(dims)
        else:
            dtype = np.dtype(NUMPY_OF.get(spec.datatype, np.float32))
            if source == "zero":
                arr = np.zeros(dims, dtype=dtype)
            elif dtype.kind == "f":
                arr = rng.random(dims).astype(dtype)
            elif dtype.kind == "b":
                arr = rng.integers(0, 2, dims).astype(dtype)
            else:
                arr = rng.integers(0, 8, dims).astype(dtype)
        out[spec.name] = _batched(meta, arr)
    return out


def inputs_for(meta: ModelMetadata, batch: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    """Random data of the right type and shape, one entry (variable dimensions 1): the default
    inputs, as before entries (kept for scripts that build one request)."""
    entry = _generated(meta, "random", {}, seed)
    if batch != 1 and meta.max_batch_size > 0:
        entry = {k: np.repeat(v, batch, axis=0) for k, v in entry.items()}
    return entry
