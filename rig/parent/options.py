"""The options of the commands that run Triton (cycle, soak, bench; matrix passes them to each
cell): their argparse options, made from the option table (``rig.contract.option_table``), the run's
configuration they make (file, then options), and what they must agree on: an option given that the
run could not apply is refused in one line, never ignored."""

from __future__ import annotations

import argparse
import dataclasses
import typing

from rig.common.errors import RigError
from rig.contract import option_table as table
from rig.contract.option_table import GROUPS, INPUT_MEMORY, LIFECYCLE, THRESHOLDS, WHAT_RUNS
from rig.parent.config import VOCABULARIES


def option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Flag:
    """A run command's option that is no field of the config: the command reads it itself (``why``)."""

    flag: str
    group: str
    commands: tuple[str, ...]
    why: str  # where it goes instead of the config
    first: bool = False  # at the head of its group (else at its end)
    kwargs: dict = dataclasses.field(default_factory=dict)  # argparse's


FLAGS = (
    Flag(
        "--config",
        WHAT_RUNS,
        table.COMMANDS,
        "the TOML file the config is read from before the options (config.load)",
        first=True,
        kwargs=dict(help="TOML file of options (example: workloads/nightly.toml)"),
    ),
    Flag(
        "--skip-ok",
        WHAT_RUNS,
        table.NOT_MATRIX,
        "the exit status of a run skipped here (rig.cli)",
        kwargs=dict(
            action="store_true", help="exit 0 when the run is skipped (the cupy model without a GPU); default: exit 3"
        ),
    ),
    Flag(
        "--cpus",
        LIFECYCLE,
        table.COMMANDS,
        "held by this process before the run starts, which all it starts inherits (rig.common.cpushare)",
        kwargs=dict(
            metavar="LIST|count:N|quota:X",
            help="hold the run to a share of the machine: CPUs as taskset -c lists them (0, 0,1, 0-3), "
            "count:N (the first N this process may use) or quota:X (X CPUs' time, as a pod's CPU limit: a "
            "cgroup of its own, which needs root); the worker, its load and the backend stubs inherit "
            "it, and the run's row records it (runs.cpu_share, runs.cpus) (default: all it may use)",
        ),
    ),
    Flag(
        "--junit",
        THRESHOLDS,
        table.BY_HAND,
        "a file the judged run is written to (rig.parent.junit)",
        kwargs=dict(
            metavar="FILE",
            help="also write what was judged as JUnit XML for CI (Jenkins, GitLab, GitHub Actions): a test "
            "case per threshold and per cycle; its folder must exist (checked before the run)",
        ),
    ),
)


def add_run_options(
    p: argparse.ArgumentParser,
    command: str,
    *,
    groups: tuple[str, ...] = GROUPS,
    titles: dict[str, str] | None = None,
    changed: dict[str, dict] | None = None,
) -> list[argparse.Action]:
    """The run options ``rig COMMAND`` offers (the table's and ``FLAGS``), each group of ``groups``
    under its title (or ``titles``'); ``changed``: argparse's arguments a command gives an option of
    the table its own way (its help, its type), by key. The actions added, in order."""
    added = []
    for group in groups:
        g = p.add_argument_group((titles or {}).get(group, group))
        mine = [f for f in FLAGS if f.group == group and command in f.commands]
        added += [g.add_argument(f.flag, **f.kwargs) for f in mine if f.first]
        for e in table.entries():
            if e.option.group == group and e.flag is not None and command in e.option.commands:
                added.append(add_option(g, e.key, **(changed or {}).get(e.key, {})))
        added += [g.add_argument(f.flag, **f.kwargs) for f in mine if not f.first]
    return added


