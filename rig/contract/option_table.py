"""The run's options, one line each: the one table that the command line, the TOML file (read and
written) and the typed config are made from, and that the worker's spec takes its defaults from.

Each option is a field of ``RunOptions`` (or of its sections, ``Thresholds`` and ``WorkloadConfig``:
``[thresholds]`` and ``[workload]`` in a file) made by ``opt``: its type is the annotation, and the
rest is the ``Option`` it carries: the default, the ``--help`` group, the help, the flag, the commands
that offer it, and where it goes: the ``CycleSpec`` field the worker reads it from (``spec``), or why
it stays with the parent (``parent``). A new option is one line here, plus its use.

What is made from it: ``rig.parent.config.RunConfig`` (this class, with its checks), the argparse
options of ``rig cycle``, ``soak``, ``bench`` and ``matrix`` (``rig.parent.options``), ``read`` (a TOML
table or the options given, onto a config) and ``to_toml``, and ``to_spec`` (what
``orchestrator.spec.run_spec`` hands the worker as it is). It lives in the contract, beside
``CycleSpec``, so that both sides read one default; it knows nothing of argparse."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from dataclasses import field

from rig.common.errors import RigError
from rig.common.text import redact
from rig.contract.engines import EngineName
from rig.contract.verdicts import MAX_MEMORY_GROWTH_B, MAX_SLOWDOWN_PCT

# Each vocabulary of the options, defined once: the command line's choices, the file's checks, the
# matrix's lists and the worker's spec read these.
Retain = typing.Literal["none", "last-response", "last-array"]
StopStrategy = typing.Literal["stop", "unload-then-stop"]
RestartMode = typing.Literal["fresh-process", "same-process", "reload"]
Arrivals = typing.Literal["poisson", "constant"]
INPUT_MEMORY = ("auto", "cpu", "gpu")  # --input-memory: auto is gpu for the cupy model, cpu otherwise
WORKLOADS = ("steady", "soak", "ramp", "step", "spike")  # the built-in workloads (workloads/*.py)

# The groups of `--help`, in its order
WHAT_RUNS = "what runs"
LIFECYCLE = "lifecycle"
WORKLOAD = "workload inside each cycle"
THRESHOLDS = "thresholds (exit status 1 when crossed)"
GROUPS = (WHAT_RUNS, LIFECYCLE, WORKLOAD, THRESHOLDS)

# The commands that offer an option on their command line
COMMANDS = ("cycle", "soak", "bench", "matrix")
CYCLES = ("cycle", "soak", "matrix")  # those that run cycles (a matrix's cells are soaks)
BY_HAND = ("cycle", "soak")  # a matrix sets it for each cell, or has an option of its own
NOT_MATRIX = ("cycle", "soak", "bench")

# Why an option stays with the parent (``Option.parent``), where several share a reason
TEMPLATE = "rendered into the template model's config.pbtxt (rig.parent.repository), which the worker loads"
JUDGED = "judged by the parent over the run's stored cycles (rig.analysis.verdict), never by a worker"


def rate_of(text: str) -> float:
    """``--rate``: one number (a list is `rig bench --rates`')."""
    try:
        return float(text)
    except ValueError:
        raise RigError(
            f"--rate is one number of arrivals per second (got {text!r}); lists are for `rig bench --rates`"
        ) from None


@dataclasses.dataclass(frozen=True)
class Option:
    """An option's line in the table, beside its type (the field's annotation) and default."""

    group: str  # its group in `--help` (GROUPS)
    help: str | None = None  # `(default X)` is added from the default, unless the help says it
    flag: str | None = ""  # "": --NAME (the field's name, dashed); None: no flag (a scenario or a shape sets it)
    metavar: str | None = None
    commands: tuple[str, ...] = COMMANDS  # the commands whose command line offers it
    # The words it takes: a tuple, or the name of a vocabulary the parent knows ("models", "faults")
    choices: tuple[str, ...] | str | None = None
    listed: bool = False  # the choices listed in the help, not held by the parser (a repository's own goes)
    words: tuple[str, str] | None = None  # a bool given as a word: (true, false)
    parse: Callable[[str], typing.Any] | None = None  # the word given, made the field's value
    needs: typing.Literal["template", "workload"] | None = None  # refused with a repository / without a workload
    spec: str | None = None  # the CycleSpec field it reaches ("workload.users": the spec's workload's)
    made: str | None = None  # how run_spec makes that field of it, where the value is not handed as it is
    parent: str | None = None  # why it never reaches the spec as itself


def option(group: str, help: str | None = None, **line) -> dict[str, Option]:
    """An option's line, as the metadata of its field (``field(default=..., metadata=option(...))``)."""
    return {"option": Option(group, help, **line)}


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Exit status of a soak: 1 when any is crossed (0 where unset)."""

    max_stop_latency_s: float | None = field(
        default=None, metadata=option(THRESHOLDS, "seconds", flag="--max-stop-latency", commands=CYCLES, parent=JUDGED)
    )
    min_finalize_success: float | None = field(
        default=None, metadata=option(THRESHOLDS, "fraction 0..1", commands=CYCLES, parent=JUDGED)
    )
    # stubs or shared memory left behind
    allow_leaks: bool = field(default=False, metadata=option(THRESHOLDS, commands=CYCLES, parent=JUDGED))
    # The growth verdict (verdicts.classify_growth), judged by the worker as each cycle ends
    max_memory_growth: float = field(
        default=MAX_MEMORY_GROWTH_B,
        metadata=option(
            THRESHOLDS,
            "a cycle is `leaking` where a process kind (the worker, a model's stubs) grows by more than this many "
            "bytes per 1,000 requests over its whole interval",
            metavar="BYTES_PER_1K",
            commands=CYCLES,
            spec="max_memory_growth",
        ),
    )
    max_slowdown: float = field(
        default=MAX_SLOWDOWN_PCT,
        metadata=option(
            THRESHOLDS,
            "a cycle is `slowing` where its load's end is more than PCT % slower than its start (p50 up or "
            "throughput down) over the whole interval; a run, the same across its cycles",
            metavar="PCT",
            commands=CYCLES,
            spec="max_slowdown",
        ),
    )
    # None: clean (soak), any (cycle)
    allow_outcomes: str | None = field(
        default=None,
        metadata=option(
            THRESHOLDS,
            "comma-separated verdicts that do not fail the run, of the lifecycle (clean, exit_timeout, ...), of "
            "the load (ok, errors, timeouts, ...) and of the growth (leaking, slowing); a kind left unnamed keeps "
            "its default (soak: clean, ok and ok; cycle: any, it records and reports)",
            commands=CYCLES,
            parent=JUDGED,
        ),
    )


@dataclasses.dataclass(frozen=True)
class WorkloadConfig:
    """Sustained load inside each cycle (Locust); ``name`` none = a fixed count of requests."""

    name: str = field(
        default="none",
        metadata=option(
            WORKLOAD,
            "none (fixed request count), steady, ramp, step, spike, soak (locustfiles in workloads/), or the path "
            "of your own locustfile (FILE.py)",
            flag="--workload",
            spec="workload.name",
        ),
    )
    seconds: float = field(
        default=2.0,
        metadata=option(
            WORKLOAD, flag="--workload-seconds", commands=CYCLES, needs="workload", spec="workload.seconds"
        ),
    )
    # closed loop: Locust users
    users: int = field(default=1, metadata=option(WORKLOAD, commands=CYCLES, needs="workload", spec="workload.users"))
    # closed loop: per user
    in_flight: int = field(default=1, metadata=option(WORKLOAD, needs="workload", spec="workload.in_flight"))
    rate: float | None = field(
        default=None,
        metadata=option(
            WORKLOAD, "open loop: arrivals per second", commands=CYCLES, parse=rate_of, spec="workload.rate"
        ),
    )
    # open loop
    arrivals: Arrivals = field(default="poisson", metadata=option(WORKLOAD, needs="workload", spec="workload.arrivals"))
    window_seconds: float = field(
        default=1.0, metadata=option(WORKLOAD, needs="workload", spec="workload.window_seconds")
    )
    seed: int = field(default=0, metadata=option(WORKLOAD, needs="workload", spec="workload.seed"))
    web_port: int | None = field(
        default=None,
        metadata=option(
            WORKLOAD,
            "serve Locust's web UI on 127.0.0.1:PORT while loading",
            flag="--locust-web-port",
            commands=BY_HAND,
            needs="workload",
            spec="workload.web_port",
        ),
    )
    master: str | None = field(
        default=None,
        metadata=option(
            WORKLOAD,
            "HOST:PORT of a `rig fleet` master: each cycle's load joins it as a Locust worker, and the master sets "
            "users, shape and length",
            flag="--locust-master",
            commands=CYCLES,
            spec="workload.master",
        ),
    )


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """A run's options as the table declares them; ``rig.parent.config.RunConfig`` is this class with
    its checks (``validate``) and the way it is read (``load``)."""

    runtime: str | None = field(
        default=None,
        metadata=option(
            WHAT_RUNS,
            "auto (default), container, or an embedded version such as 0.7.0",
            commands=NOT_MATRIX,
            parent="resolved by the parent (rig.parent.runtime): the spec's runtime, a Runtime of its kind",
        ),
    )
    engine: EngineName = field(
        default="auto",
        metadata=option(
            WHAT_RUNS,
            commands=NOT_MATRIX,
            parent="chosen by the parent (rig.parent.engines: auto picks one): the spec's engine",
        ),
    )
    # ignored with model_repository
    model: str = field(
        default="numpy",
        metadata=option(WHAT_RUNS, "the rig's model template", choices="models", needs="template", parent=TEMPLATE),
    )
    model_repository: str | None = field(
        default=None,
        metadata=option(
            WHAT_RUNS,
            "soak your own model repository instead of a template",
            parent="copied or rendered into the run's work folder by the parent: the spec's model_repository",
        ),
    )
    model_size: int = field(
        default=4,
        metadata=option(
            WHAT_RUNS,
            "matrix size of the template model",
            needs="template",
            spec="check",
            made="the template's size, which the outputs are checked against (0 with a repository of one's own)",
        ),
    )
    instances: int = field(default=1, metadata=option(WHAT_RUNS, "model instances", needs="template", parent=TEMPLATE))
    max_batch_size: int = field(default=0, metadata=option(WHAT_RUNS, needs="template", parent=TEMPLATE))
    dynamic_batching: bool = field(default=False, metadata=option(WHAT_RUNS, needs="template", parent=TEMPLATE))
    queue_delay_us: int = field(
        default=0,
        metadata=option(
            WHAT_RUNS,
            "with --dynamic-batching: the batcher's max_queue_delay_microseconds",
            metavar="US",
            needs="template",
            parent=TEMPLATE,
        ),
    )
    # set by --model-shape: the template sends through each request's sender
    decoupled: bool = field(default=False, metadata=option(WHAT_RUNS, flag=None, parent=TEMPLATE))
    fault: str = field(
        default="none",
        metadata=option(
            WHAT_RUNS,
            "fault injection preset of the template model",
            choices="faults",
            listed=True,
            needs="template",
            parent=TEMPLATE,
        ),
    )
    execute_delay_ms: float = field(
        default=0.0,
        metadata=option(WHAT_RUNS, "make the template model slow on purpose", needs="template", parent=TEMPLATE),
    )
    input_data: str = field(
        default="random",
        metadata=option(
            WHAT_RUNS,
            'what requests carry: random data, zeros, or a JSON file in perf_analyzer\'s format ({"data": '
            '[{"INPUT": [1, 2]}, ...]}, entries sent in turn; a relative path is this folder\'s)',
            metavar="zero|random|FILE.json",
            spec="input_data",
        ),
    )
    input_memory: str = field(
        default="auto",
        metadata=option(
            WHAT_RUNS,
            "where the requests' inputs live, and whether outputs the model leaves on the GPU stay there: cpu, or "
            "gpu (CUDA device 0 of those visible, through CuPy: inputs copied there once, submitted as GPU memory, "
            "outputs allocated there and read back to be checked) (default auto: gpu for the cupy model, cpu "
            "otherwise); recorded in every window's input_memory, output_memory",
            choices=INPUT_MEMORY,
            spec="input_memory",
            made="auto made cpu or gpu (rig.parent.options.input_memory)",
        ),
    )
    # variable dimensions: "NAME:d1,d2 NAME2:d" (or several such)
    shapes: str | tuple[str, ...] | None = field(
        default=None,
        metadata=option(
            WHAT_RUNS,
            "variable dimensions of an input (repeat it, or INPUT0:5,X:2,3), for generated data and for file "
            "entries without a shape; the batch dimension left out",
            flag="--shape",
            metavar="NAME:d1,d2",
            spec="shapes",
            made="checked against the models' inputs (preflight.check_inputs): each input's dimensions",
        ),
    )
    cycles: int = field(
        default=1,
        metadata=option(
            LIFECYCLE,
            "cycles to run",
            commands=CYCLES,
            parent="shared among the workers by the parent: each spec holds its own cycles' numbers "
            "(orchestrator.spec.cycle_spec)",
        ),
    )
    requests: int = field(
        default=100,
        metadata=option(LIFECYCLE, "requests per cycle when no workload runs", commands=CYCLES, spec="requests"),
    )
    requests_in_flight: int = field(
        default=1,
        metadata=option(
            LIFECYCLE,
            "send those requests N at a time, so that a batched model can form batches of up to N (default 1: one "
            "at a time)",
            metavar="N",
            commands=CYCLES,
            spec="requests_in_flight",
        ),
    )
    retain: Retain = field(
        default="none",
        metadata=option(LIFECYCLE, "what stays referenced across stop()", commands=BY_HAND, spec="retain"),
    )
    # a lifecycle scenario (rig.scenarios.catalog): sets fault and retain, or its own models
    scenario: str | None = field(
        default=None,
        metadata=option(
            LIFECYCLE,
            "a lifecycle scenario (`rig scenarios` lists them): its fault and retention, or models of its own; "
            "recorded in each cycle's `scenario`",
            metavar="NAME",
            commands=BY_HAND,
            parent="applied by validate (rig.scenarios.setup): its fault, retention, client and shape reach the "
            "worker as those options do, its requests at stop and quiet phases as the spec's",
        ),
    )
    control: bool = field(
        default=False,
        metadata=option(
            LIFECYCLE,
            "with --scenario: its negative control, the same model and client without the fault",
            commands=BY_HAND,
            parent="applied by validate with the scenario: the same without its fault",
        ),
    )
    # a model shape (rig.scenarios.shapes): sets the template's batching and instances; a scenario's, one it runs in
    model_shape: str | None = field(
        default=None,
        metadata=option(
            LIFECYCLE,
            "how the model is served: unbatched, batched (max_batch_size 8, dynamic batching), instances-2, "
            "decoupled, or several joined with commas; with --scenario, one of the shapes it runs in (`rig "
            "scenarios` says which; default its first); recorded in each cycle's `shape`",
            metavar="SHAPE",
            commands=BY_HAND,
            parent="applied by validate: the template's batching and instances, " + TEMPLATE,
        ),
    )
    # what the client does around stop(): set by the scenario (rig.worker.clients.clientside)
    client: str = field(default="none", metadata=option(LIFECYCLE, flag=None, spec="client"))
    stop_strategy: StopStrategy = field(
        default="stop", metadata=option(LIFECYCLE, commands=CYCLES, spec="stop_strategy")
    )
    restart: RestartMode = field(
        default="fresh-process",
        metadata=option(
            LIFECYCLE,
            "how the server restarts between cycles: fresh-process (a new worker per cycle), same-process (one "
            "worker starts and stops the server again and again), reload (one server; the models unloaded and "
            "loaded again each cycle)",
            commands=CYCLES,
            spec="restart",
        ),
    )
    exit_timeout: int = field(
        default=30, metadata=option(LIFECYCLE, "the server's exit_timeout in seconds", spec="exit_timeout")
    )
    startup_timeout: float = field(
        default=120.0, metadata=option(LIFECYCLE, "seconds to become ready", spec="startup_timeout")
    )
    # a request unanswered this long ends the cycle's workload
    request_timeout: float = field(
        default=30.0, metadata=option(LIFECYCLE, "seconds a request may take", spec="request_timeout")
    )
    memory_samples: bool = field(
        default=True,
        metadata=option(
            LIFECYCLE,
            "sample every process's memory (worker, each backend stub, GPU) through the load, for the growth "
            "verdict and the memory table",
            words=("on", "off"),
            spec="sample_memory",
        ),
    )
    server_stats: bool = field(
        default=True,
        metadata=option(
            LIFECYCLE,
            "read Triton's own statistics of the models as each window closes (requests, queue and compute time, "
            "batch sizes formed: the windows' server_* columns)",
            words=("on", "off"),
            needs="workload",
            spec="server_stats",
        ),
    )
    results: str = field(
        default="results",
        metadata=option(
            LIFECYCLE,
            "results folder (default results/)",
            parent="where the parent stores the rows the workers send; a worker writes none",
        ),
    )
    # a fleet node's name; the rows' host too
    node: str | None = field(
        default=None,
        metadata=option(
            LIFECYCLE, "the name this machine's rows carry in `host` (default the hostname)", spec="workload.node"
        ),
    )
    thresholds: Thresholds = dataclasses.field(default_factory=Thresholds)
    workload: WorkloadConfig = dataclasses.field(default_factory=WorkloadConfig)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One option of the table as the derivations read it: its key (dotted in a section) and field."""

    key: str  # "exit_timeout", "workload.users"
    type: typing.Any  # the field's annotation
    default: typing.Any
    option: Option

    @property
    def flag(self) -> str | None:
        if self.option.flag is None:
            return None
        return self.option.flag or "--" + self.key.rsplit(".", 1)[-1].replace("_", "-")

    @property
    def dest(self) -> str | None:
        """The name argparse keeps it under (its flag's, dashes made underscores)."""
        return None if self.flag is None else self.flag[2:].replace("-", "_")

    def given(self, word):
        """The value of the word given on the command line (None: not given)."""
        if word is None:
            return None
        if self.option.words is not None:
            return word == self.option.words[0]
        return self.option.parse(word) if self.option.parse is not None else word

    def shown(self) -> str | None:
        """The default as `--help` says it (None: nothing to say)."""
        v = self.default
        if v is None or v is False:
            return None
        if self.option.words is not None:
            return self.option.words[0 if v else 1]
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)


