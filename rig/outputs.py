"""Outputs checked: one reference answer before the load, and every response under load held to
it (the lanes call ``output_is`` or do the same in C or in place)."""

from __future__ import annotations

from rig.engines.base import Engine, EngineError


def reference_output(engine: Engine, model: str, inputs: dict, size: int, timeout_s: float):
    """One request before the load: ``(ok, note, check)``. ``check`` is what every response under
    load is held to: ``{"name", "size", "bytes"}`` of the first output. For the rig's template
    (``size`` > 0) the answer is first compared with INPUT @ W (a wrong answer is a silent
    failure: numpy 2 in a stub built for numpy 1 returns every output empty); its exact bytes are
    then the reference (a fixed input to a deterministic model: every answer is the same). For
    other models, the first answer's byte size (bytes None)."""
    import numpy as np

    try:
        r = engine.infer(model, inputs, timeout_s=timeout_s)
    except EngineError as e:
        return False, f"output check: {e}", None
    try:
        outputs = r.outputs()
    finally:
        r.release()
    if not outputs:
        return False, f"{model} answered with no output", None
    name, got = next(iter(outputs.items()))
    got = np.asarray(got)
    # BYTES outputs are not checked under load (their size here is not their size on the wire)
    check = None if got.dtype == object else {"name": name, "size": int(got.nbytes), "bytes": None}
    if not size:
        return None, None, check
    x = next(iter(inputs.values()))
    want = x @ (np.arange(size * size, dtype=np.float32).reshape(size, size) / (size * size))
    if got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5):
        if check is not None:
            check["bytes"] = np.ascontiguousarray(got).tobytes()
        return True, None, check
    return False, f"wrong outputs from {model}: got {got.ravel()[:4]}, want {want.ravel()[:4]}", check


def output_is(check: dict | None, outputs: dict) -> bool:
    """A response's outputs (numpy arrays) against a reference from ``reference_output``."""
    if not check:
        return True
    import numpy as np

    got = outputs.get(check["name"])
    if got is None:
        return False
    got = np.ascontiguousarray(got)
    if got.nbytes != check["size"]:
        return False
    return check["bytes"] is None or got.tobytes() == check["bytes"]
