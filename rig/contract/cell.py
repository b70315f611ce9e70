"""The contract between `rig matrix` and one of its cells: ``CellSpec``, the cell's typed
configuration, written as a JSON file that ``python -m rig cell --spec FILE --result-fd N``
(``rig.commands.cell``) runs. The cell answers over the fd in ``rig.contract.messages``:
``CellDone`` (its exit status, run and reasons), or ``Fatal`` where an exception escaped it
(docs/dev/matrix-cells.md)."""

from __future__ import annotations

import dataclasses
import json
import typing

Command = typing.Literal["soak", "bench"]
COMMANDS = typing.get_args(Command)
# A bench cell's own settings (`rig bench`'s options of the same names; ``CellSpec.bench``)
BENCH_KEYS = ("concurrency", "windows", "window_seconds", "repeats")


@dataclasses.dataclass(frozen=True)
class CellSpec:
    """One cell of a matrix. ``config`` is its whole run configuration as TOML text
    (``RunConfig.to_toml``, as a config file gives it: a scenario's settings are applied when the
    cell validates it, as `rig soak --scenario` applies them); ``run_id`` is the run's, named by
    the matrix as it starts the cell (a cell killed on its timeout still names its run; empty
    in a job not yet started);
    ``allowed``: the verdicts that pass a soak; ``bench``: a bench's own settings (``BENCH_KEYS``;
    empty for a soak); ``results``: where its rows go, as given (the TOML text redacts a URI's
    credentials); ``cpus``: `--cpus`, held by the cell (``rig.common.cpushare``)."""

    command: Command
    config: str
    run_id: str
    label: str = ""
    allowed: tuple[str, ...] = ()
    bench: dict = dataclasses.field(default_factory=dict)
    results: str | None = None
    cpus: str | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> CellSpec:
        """The spec in ``text``; ``ValueError`` (one line) for one that is not a cell's."""
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ValueError(f"not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(obj) - names)
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)}")
        missing = sorted(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in obj and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        if missing:
            raise ValueError(f"missing key(s) {', '.join(missing)}")
        if obj["command"] not in COMMANDS:
            raise ValueError(f"command must be one of {', '.join(COMMANDS)} (got {obj['command']!r})")
        for key in ("config", "run_id", "label"):
            if key in obj and not isinstance(obj[key], str):
                raise ValueError(f"{key} must be a string (got {obj[key]!r})")
        for key in ("results", "cpus"):
            if obj.get(key) is not None and not isinstance(obj[key], str):
                raise ValueError(f"{key} must be a string or null (got {obj[key]!r})")
        allowed = obj.get("allowed", [])
        if not isinstance(allowed, list) or not all(isinstance(x, str) for x in allowed):
            raise ValueError(f"allowed must be a list of verdicts (got {allowed!r})")
        bench = obj.get("bench", {})
        if not isinstance(bench, dict) or set(bench) - set(BENCH_KEYS):
            raise ValueError(f"bench must be an object of {', '.join(BENCH_KEYS)} (got {bench!r})")
        return cls(**{**obj, "allowed": tuple(allowed), "bench": dict(bench)})
