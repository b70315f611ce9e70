"""In-process engines behind one interface; ``make`` starts the one the parent chose
(``rig.parent.engines.select``)."""

from __future__ import annotations

from rig.common.errors import RigError
from rig.contract.runtime import Runtime
from rig.worker.engines.base import Engine, EngineError, ServerOptions

__all__ = ["Engine", "EngineError", "ServerOptions", "make"]


def make(name: str, runtime: Runtime) -> Engine:
    if name == "capi":
        from rig.worker.engines.capi import CapiEngine

        return CapiEngine(runtime.core_library)
    if name == "tritonserver":
        from rig.worker.engines.official import OfficialEngine

        return OfficialEngine(runtime.core_library)
    raise RigError(f"unknown engine {name!r}")