def add_option(g, key: str, **changed) -> argparse.Action:
    """The table's option ``key`` on the command line: its flag, its choices or type, its help with
    its default (unless the help says it), nothing set unless given (``overrides``); ``changed``:
    argparse's arguments where a command gives the option its own (a help, a type, a default)."""
    e = table.entry(key)
    o = e.option
    kwargs: dict[str, typing.Any] = {"help": o.help}
    words = VOCABULARIES[o.choices] if isinstance(o.choices, str) else o.choices
    if o.words is not None:
        kwargs["choices"] = o.words
    elif words is not None and o.listed:
        kwargs["help"] = f"{o.help}: {', '.join(words)}"
    elif words is not None or typing.get_origin(e.type) is typing.Literal:
        kwargs["choices"] = words or typing.get_args(e.type)
    elif e.type is bool:
        kwargs.update(action="store_true", default=None)
    elif tuple[str, ...] in typing.get_args(e.type):
        kwargs["action"] = "append"
    elif o.parse is None:
        kwargs["type"] = next((t for t in (int, float) if t in (e.type, *typing.get_args(e.type))), None)
    if o.metavar is not None:
        kwargs["metavar"] = o.metavar
    kwargs.update(changed)
    shown = e.shown() if "default" not in changed else dataclasses.replace(e, default=changed["default"]).shown()
    kwargs["help"] = _with_default(kwargs["help"], shown)
    if kwargs.get("type") is None:
        kwargs.pop("type", None)
    return g.add_argument(e.flag, **kwargs)


def _with_default(text: str | None, shown: str | None) -> str | None:
    """The help, with ``(default SHOWN)`` where it does not say its default itself."""
    if text is not None:
        text = text.replace("%", "%%")
    if shown is None or "default" in (text or ""):
        return text
    return f"{text} (default {shown})" if text else f"(default {shown})"


def dests(command: str) -> list[str]:
    """The names argparse keeps the run options of ``rig COMMAND`` under."""
    return [e.dest for e in table.entries() if e.dest and command in e.option.commands] + [
        f.flag[2:].replace("-", "_") for f in FLAGS if command in f.commands
    ]


# config key -> option dest (a subcommand without the option leaves the key alone): the table's
OVERRIDES = {e.key: e.dest for e in table.entries() if e.dest is not None}
# Options that shape a workload: without one (--workload none, the default) they cannot apply.
WORKLOAD_ONLY = tuple(e.dest for e in table.entries() if e.dest and e.option.needs == "workload")


def overrides(a: argparse.Namespace) -> dict:
    """The options given, as the config keys they override (None: not given), each word given made
    its value (``Entry.given``: on/off, a rate)."""
    return {key: table.entry(key).given(getattr(a, dest, None)) for key, dest in OVERRIDES.items()}


def _open_loop(cfg):
    """A rate (or a fleet's master) given with no workload: the rig's own steady lane runs it."""
    w = cfg.workload
    if w.name == "none" and (w.rate is not None or w.master is not None):
        return dataclasses.replace(cfg, workload=dataclasses.replace(w, name="steady"))
    return cfg


def run_config(args):
    """The run's configuration (file, then options), or None when the run is skipped here (said
    in one line). An option that cannot apply is refused in one line, never ignored."""
    from rig.parent import config

    if getattr(args, "junit", None) is not None:  # before anything runs: a night never ends unable to write it
        from rig.parent import junit

        junit.check_path(args.junit)
    if getattr(args, "resume", None):
        kept = [
            option(d)
            for d in OVERRIDES.values()
            if d not in ("cycles", "results") and getattr(args, d, None) is not None
        ] + (["--config"] if args.config else [])
        if kept:
            raise RigError(
                f"a resumed run keeps the options it was started with; drop {', '.join(kept)} "
                "(only --cycles, to run more, and --results, where it is now, may be given)"
            )
    cfg = config.load(args.config, overrides(args), settle=None if args.command == "bench" else _open_loop)
    from rig.common import cpushare

    cpushare.hold(getattr(args, "cpus", None))  # before anything starts: all the run starts inherits it
    if cfg.workload.name == "none" and args.command != "bench":
        given = [option(d) for d in WORKLOAD_ONLY if getattr(args, d, None) is not None]
        if given:
            raise RigError(
                f"{', '.join(given)} shape(s) a workload, and none runs: add --workload "
                "steady (or a locustfile), or drop them"
            )
    refuse_inapplicable(args, cfg)
    if cfg.input_memory not in INPUT_MEMORY:
        raise RigError(f"input_memory must be one of {', '.join(INPUT_MEMORY)} (got {cfg.input_memory!r})")
    if cfg.model == "cupy" and not cfg.model_repository:
        from rig.parent.preflight import cupy_usable

        ok, why = cupy_usable()
        if not ok:
            print(
                f"rig: skipped: the cupy model needs a CUDA device and CuPy ({why}); nothing was run. "
                "Use --model numpy on this machine, or --skip-ok where a skip is a success."
            )
            return None
    if input_memory(cfg) == "gpu":
        from rig.parent.preflight import cupy_usable

        ok, why = cupy_usable()
        if not ok:
            print(
                f"rig: skipped: --input-memory gpu needs a CUDA device and CuPy ({why}); nothing was run. "
                "Use --input-memory cpu on this machine, or --skip-ok where a skip is a success."
            )
            return None
    return cfg


