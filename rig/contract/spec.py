"""What the parent hands a worker (``CycleSpec``, written as JSON to ``spec-NNNN.json``) and the names
both sides read the same way: the built-in workloads, the models of a repository, the requests a
scenario keeps in flight at stop, the files the leaking model leaves in /dev/shm."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rig.common.errors import RigError
from rig.contract.verdicts import MAX_MEMORY_GROWTH_B, MAX_SLOWDOWN_PCT

INPUT_MEMORY = ("auto", "cpu", "gpu")  # --input-memory: auto is gpu for the cupy model, cpu otherwise
WORKLOADS = ("steady", "soak", "ramp", "step", "spike")  # the built-in workloads (workloads/*.py)
IN_FLIGHT = 8  # requests outstanding at stop() (the stop-in-flight scenario)
LEAK_PREFIX = "rig-leak-"  # leaks-per-load's files in /dev/shm: rig-leak-<the worker's pid>-...


@dataclasses.dataclass
class CycleSpec:
    """What a worker needs to run cycles; JSON-serialisable so a worker can be re-run by hand."""

    run_id: str
    engine: str
    runtime: dict
    model_repository: str
    models: list[str]  # models to send requests to
    model_label: str
    requests: int = 100
    requests_in_flight: int = 1  # the fixed count sent this many at a time (rig.worker.grouped)
    retain: str = "none"
    exit_timeout: int = 30
    stop_strategy: str = "stop"
    restart: str = "fresh-process"
    startup_timeout: float = 120.0
    request_timeout: float = 30.0
    evidence_dir: str = ""
    log_dir: str = ""
    cycles: list[int] = dataclasses.field(default_factory=lambda: [1])
    workload: dict | None = None  # WorkloadConfig as a dict, or None
    hook: str = ""  # path of rig/worker/hook/evidence.py
    check: int = 0  # the rig's template: matrix size to check outputs against
    cwd: str = ""  # the user's folder: a locustfile's users run there (the worker does not)
    input_data: str = "random"  # random | zero | an absolute path of a JSON file (rig.worker.inputs)
    shapes: dict = dataclasses.field(default_factory=dict)  # input -> dims (--shape)
    optional_inputs: dict = dataclasses.field(default_factory=dict)  # model -> inputs its entries may leave out
    client: str = "none"  # what the client does around stop() (rig.worker.clientside)
    in_flight_at_stop: int = IN_FLIGHT  # stop-in-flight: requests outstanding at stop()
    # The growth verdict's thresholds (None: not judged) and whether the processes are sampled
    max_memory_growth: float | None = MAX_MEMORY_GROWTH_B  # bytes per 1,000 requests, any process kind
    max_slowdown: float | None = MAX_SLOWDOWN_PCT  # % slower at the load's end than its start
    sample_memory: bool = True
    server_stats: bool = True  # each window holds Triton's statistics of the models (rig.worker.serverstats)
    # The phases holding the quiet lock in a matrix (rig.worker.quiet): not those a fault only waits in
    quiet: list = dataclasses.field(default_factory=lambda: ["start", "load"])
    # Where the rig's inputs live, and whether a GPU preference for outputs is honoured: cpu | gpu | gpu:N
    # (rig.worker.engines.memory)
    input_memory: str = "cpu"


def repository_models(repository: Path) -> list[str]:
    repo = Path(repository)
    if not repo.is_dir():
        raise RigError(f"model repository {repo} does not exist: pass --model-repository PATH to a folder of models")
    names = [p.name for p in sorted(repo.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not names:
        raise RigError(f"model repository {repo} holds no model folders")
    return names
