"""The order the conformance pages, the upgrade diff and the grids list things in: the APIs, the
model shapes, the scenarios (the registry's order, ``rig scenarios``) and, within them, the cores."""

from __future__ import annotations

from rig.analysis.release_order import version_key
from rig.scenarios import catalog as scenarios

UNBATCHED = "unbatched"
ENGINE_ORDER = ("capi", "tritonserver")
SHAPE_ORDER = ("unbatched", "batched", "batched-delayed", "instances-2", "decoupled")


def scenario_order(name: str) -> tuple:
    """The registry's order, a name it does not hold after."""
    names = list(scenarios.SCENARIOS)
    return (names.index(name), "") if name in names else (len(names), name)


def engine_order(engine: str) -> tuple:
    return (ENGINE_ORDER.index(engine), "") if engine in ENGINE_ORDER else (len(ENGINE_ORDER), engine)


def shape_order(shape: str) -> tuple:
    return (SHAPE_ORDER.index(shape), "") if shape in SHAPE_ORDER else (len(SHAPE_ORDER), shape)


def cell_order(key) -> tuple:
    """A cell's key (engine, shape, scenario, control, version) in the pages' order."""
    engine, shape, scenario, control, version = key
    return engine_order(engine), shape_order(shape), scenario_order(scenario), control, version_key(version)
