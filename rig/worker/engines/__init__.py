"""In-process engines behind one interface; ``select`` picks one and says why."""

from __future__ import annotations

import typing

from rig.common.errors import RigError
from rig.contract.runtime import Runtime
from rig.worker.engines.base import Engine, EngineError, EngineName, ServerOptions

__all__ = ["Engine", "EngineError", "ServerOptions", "make", "select"]


def official_probe(runtime: Runtime | None = None) -> tuple[bool, str]:
    """Do the ``tritonserver`` bindings load over ``runtime``'s core (asked in a child process)?"""
    from rig.worker.engines.official import loader

    return loader.probe(runtime)


def select(requested: str, runtime: Runtime) -> tuple[str, str]:
    """``(engine name, reason)`` for ``auto``, ``capi`` or ``tritonserver``."""
    if requested == "capi":
        return "capi", "asked for"
    if requested not in typing.get_args(EngineName):
        raise RigError(f"unknown engine {requested!r}: choose {', '.join(typing.get_args(EngineName))}")
    if requested == "auto" and runtime.kind != "container":
        # Embedded cores are older than any tritonserver package; they pair only when asked.
        return "capi", "tritonserver is paired with embedded cores only when asked (--engine tritonserver)"
    ok, why = official_probe(runtime)
    if requested == "tritonserver":
        if not ok:
            raise RigError(f"the tritonserver engine does not load over {runtime.name} ({why}); use --engine capi")
        return "tritonserver", f"asked for: {why}"
    if ok:
        return "tritonserver", f"import tritonserver works ({why})"
    return "capi", f"import tritonserver fails ({why})"


def make(name: str, runtime: Runtime) -> Engine:
    if name == "capi":
        from rig.worker.engines.capi import CapiEngine

        return CapiEngine(runtime.core_library)
    if name == "tritonserver":
        from rig.worker.engines.official import OfficialEngine

        return OfficialEngine(runtime.core_library)
    raise RigError(f"unknown engine {name!r}")
