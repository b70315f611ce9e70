"""In-process engines behind one interface; ``select`` picks one and says why."""

from __future__ import annotations

from rig.engines.base import Engine, EngineError, ServerOptions
from rig.errors import RigError
from rig.runtime import Runtime

__all__ = ["Engine", "EngineError", "ServerOptions", "select", "make"]


def official_probe() -> tuple[bool, str]:
    try:
        from rig.engines import official
    except ImportError as e:  # the module itself is missing from this install
        return False, f"official engine unavailable: {e}"
    return official.probe()


def select(requested: str, runtime: Runtime) -> tuple[str, str]:
    """``(engine name, reason)`` for ``auto``, ``capi`` or ``tritonserver``."""
    if requested == "capi":
        return "capi", "asked for"
    ok, why = official_probe()
    if requested == "tritonserver":
        if not ok:
            raise RigError(f"the tritonserver engine does not load here ({why}); use --engine capi")
        return "tritonserver", "asked for"
    if requested != "auto":
        raise RigError(f"unknown engine {requested!r}: choose auto, capi or tritonserver")
    if ok and runtime.kind == "container":
        return "tritonserver", f"import tritonserver works ({why})"
    if ok:
        return "capi", f"the tritonserver package is for the container's core, not {runtime.name}"
    return "capi", f"import tritonserver fails ({why})"


def make(name: str, runtime: Runtime) -> Engine:
    if name == "capi":
        from rig.engines.capi import CapiEngine

        return CapiEngine(runtime.core_library)
    if name == "tritonserver":
        from rig.engines.official import OfficialEngine

        return OfficialEngine()
    raise RigError(f"unknown engine {name!r}")
