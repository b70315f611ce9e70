"""Outputs checked: one reference answer before the load, and every response under load held to
it (the lanes call ``output_is`` or do the same in C or in place)."""

from __future__ import annotations

from rig.worker.engines.base import Engine, EngineError


def expected_output(meta, name: str, batch: int = 1) -> dict | None:
    """What the model's metadata promises of output ``name`` for a request of ``batch``:
    ``{"datatype", "shape" (-1 where it varies), "size" (bytes, None unless every dimension is
    fixed and the type has a fixed width)}``; None where the metadata does not name it."""
    import numpy as np

    from rig.contract.engines import NUMPY_OF

    spec = next((o for o in getattr(meta, "outputs", ()) if o.name == name), None)
    if spec is None:
        return None
    shape = list(spec.shape)
    if meta.max_batch_size > 0:
        if shape and shape[0] == -1:
            shape[0] = batch
        else:
            shape = [batch, *shape]
    size = None
    if spec.datatype in NUMPY_OF and spec.datatype != "BYTES" and all(d >= 0 for d in shape):
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(NUMPY_OF[spec.datatype]).itemsize
    return {"datatype": spec.datatype, "shape": tuple(shape), "size": size}


def output_fits(check: dict, datatype: str | None, shape, nbytes: int) -> bool:
    if check.get("datatype") and datatype is not None and datatype != check["datatype"]:
        return False
    want = check.get("shape")
    if want is not None and shape is not None:
        got = tuple(int(d) for d in shape)
        if len(got) != len(want) or any(w >= 0 and g != w for g, w in zip(got, want)):
            return False
    return check.get("size") is None or nbytes == check["size"]


def reference_output(
    engine: Engine,
    model: str,
    inputs: dict,
    size: int,
    timeout_s: float,
    meta=None,
    failed: dict | None = None,
    exact: bool = True,
):
    """One request before the load: ``(ok, note, check)``. ``check`` is what every response under
    load is held to, for the first output: its ``name``; the ``datatype``, ``shape`` (-1 where it
    varies) and byte ``size`` (where fixed) that the model's metadata promises (``meta``; without
    it, the first answer's byte size); and its exact ``bytes`` for the rig's template. For the
    template (``size`` > 0) the answer is first compared with INPUT @ W (a wrong answer is a
    silent failure: numpy 2 in a stub built for numpy 1 returns every output empty); its exact
    bytes are then the reference (a fixed input to a deterministic model: every answer is the
    same). A first answer that breaks the metadata's promise is itself a wrong output. Where the
    request itself fails, ``failed`` (if given) gets its ``code`` and ``message``. ``exact`` False: the
    template's bytes are not the reference (its answers may differ in the last bits from one batch size to
    the next, as cuBLAS's do): responses under load are held to the datatype, shape and size only."""
    import numpy as np

    from rig.contract.engines import NUMPY_OF

    try:
        r = engine.infer(model, inputs, timeout_s=timeout_s)
    except EngineError as e:
        if failed is not None:
            failed.update(code=e.code, message=str(e))
        return False, f"output check: {e}", None
    try:
        outputs = r.outputs()
    finally:
        r.release()
    if not outputs:
        if getattr(engine, "decoupled", lambda m: False)(model):
            # a streaming model may answer by the final flag alone: answered, nothing to check
            return None, f"{model} answered by the final flag alone: outputs not checked", None
        return False, f"{model} answered with no output", None
    name, got = next(iter(outputs.items()))
    got = np.asarray(got)
    promised = expected_output(meta, name) if meta is not None else None
    if got.dtype == object:  # BYTES: their size here is not their size on the wire
        check = (
            None
            if promised is None
            else {
                "name": name,
                "datatype": promised["datatype"],
                "shape": promised["shape"],
                "size": None,
                "bytes": None,
            }
        )
    elif promised is not None:
        check = {"name": name, **promised, "bytes": None}
    else:
        check = {"name": name, "datatype": None, "shape": None, "size": int(got.nbytes), "bytes": None}
    if check is not None and promised is not None:
        datatype = (
            next((k for k, v in NUMPY_OF.items() if v is not None and np.dtype(v) == got.dtype and k != "BYTES"), None)
            if got.dtype != object
            else "BYTES"
        )
        if not output_fits(check, datatype, got.shape, int(got.nbytes)):
            return (
                False,
                (
                    f"{model}'s output {name} breaks its metadata: got {datatype} {list(got.shape)}, "
                    f"promised {check['datatype']} {list(check['shape'])}"
                ),
                check,
            )
    if not size:
        return None, None, check
    x = next(iter(inputs.values()))
    want = x @ (np.arange(size * size, dtype=np.float32).reshape(size, size) / (size * size))
    if got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5):
        if check is not None and exact:
            check["bytes"] = np.ascontiguousarray(got).tobytes()
            check["size"] = len(check["bytes"])
        elif check is not None:
            return True, f"{model}: answers under load held to datatype, shape and size, not exact bytes", check
        return True, None, check
    return False, f"wrong outputs from {model}: got {got.ravel()[:4]}, want {want.ravel()[:4]}", check


def output_is(check: dict | None, outputs: dict) -> bool:
    """A response's outputs (numpy arrays) against a reference from ``reference_output``."""
    if not check:
        return True
    import numpy as np

    from rig.contract.engines import NUMPY_OF

    got = outputs.get(check["name"])
    if got is None:
        return False
    got = np.asarray(got)
    if got.dtype == object:
        datatype = "BYTES"
    else:
        datatype = next(
            (k for k, v in NUMPY_OF.items() if k != "BYTES" and v is not None and np.dtype(v) == got.dtype), None
        )
        got = np.ascontiguousarray(got)
    if not output_fits(check, datatype, got.shape, int(got.nbytes) if got.dtype != object else 0):
        return False
    return check["bytes"] is None or got.tobytes() == check["bytes"]


def merge_checks(checks: list) -> dict | None:
    """One check that every answer of several entries meets: the first output's name and what
    the entries' checks share (datatype, shape; the byte size only where identical), never exact
    bytes (a lane's responses are not matched to the entry they answer). One check: itself."""
    found = [c for c in checks if c]
    if len(found) <= 1:
        return found[0] if found else None
    if len({c["name"] for c in found}) > 1:
        return None  # the entries' answers do not even lead with the same output
    merged = {"name": found[0]["name"], "bytes": None}
    for key in ("datatype", "shape", "size"):
        values = {c.get(key) for c in found}
        merged[key] = values.pop() if len(values) == 1 else None
    return merged
