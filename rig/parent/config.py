"""The effective configuration of a run: defaults < TOML file < command-line options.

Every key of the file is a field of ``RunConfig`` (sections ``[thresholds]`` and ``[workload]``
hold the nested ones); an unknown key, a wrong type or a bad value is one ``RigError`` line,
raised before anything starts.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from collections.abc import Callable
from pathlib import Path

from rig.common.errors import RigError
from rig.common.text import redact
from rig.contract.engines import EngineName
from rig.contract.verdicts import MAX_MEMORY_GROWTH_B, MAX_SLOWDOWN_PCT
from rig.parent.repository import FAULTS, KINDS

# Each vocabulary of the options, defined here once: the command line's choices, the TOML file's
# checks and the matrix's lists all read these.
Retain = typing.Literal["none", "last-response", "last-array"]
StopStrategy = typing.Literal["stop", "unload-then-stop"]
RestartMode = typing.Literal["fresh-process", "same-process", "reload"]
Arrivals = typing.Literal["poisson", "constant"]
RETAIN = typing.get_args(Retain)
STOP_STRATEGIES = typing.get_args(StopStrategy)
RESTART_MODES = typing.get_args(RestartMode)
ENGINES = typing.get_args(EngineName)
ARRIVALS = typing.get_args(Arrivals)
MODELS = KINDS  # the rig's template models (rig.parent.repository renders them)
FAULT_PRESETS = tuple(FAULTS)  # the template model's fault injection presets
# The built-in workloads: locustfiles in workloads/ (a path to a user's locustfile also serves)
from rig.contract.spec import WORKLOADS  # noqa: E402

_D = typing.TypeVar("_D")


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Exit status of a soak: 1 when any is crossed (0 where unset)."""

    max_stop_latency_s: float | None = None
    min_finalize_success: float | None = None  # 0..1
    allow_leaks: bool = False  # stubs or shared memory left behind
    allow_outcomes: str | None = None  # comma-separated; None: clean (soak), any (cycle)
    # The growth verdict (verdicts.classify_growth): leaking past this many bytes per 1,000 requests
    # in any process kind, slowing past this % slower at the load's end than its start
    max_memory_growth: float = MAX_MEMORY_GROWTH_B
    max_slowdown: float = MAX_SLOWDOWN_PCT


