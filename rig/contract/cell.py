"""The contract between `rig matrix` and one of its cells: ``CellSpec``, the cell's typed
configuration, written as a JSON file that ``python -m rig cell --spec FILE --result-fd N``
(``rig.commands.cell``) runs. The cell answers over the fd in ``rig.contract.messages``:
``CellDone`` (its exit status, run and reasons), or ``Fatal`` where an exception escaped it
(docs/dev/matrix-cells.md)."""

from __future__ import annotations

import dataclasses
import json
import typing

from rig.common.errors import RigError
from rig.contract import typed

Command = typing.Literal["soak", "bench"]
COMMANDS = typing.get_args(Command)


@dataclasses.dataclass(frozen=True)
class BenchSettings:
    """A sweep's own settings, beside its run configuration: `rig bench`'s options of the same names
    (the command line makes them, ``rig.commands.bench.run``; a matrix's bench cell carries them,
    ``CellSpec.bench``). The parser's defaults are these."""

    concurrency: str | None = None  # closed-loop points, "1,2,4,8"
    rates: str | None = None  # open-loop points, "1000,2000"
    windows: int = 3  # windows per point
    window_seconds: float | None = None  # None: the config file's, else 5 (perf_analyzer's interval)
    repeats: int = 3  # measurements per point
    p99_bound_ms: float | None = None  # stop the sweep once p99 exceeds it
    compare: str | None = None  # "perf-analyzer": run it at the same points
    cpu_idle: str = "hold"  # hold | os (rig.common.cpuidle)
    neighbour: str = "none"  # none | burn:PCT, beside the node for the whole sweep (rig.common.neighbour)
    target_model: str | None = None  # the model the load goes to (None: the repository's first)
    all_models: bool | None = None  # spread the closed loop over every model
    instances: tuple[int, ...] = ()  # instance counts to sweep, each a server of its own (): the config's
    config_file: str | None = None  # the config file given, whose window_seconds is the default


@dataclasses.dataclass(frozen=True)
class CellSpec:
    """One cell of a matrix. ``config`` is its whole run configuration as TOML text
    (``RunConfig.to_toml``, as a config file gives it: a scenario's settings are applied when the
    cell validates it, as `rig soak --scenario` applies them); ``run_id`` is the run's, named by
    the matrix as it starts the cell (a cell killed on its timeout still names its run; empty
    in a job not yet started);
    ``allowed``: the verdicts that pass a soak; ``bench``: a bench's own settings (None for a soak);
    ``results``: where its rows go, as given (the TOML text redacts a URI's credentials); ``cpus``:
    `--cpus`, held by the cell (``rig.common.cpushare``)."""

    command: Command
    config: str
    run_id: str
    label: str = ""
    allowed: tuple[str, ...] = ()
    bench: BenchSettings | None = None
    results: str | None = None
    cpus: str | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> CellSpec:
        """The spec in ``text``, every field checked (``rig.contract.typed``); ``ValueError`` (one
        line) for one that is not a cell's."""
        try:
            return typed.from_json(cls, text, "cell spec")
        except RigError as e:
            raise ValueError(str(e).removeprefix("cell spec: ")) from None
