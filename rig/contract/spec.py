"""What the parent hands a worker (``CycleSpec``, written as JSON to ``spec-NNNN.json``) and the names
both sides read the same way: the built-in workloads, the models of a repository, the requests a
scenario keeps in flight at stop, the files the leaking model leaves in /dev/shm."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from rig.common.errors import RigError
from rig.contract import typed
from rig.contract.option_table import INPUT_MEMORY as INPUT_MEMORY  # --input-memory (the table's)
from rig.contract.option_table import WORKLOADS as WORKLOADS  # the built-in workloads (workloads/*.py)
from rig.contract.option_table import Arrivals, RunOptions
from rig.contract.runtime import Runtime

# The defaults of the fields the spec shares with the run's options: the option table's
_RUN = RunOptions()
_LOAD = _RUN.workload

IN_FLIGHT = 8  # requests outstanding at stop() (the stop-in-flight scenario)
REFUSED = 100  # refused requests per model (the refused-request scenario)
LEAK_PREFIX = "rig-leak-"  # leaks-per-load's files in /dev/shm: rig-leak-<the worker's pid>-...


@dataclasses.dataclass(frozen=True)
class ClosedLoop:
    """A cycle's load as Locust users, each keeping requests in flight: a built-in workload or a
    locustfile, under its shape (or a fleet master's)."""

    name: str  # steady | ramp | step | spike | soak (workloads/) | FILE.py
    seconds: float = _LOAD.seconds  # per cycle
    users: int = _LOAD.users
    in_flight: int = _LOAD.in_flight  # requests in flight per user
    window_seconds: float = _LOAD.window_seconds
    web_port: int | None = _LOAD.web_port  # Locust's web UI on 127.0.0.1:PORT during the load
    master: str | None = _LOAD.master  # HOST:PORT of a `rig fleet` master: each cycle's load joins it
    node: str | None = _RUN.node  # this node's name in a fleet
    kind: typing.Literal["closed"] = "closed"


@dataclasses.dataclass(frozen=True)
class OpenLoop:
    """A cycle's load as arrivals on a seeded schedule, whatever the server's pace."""

    rate: float  # arrivals per second
    arrivals: Arrivals = _LOAD.arrivals
    seed: int = _LOAD.seed
    seconds: float = _LOAD.seconds  # per cycle
    window_seconds: float = _LOAD.window_seconds
    kind: typing.Literal["open"] = "open"


Workload = ClosedLoop | OpenLoop  # each kind of load a type of its own; ``kind`` tells them apart in JSON


@dataclasses.dataclass(frozen=True)
class CycleSpec:
    """What a worker needs to run cycles: made once by the parent (``orchestrator.spec.cycle_spec``),
    written as JSON and read back with the same types (``rig.contract.typed``; ``write``, ``read``),
    so that a worker can be re-run by hand, and a hand-edited field of the wrong type is refused."""

    run_id: str
    engine: str
    runtime: Runtime
    model_repository: str
    models: tuple[str, ...]  # models to send requests to
    model_label: str
    requests: int = _RUN.requests
    requests_in_flight: int = _RUN.requests_in_flight  # the fixed count sent this many at a time (rig.worker.grouped)
    retain: str = _RUN.retain
    exit_timeout: int = _RUN.exit_timeout
    stop_strategy: str = _RUN.stop_strategy
    restart: str = _RUN.restart
    startup_timeout: float = _RUN.startup_timeout
    request_timeout: float = _RUN.request_timeout
    evidence_dir: str = ""
    log_dir: str = ""
    cycles: tuple[int, ...] = (1,)
    workload: ClosedLoop | OpenLoop | None = None  # None: a fixed count of requests
    hook: str = ""  # path of rig/worker/hook/evidence.py
    check: int = 0  # the rig's template: matrix size to check outputs against
    # False: the template's answers are held to INPUT @ W within a tolerance, never to exact bytes (the
    # cupy model under dynamic batching: cuBLAS may pick another kernel for each batch size)
    check_exact: bool = True
    cwd: str = ""  # the user's folder: a locustfile's users run there (the worker does not)
    input_data: str = _RUN.input_data  # random | zero | an absolute path of a JSON file (rig.contract.inputs)
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)  # input -> dims (--shape)
    # model -> inputs its entries may leave out
    optional_inputs: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    client: str = _RUN.client  # what the client does around stop() (rig.worker.clients.clientside)
    in_flight_at_stop: int = IN_FLIGHT  # stop-in-flight: requests outstanding at stop()
    # The growth verdict's thresholds (None: not judged) and whether the processes are sampled
    max_memory_growth: float | None = _RUN.thresholds.max_memory_growth  # bytes per 1,000 requests, any process kind
    max_slowdown: float | None = _RUN.thresholds.max_slowdown  # % slower at the load's end than its start
    sample_memory: bool = _RUN.memory_samples
    server_stats: bool = (
        _RUN.server_stats
    )  # each window holds Triton's statistics of the models (rig.worker.serverstats)
    # The phases holding the quiet lock in a matrix (rig.worker.quiet): not those a fault only waits in
    quiet: tuple[str, ...] = ("start", "load")
    # Where the rig's inputs live, and whether a GPU preference for outputs is honoured: cpu | gpu | gpu:N
    # (rig.worker.engines.memory)
    input_memory: str = "cpu"  # resolved by the parent from the option (auto: cpu where no GPU)

    def write(self, path: Path) -> None:
        """The spec as JSON at ``path`` (what ``read`` takes back)."""
        Path(path).write_text(typed.to_json(self))

    @classmethod
    def read(cls, path: str | Path) -> CycleSpec:
        """The spec at ``path``, every field checked: a ``RigError`` of one line where one does not fit."""
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise RigError(f"spec {path}: {e.strerror or e}") from None
        return typed.from_json(cls, text, f"spec {path}")


def repository_models(repository: Path) -> list[str]:
    repo = Path(repository)
    if not repo.is_dir():
        raise RigError(f"model repository {repo} does not exist: pass --model-repository PATH to a folder of models")
    names = [p.name for p in sorted(repo.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not names:
        raise RigError(f"model repository {repo} holds no model folders")
    return names