@dataclasses.dataclass(frozen=True)
class WorkloadConfig:
    """Sustained load inside each cycle (Locust); ``name`` none = a fixed count of requests."""

    name: str = "none"  # none | steady | ramp | step | spike | soak (workloads/) | FILE.py
    seconds: float = 2.0  # per cycle
    users: int = 1  # closed loop: Locust users
    in_flight: int = 1  # closed loop: requests in flight per user
    rate: float | None = None  # open loop: arrivals per second
    arrivals: Arrivals = "poisson"  # open loop
    window_seconds: float = 1.0
    seed: int = 0
    web_port: int | None = None  # serve Locust's web UI on 127.0.0.1:PORT during the load
    master: str | None = None  # HOST:PORT of a `rig fleet` master: each cycle's load joins it


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A run's options, frozen: built once from the defaults, the TOML file and the command line
    (``load``), checked once (``validate``, which returns the config a scenario or a model shape
    completes). A command that runs something else (a bench point, a resumed run's new place)
    derives a config of its own with ``dataclasses.replace``; none is edited in place."""

    runtime: str | None = None  # auto | container | embedded-<v> | <v>
    engine: EngineName = "auto"
    model: str = "numpy"  # numpy | cupy (templates), ignored with model_repository
    model_repository: str | None = None
    model_size: int = 4
    instances: int = 1
    max_batch_size: int = 0
    dynamic_batching: bool = False
    queue_delay_us: int = 0  # the dynamic batcher's max_queue_delay_microseconds (the template's)
    decoupled: bool = False  # the template model sends its responses through each request's sender
    model_shape: str | None = (
        None  # a model shape (rig.scenarios.shapes): sets the four above; a scenario's, one it runs in
    )
    fault: str = "none"  # one of FAULT_PRESETS (the template model's)
    execute_delay_ms: float = 0.0
    cycles: int = 1
    requests: int = 100  # per cycle, when no workload runs
    requests_in_flight: int = 1  # the fixed count sent this many at a time (rig.worker.grouped): batches form
    retain: Retain = "none"
    # a lifecycle scenario (rig.scenarios.catalog): sets fault and retain, or its own models
    scenario: str | None = None
    control: bool = False  # the scenario's negative control: the same without its fault
    client: str = "none"  # what the client does around stop(): set by the scenario (rig.scenarios.client.clientside)
    exit_timeout: int = 30
    stop_strategy: StopStrategy = "stop"
    restart: RestartMode = "fresh-process"
    startup_timeout: float = 120.0
    request_timeout: float = 30.0  # a request unanswered this long ends the cycle's workload
    input_data: str = "random"  # random | zero | FILE.json (perf_analyzer's format)
    input_memory: str = "auto"  # auto | cpu | gpu: where the inputs live (auto: gpu for the cupy model)
    shapes: str | tuple[str, ...] | None = None  # variable dimensions: "NAME:d1,d2 NAME2:d" (or several such)
    results: str = "results"
    node: str | None = None  # the name rows carry in `host` (default the hostname)
    memory_samples: bool = True  # sample every process's memory through the load (rig.worker.observers)
    server_stats: bool = True  # read Triton's statistics of the models as each window closes (rig.worker.serverstats)
    thresholds: Thresholds = dataclasses.field(default_factory=Thresholds)
    workload: WorkloadConfig = dataclasses.field(default_factory=WorkloadConfig)

    def validate(self) -> RunConfig:
        """This config checked (bad input: one ``RigError`` line), as the run will use it: a
        locustfile's path made absolute, a scenario or a model shape applied, the inputs in their
        canonical form."""

        def one_of(name, value, allowed):
            if value not in allowed:
                raise RigError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")

        one_of("engine", self.engine, ENGINES)
        one_of("retain", self.retain, RETAIN)
        one_of("stop_strategy", self.stop_strategy, STOP_STRATEGIES)
        one_of("restart", self.restart, RESTART_MODES)
        cfg = self
        if cfg.workload.name.endswith(".py"):
            path = Path(cfg.workload.name).expanduser()
            if not path.is_file():
                raise RigError(
                    f"workload file {path} does not exist: give a locustfile, or one of {', '.join(WORKLOADS)}"
                )
            cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, name=str(path.resolve())))
            if cfg.workload.rate is not None:
                raise RigError(
                    "--rate drives the rig's own open-loop lane; a locustfile workload is "
                    "closed loop (its users send the requests): drop one of the two"
                )
        else:
            one_of("workload.name", cfg.workload.name, ("none",) + WORKLOADS)
        one_of("workload.arrivals", cfg.workload.arrivals, ARRIVALS)
        w = cfg.workload
        if (
            w.seconds <= 0
            or w.window_seconds <= 0
            or w.users < 1
            or w.in_flight < 1
            or (w.rate is not None and w.rate <= 0)
        ):
            raise RigError("workload seconds, window_seconds and rate must be > 0; users and in_flight >= 1")
        if w.master is not None:
            from rig.contract.fleet import parse_master

            parse_master(w.master)
        if cfg.scenario is not None:
            from rig.scenarios import setup as scenario_setup

            cfg = scenario_setup.apply(cfg)
        elif cfg.model_shape is not None:
            cfg = cfg._model_shape()
        elif cfg.control:
            raise RigError(
                "--control runs a scenario's negative control: give --scenario NAME too (`rig scenarios` lists them)"
            )
        if cfg.model_repository is None:
            one_of("model", cfg.model, MODELS)
            one_of("fault", cfg.fault, FAULT_PRESETS)
        cfg = cfg._inputs()
        if cfg.cycles < 1 or cfg.requests < 0 or cfg.exit_timeout < 0 or cfg.requests_in_flight < 1:
            raise RigError("cycles must be >= 1, requests >= 0, requests_in_flight >= 1 and exit_timeout >= 0")
        t = cfg.thresholds
        if t.min_finalize_success is not None and not 0 <= t.min_finalize_success <= 1:
            raise RigError("thresholds.min_finalize_success is a fraction between 0 and 1")
        if t.max_memory_growth < 0 or t.max_slowdown < 0:
            raise RigError(
                "thresholds.max_memory_growth (bytes per 1,000 requests) and thresholds.max_slowdown (%) must be >= 0"
            )
        return cfg

    def _model_shape(self) -> RunConfig:
        """The template model served in ``model_shape`` (rig.scenarios.shapes): its batching, instances and
        transaction policy; a model repository's own, or a shape given twice, refused in one line."""
        from rig.scenarios import shapes

        assert self.model_shape is not None
        if self.model_repository:
            raise RigError(
                f"--model-shape {self.model_shape} shapes the rig's template model, and "
                "--model-repository runs your own (its config.pbtxt says its shape): drop one"
            )
        shape = shapes.parse(self.model_shape)
        if shapes.settings_of(self) not in (shapes.DEFAULTS, shapes.settings_of(shape)):
            raise RigError(
                f"--model-shape {self.model_shape} sets the model's batching and instances: drop "
                "--instances, --max-batch-size, --dynamic-batching and --queue-delay-us (or --model-shape)"
            )
        return dataclasses.replace(self, **shape.settings(), model_shape=shape.name)

    def _inputs(self) -> RunConfig:
        """``input_data`` zero, random or a file (made absolute: the worker runs elsewhere; a
        relative path is the user's working folder's), ``shapes`` in its canonical text."""
        from rig.contract.inputs import GENERATED, format_shapes, parse_shapes

        input_data = self.input_data
        if input_data not in GENERATED:
            path = Path(input_data).expanduser()
            if not path.is_file():
                raise RigError(
                    f"--input-data {input_data}: no such file (give zero, random, or a JSON "
                    "file in perf_analyzer's format)"
                )
            input_data = str(path.resolve())
        return dataclasses.replace(self, input_data=input_data, shapes=format_shapes(parse_shapes(self.shapes)) or None)

    def to_toml(self) -> str:
        """The effective config as TOML text (stored with every run)."""
        lines, nested = [], []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if dataclasses.is_dataclass(v):
                nested.append((f.name, v))
            elif v is not None:
                lines.append(f"{f.name} = {_toml_value(v)}")
        for name, sub in nested:
            lines.append(f"\n[{name}]")
            for f in dataclasses.fields(sub):
                v = getattr(sub, f.name)
                if v is not None:
                    lines.append(f"{f.name} = {_toml_value(v)}")
        return redact("\n".join(lines) + "\n")  # no credential of a results URI is stored


def _toml_value(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _coerce(where: str, hint, value):
    if typing.get_origin(hint) is typing.Literal:
        if value not in typing.get_args(hint):
            raise RigError(f"{where} must be one of {', '.join(typing.get_args(hint))} (got {value!r})")
        return value
    args = typing.get_args(hint)
    allowed = [a for a in args if a is not type(None)] if args else [hint]
    if value is None and type(None) in args:
        return None
    for t in allowed:
        if t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if t is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if t in (str, bool) and isinstance(value, t):
            return value
        if (
            typing.get_origin(t) is tuple
            and isinstance(value, (list, tuple))
            and all(isinstance(x, str) for x in value)
        ):
            return tuple(value)
    names = " or ".join(getattr(t, "__name__", str(t)) for t in allowed)
    raise RigError(f"{where} must be {names} (got {value!r})")


def _build(base: _D, data: dict, where: str) -> _D:
    """``base`` with the keys of ``data`` (a TOML table, or options as nested tables) set: an
    unknown key, a wrong type or a bad value is one ``RigError`` line naming ``where``."""
    hints = typing.get_type_hints(type(base))
    fields = {f.name for f in dataclasses.fields(base)}  # type: ignore[arg-type]
    changes = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in fields:
            raise RigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(fields))})")
        current = getattr(base, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise RigError(f"{where}: {key} must be a table [{key}]")
            changes[name] = _build(current, value, f"{where} [{key}]")
        else:
            changes[name] = _coerce(f"{where}: {key}", hints[name], value)
    return dataclasses.replace(base, **changes)  # type: ignore[type-var]


def load(
    path: str | None, overrides: dict | None = None, settle: Callable[[RunConfig], RunConfig] | None = None
) -> RunConfig:
    """Defaults, then the TOML file (if any), then the non-None overrides (dotted keys allowed);
    ``settle``, a command's own rule on what was given (a rate alone means an open loop), before
    the one check."""
    cfg = RunConfig()
    if path:
        p = Path(path)
        if not p.is_file():
            raise RigError(f"config file {path} does not exist")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise RigError(f"config file {path} is not valid TOML: {e}") from None
        cfg = _build(cfg, data, str(path))
    cfg = _build(cfg, _nested(overrides or {}), "option")
    if settle is not None:
        cfg = settle(cfg)
    return cfg.validate()


def _nested(flat: dict) -> dict:
    """Config keys, dotted for a section's (``workload.users``), as the nested tables a file
    gives; a None value is left out (not given)."""
    nested: dict = {}
    for key, value in flat.items():
        if value is None:
            continue
        if "." in key:
            section, sub = key.split(".", 1)
            nested.setdefault(section, {})[sub] = value
        else:
            nested[key] = value
    return nested


def file_sets(path: str | None, section: str, key: str) -> bool:
    """Whether the TOML config file at ``path`` sets ``[section] key`` itself (a command whose
    default differs from the config's, such as bench's window length, yields to the file)."""
    if not path:
        return False
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    table = data.get(section)
    return isinstance(table, dict) and any(k.replace("-", "_") == key for k in table)


def from_toml_text(text: str) -> RunConfig:
    return _build(RunConfig(), tomllib.loads(text), "stored config").validate()


def derive(base: RunConfig, changes: dict, validate: bool = True) -> RunConfig:
    """``base`` with ``changes`` (config keys, dotted for a section's: ``workload.users``,
    ``thresholds.allow_outcomes``; a None value leaves the key as it is), as ``load`` reads a
    file and then options: ``base.to_toml()`` parsed, the changes applied, validated (a bad key,
    type or value is one ``RigError`` line). ``base.to_toml()`` redacts a results URI's
    credentials: give ``results`` in ``changes`` where it has any. ``validate=False``: the config
    as a file gives it, not yet validated (a scenario named but not applied), whose ``to_toml()``
    ``from_toml_text`` validates once (an applied scenario's does not read back: its shape's
    settings clash with it)."""
    cfg = _build(RunConfig(), tomllib.loads(base.to_toml()), "base config")
    cfg = _build(cfg, _nested(changes), "option")
    return cfg.validate() if validate else cfg
