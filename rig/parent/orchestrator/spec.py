"""The spec a worker is given (``CycleSpec``), made in one place: what is fixed for the run is
worked out once (the run's ``Prepared`` keeps it), and each worker's spec is that with its cycles."""

from __future__ import annotations

import dataclasses
import os

from rig.contract import option_table
from rig.contract.spec import IN_FLIGHT, ClosedLoop, CycleSpec, OpenLoop
from rig.parent.options import input_memory
from rig.parent.orchestrator.prepare import Prepared, check_run_inputs
from rig.scenarios import catalog as scenarios


def cycle_spec(p: Prepared, cycles: list[int]) -> CycleSpec:
    """The spec of a worker that runs ``cycles`` of run ``p``."""
    if p.spec is None:
        p.spec = run_spec(p)
    return dataclasses.replace(p.spec, cycles=tuple(cycles))


def run_spec(p: Prepared) -> CycleSpec:
    """What every worker of the run is told alike (its cycles left empty). The worker (and the
    stubs it starts) run in the run's work folder, never in the user's: a file there named like a
    module (numpy.py) would shadow it in a stub. Paths absolute."""
    work = p.work_dir.resolve()
    if p.inputs is None:
        check_run_inputs(p)
    c = p.config
    return CycleSpec(
        run_id=p.run_id,
        engine=p.engine,
        runtime=p.runtime,
        model_repository=os.path.abspath(p.repository),
        models=tuple(p.models),
        model_label=p.model_label,
        **option_table.to_spec(c),  # the options a worker takes as they are (the table's ``spec``)
        evidence_dir=str(work / "evidence"),
        log_dir=str(work / "logs"),
        cycles=(),
        workload=_workload(c),
        hook=os.path.abspath(p.hook) if p.hook else "",
        check=c.model_size if not c.model_repository else 0,
        check_exact=check_exact(c),
        cwd=os.getcwd(),
        shapes={name: tuple(dims) for name, dims in p.inputs["shapes"].items()},
        optional_inputs={model: tuple(names) for model, names in p.inputs["optional"].items()},
        in_flight_at_stop=scenarios.get(c.scenario).in_flight if c.scenario else IN_FLIGHT,
        quiet=_quiet_phases(c),
        input_memory=input_memory(c),
    )


def check_exact(config) -> bool:
    """Whether the template's answers are held to the reference's exact bytes: not the cupy model's
    under dynamic batching, where cuBLAS may pick another kernel, and round otherwise, for each batch
    size (``CycleSpec.check_exact``)."""
    return not (config.model == "cupy" and config.max_batch_size > 0 and config.dynamic_batching)


def _quiet_phases(config) -> tuple[str, ...]:
    """The phases that hold the quiet lock (``CycleSpec.quiet``): all but those a scenario's
    faulted model only waits in (``Scenario.waits``); a control holds it throughout."""
    waits = scenarios.get(config.scenario).waits if config.scenario and not config.control else ()
    return tuple(ph for ph in ("start", "load") if ph not in waits)


def _workload(c) -> ClosedLoop | OpenLoop | None:
    """The run's load as the worker runs it: open loop where it has a rate, closed otherwise; None
    for a fixed count of requests. Each takes the options the table hands its fields
    (``spec="workload.NAME"``)."""
    if c.workload.name == "none":
        return None
    kind = OpenLoop if c.workload.rate else ClosedLoop
    values = option_table.to_spec(c, "workload")
    return kind(**{f.name: values[f.name] for f in dataclasses.fields(kind) if f.name in values})