def input_memory(cfg) -> str:
    """Where the run's inputs live, ``cpu`` or ``gpu`` (``auto``: the cupy template's inputs on the
    GPU, where its execute uses them in place; every other model's on the host)."""
    if cfg.input_memory == "auto":
        return "gpu" if cfg.model == "cupy" and not cfg.model_repository else "cpu"
    return cfg.input_memory


def gpu_of(cfg) -> int:
    """The CUDA device of the run's GPU work: the input placement's (``gpu:N``), else the first."""
    kind, _, device = input_memory(cfg).partition(":")
    return int(device) if kind == "gpu" and device.isdigit() else 0


# Options that shape the rig's template model: with --model-repository they cannot apply.
TEMPLATE_ONLY = tuple(e.dest for e in table.entries() if e.dest and e.option.needs == "template")


def refuse_inapplicable(args, cfg) -> None:
    """Options given on the command line that this run could not apply: one line, never ignored."""

    def given(*dests):
        return [option(d) for d in dests if getattr(args, d, None) is not None]

    def refuse(options, why):
        if options:
            raise RigError(f"{', '.join(options)} {why}")

    if cfg.model_repository:
        refuse(
            given(*TEMPLATE_ONLY), "shape(s) the rig's template model, and --model-repository runs your own: drop them"
        )
    elif getattr(args, "queue_delay_us", None) is not None and not cfg.dynamic_batching:
        raise RigError(
            "--queue-delay-us is the dynamic batcher's delay: give --dynamic-batching and "
            "--max-batch-size N too, or drop it"
        )
    elif args.dynamic_batching and cfg.max_batch_size < 1:
        raise RigError(
            "--dynamic-batching batches requests up to --max-batch-size, which is 0: give "
            "--max-batch-size N (N >= 1) too, or drop it"
        )
    if args.command == "bench":
        if args.rates:
            refuse(given("workload", "in_flight"), "apply to closed-loop points (--concurrency), not to --rates")
            if args.compare:
                raise RigError(
                    "--compare perf-analyzer runs at closed-loop points here (its request-rate "
                    "mode is not checked against the rig's): use --concurrency"
                )
        else:
            refuse(given("arrivals", "seed"), "apply to open-loop points (--rates), not to --concurrency")
        if args.all_models:
            refuse(given("target_model"), "names one model, and --all-models spreads the load: drop one")
            if args.compare:
                raise RigError(
                    "--all-models spreads the load over every model, and perf_analyzer measures one: "
                    "drop --all-models to compare (the rig then loads the same model)"
                )
        return
    if cfg.cycles == 1 and not getattr(args, "resume", None):
        refuse(
            given("restart"),
            "says how the server restarts between cycles, and this run has one cycle: "
            "give --cycles N (N > 1) or drop it",
        )
    w = cfg.workload
    if w.name != "none":
        refuse(
            given("requests"),
            "counts the requests of a cycle without a workload; a workload runs for --workload-seconds: drop it",
        )
        refuse(
            given("requests_in_flight"),
            "sends the fixed count of a cycle without a workload; a workload "
            "keeps --users x --in-flight requests in flight: drop it",
        )
    if w.master is not None:
        refuse(
            given("users", "workload_seconds", "window_seconds", "locust_web_port", "rate"),
            "come(s) from the `rig fleet` master with --locust-master: give it to the master, or drop it",
        )
    if w.rate is not None:
        refuse(
            given("users", "in_flight", "locust_web_port"),
            "apply to Locust users (a closed loop); --rate runs one open-loop lane: drop one or the other",
        )
    elif w.name != "none":
        refuse(given("arrivals", "seed"), "apply to an open loop (--rate), not to Locust users: drop them")


class Parser(argparse.ArgumentParser):
    """A parser whose errors are one line (``RigError``), never usage and a traceback."""

    def error(self, message):
        raise RigError(f"{message} (see `{self.prog} --help`)")


def soak_parser() -> argparse.ArgumentParser:
    """The options of ``rig soak`` that a run's configuration is read from (``run_config``)."""
    p = Parser(prog="rig soak")
    add_run_options(p, "soak")
    p.set_defaults(command="soak")
    return p