@functools.cache
def entries() -> tuple[Entry, ...]:
    """Every option of the table, in the order of `--help` (by group, then as the table lists them)."""
    out = []
    for name, hint, f in _fields(RunOptions):
        if dataclasses.is_dataclass(hint):
            out += [
                Entry(f"{name}.{sub}", sub_hint, sub_f.default, sub_f.metadata["option"])
                for sub, sub_hint, sub_f in _fields(hint)
            ]
        else:
            out.append(Entry(name, hint, f.default, f.metadata["option"]))
    return tuple(sorted(out, key=lambda e: GROUPS.index(e.option.group)))


def entry(key: str) -> Entry:
    return next(e for e in entries() if e.key == key)


def _fields(cls) -> list[tuple[str, typing.Any, dataclasses.Field]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name], f) for f in dataclasses.fields(cls)]


def to_spec(cfg: RunOptions, section: str = "") -> dict[str, typing.Any]:
    """The options a worker is handed as they are, by their spec's names: the spec's own fields
    (``section`` empty), or its workload's (``section`` "workload")."""
    out = {}
    for e in entries():
        target = e.option.spec
        if target is None or e.option.made is not None:
            continue
        where, _, name = target.rpartition(".")
        if where == section:
            value = cfg
            for part in e.key.split("."):
                value = getattr(value, part)
            out[name] = value
    return out


# ------------------------------------------------------------------ the TOML file, read and written


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


_D = typing.TypeVar("_D")


def read(base: _D, data: dict, where: str) -> _D:
    """``base`` with the keys of ``data`` (a TOML table, or options as nested tables) set, each made
    its field's type: an unknown key, a wrong type or a bad value is one ``RigError`` line naming
    ``where``."""
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
            changes[name] = read(current, value, f"{where} [{key}]")
        else:
            changes[name] = _coerce(f"{where}: {key}", hints[name], value)
    return dataclasses.replace(base, **changes)  # type: ignore[type-var]


def to_toml(cfg: RunOptions) -> str:
    """The config as TOML text, the table's keys in its order, its sections after them; a None value
    left out (the default), a results URI's credentials too (``redact``)."""
    lines, nested = [], []
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
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
    return redact("\n".join(lines) + "\n")


def _toml_value(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
