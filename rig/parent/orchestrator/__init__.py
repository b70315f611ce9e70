"""The parent of a run: never hosts Triton; starts workers, watches them, records every cycle.

A watchdog bounds every phase a worker announces; a worker past its deadline is killed with its
whole process group (stubs included) and the cycle is recorded as ``hung``; one that dies is
recorded as ``crashed`` with its signal. Each cycle's row is written as soon as it is known, so a
SIGKILL of this process loses at most the cycle in flight, and ``--resume`` finishes the run.

The orchestrator sits below the store (docs/dev/architecture.md, the layer rule): the commands
open the store and hand it to ``prepare`` as a ``Recorder``. Modules: ``prepare`` (what is
checked before anything starts, and the run's row), ``rows`` (a cycle's row completed by the
parent, and ``record``), ``run`` (the workers and their watchdog).
"""

from rig.parent.orchestrator.prepare import (
    Prepared,
    Recorder,
    check_run_inputs,
    new_run_id,
    package_versions,
    prepare,
    write_run_row,
)
from rig.parent.orchestrator.rows import record
from rig.parent.orchestrator.run import WorkerHandle, run_cycles

__all__ = [
    "Prepared",
    "Recorder",
    "WorkerHandle",
    "check_run_inputs",
    "new_run_id",
    "package_versions",
    "prepare",
    "record",
    "run_cycles",
    "write_run_row",
]
