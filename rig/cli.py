"""Command line: ``rig cycle | soak | bench | runtime | doctor | worker`` here; the commands over
stored results (report, gate, capacity, compact, check) in ``rig.commands``."""

from __future__ import annotations

import argparse
import sys
import typing

from rig.common import cpuidle
from rig.common.errors import Exit, RigError
from rig.contract.cell import BenchSettings
from rig.contract.option_table import LIFECYCLE, WHAT_RUNS
from rig.parent.options import Parser, add_option, add_run_options, run_config

_Parser = Parser  # one line, not usage + traceback


def _bench_options(p: argparse.ArgumentParser) -> None:
    """Bench runs each point in a fresh worker for --windows windows; it has no cycles,
    retention, restart mode or thresholds, and its points replace --users and --rate."""
    add_run_options(
        p,
        "bench",
        groups=(WHAT_RUNS, LIFECYCLE),
        titles={LIFECYCLE: "server"},
        changed={  # a list here: each count is a sweep of its own
            "instances": dict(
                type=str, help="model instances, or counts to sweep: 1,2,4 (a fresh server each; default 1)"
            )
        },
    )
    b = p.add_argument_group("sweep")
    b.add_argument(
        "--concurrency", help="closed loop points (requests in flight), e.g. 1,2,4,8 (default 1,2,4,8 when no --rates)"
    )
    b.add_argument("--rates", "--rate", dest="rates", help="open loop points (infer/s), e.g. 1000,2000,4000")
    add_option(
        b,
        "workload.name",
        help="closed loop: steady (default) or a locustfile whose users "
        "have no tasks of their own and no LoadTestShape (a point holds its concurrency: "
        "ramp, step and spike are refused)",
    )
    add_option(b, "workload.in_flight", help="requests in flight per user (default 1)")
    add_option(b, "workload.arrivals")
    add_option(b, "workload.seed")
    b.add_argument("--windows", type=int, default=BenchSettings.windows, help="windows per point (default 3)")
    add_option(
        b,
        "workload.window_seconds",
        help="seconds per window (default 5, perf_analyzer's measurement interval, unless the "
        "config file sets workload.window_seconds)",
    )
    b.add_argument(
        "--p99-bound-ms", type=float, help="stop the sweep once p99 exceeds this (judged in its first round)"
    )
    b.add_argument("--compare", choices=COMPARE_WITH, help="also run perf_analyzer at the same points")
    b.add_argument(
        "--repeats",
        type=int,
        default=BenchSettings.repeats,
        help="measurements per point (default 3), taken in rounds: each round sweeps every point once, so a "
        "point's repeats are a sweep apart in time and rig capacity's intervals cover the drift between them; "
        "with --compare, the rig and perf_analyzer alternate in order; the table gives medians over repeats",
    )
    b.add_argument(
        "--cpu-idle",
        choices=cpuidle.MODES,
        default=BenchSettings.cpu_idle,
        help="hold (default): keep the CPUs out of idle while measuring, for every tool, so that "
        "wake-up costs do not decide the figures; os: leave idle to the kernel",
    )
    b.add_argument(
        "--neighbour",
        default=BenchSettings.neighbour,
        metavar="none|burn:PCT",
        help="what shares the node's CPUs for the whole sweep: none (default), or burn:PCT, a burner process "
        "pinned to each of its CPUs (--cpus) busy PCT %% (1-100) of every 10 ms; the run's row records it",
    )
    b.add_argument(
        "--target-model",
        help="the model the load goes to (default the repository's first, the one perf_analyzer measures)",
    )
    b.add_argument(
        "--all-models",
        action="store_true",
        default=None,
        help="spread the closed loop over every model of the repository (not with --compare)",
    )


EXIT_STATUSES = (
    f"exit status: {Exit.OK:d} ok; {Exit.FAILED:d} a threshold crossed or a gate failed (FAIL: lines "
    f"say why); {Exit.USAGE:d} bad input (one line); {Exit.SKIPPED:d} nothing was run (--skip-ok makes "
    f"it {Exit.OK:d}); {Exit.MACHINE:d} the machine failed the run; {Exit.INTERRUPTED:d} interrupted"
)
COMPARE_WITH = ("perf-analyzer",)
RUNS_TRITON = ("cycle", "soak", "bench", "matrix", "cell")  # SIGTERM ends them as Ctrl-C does


def _add_cycle(sub) -> argparse.ArgumentParser:
    c = sub.add_parser("cycle", help="one lifecycle cycle: start, infer, retain, stop, verify, record")
    add_run_options(c, "cycle")
    c.set_defaults(func=cmd_cycle)
    return c


def _add_soak(sub) -> argparse.ArgumentParser:
    s = sub.add_parser("soak", help="many cycles (the nightly job), with progress, summary and exit status")
    add_run_options(
        s, "soak", changed={"cycles": dict(help="cycles to run (default 1; the nightly config runs hundreds)")}
    )
    s.add_argument("--resume", metavar="RUN_ID", help="continue a killed run (same run id, each cycle once)")
    s.add_argument(
        "--cpu-idle",
        choices=cpuidle.MODES,
        help="hold: keep the CPUs out of idle for the whole run, as rig bench does by default, so that a "
        "fleet's node can be checked like for like against a sweep that held them (rig capacity --check); "
        "os: leave idle to the kernel (what a soak does without it); the run's row records it",
    )
    s.add_argument(
        "--summary-json",
        metavar="FILE",
        help="also write the run's summary as JSON once its exit status is known (run id, outcome "
        "counts per verdict, the reasons it failed, the exit status; written whole or not at all); its "
        "folder must exist",
    )
    s.set_defaults(func=cmd_soak)
    return s


def _add_bench(sub) -> argparse.ArgumentParser:
    b = sub.add_parser("bench", help="sweep concurrency or arrival rate; store every window")
    _bench_options(b)
    b.set_defaults(func=cmd_bench)
    return b


def _add_module(name: str):
    """A command whose parser and run live in ``rig.commands.<name>`` (``add_parser(sub)``)."""

    def add(sub) -> None:
        import importlib

        importlib.import_module(f"rig.commands.{name}").add_parser(sub)

    return add


def _add_fleet(sub) -> None:
    _add_module("fleet")(sub)
    sub.choices["fleet"].set_defaults(func=cmd_fleet)  # with the worker side's Locust master


def _add_runtime(sub) -> None:
    from rig.commands import runtime as runtime_command

    runtime_command.add_parser(sub, parser_class=_Parser)


def _add_repro(sub) -> None:
    from rig.commands import repro as repro_command

    repro_command.add_parser(sub, parser_class=_Parser)


def _add_doctor(sub) -> None:
    d = sub.add_parser("doctor", help="which runtimes, engines, GPUs and CuPy are usable here, and why not")
    d.set_defaults(func=cmd_doctor)


def _add_internal(name: str, func):
    """``rig worker`` (hosts Triton for the parent) and ``rig cell`` (one cell of `rig matrix`,
    rig.commands.cell): processes the rig starts, listed nowhere."""

    def add(sub) -> None:
        p = sub.add_parser(name)
        p.add_argument("--spec", required=True)
        p.add_argument("--result-fd", type=int, default=-1)
        p.set_defaults(func=func)

    return add


def registry() -> tuple[tuple[str, typing.Callable, bool], ...]:
    """Every subcommand, in the order `rig --help` lists them: (name, how it is added, listed). The
    one registry: a command is added here, and nowhere else."""
    return (
        ("cycle", _add_cycle, True),
        ("soak", _add_soak, True),
        ("bench", _add_bench, True),
        ("report", _add_module("report"), True),
        ("gate", _add_module("gate"), True),
        ("capacity", _add_module("capacity"), True),
        ("compact", _add_module("compact"), True),
        ("check", _add_module("check"), True),
        ("matrix", _add_module("matrix"), True),
        ("fleet", _add_fleet, True),
        ("scenarios", _add_module("scenarios"), True),
        ("runtime", _add_runtime, True),
        ("bisect", _add_module("bisect"), True),
        ("repro", _add_repro, True),
        ("doctor", _add_doctor, True),
        ("worker", _add_internal("worker", cmd_worker), False),
        ("cell", _add_internal("cell", cmd_cell), False),
    )


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="rig",
        description="Benchmark and soak-test Triton's in-process API: "
        "start, load, infer, stop, verify; again and again.",
        epilog=EXIT_STATUSES,
    )
    p.add_argument("--version", dest="show_version", action="store_true", help="print the rig's version")
    commands = registry()
    listed = [name for name, _, shown in commands if shown]
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="{" + ",".join(listed) + "}")
    for _name, add, _shown in commands:
        add(sub)
    sub._choices_actions = [a for a in sub._choices_actions if a.dest in listed]
    return p


# ---------------------------------------------------------------- subcommands


def _cycles(args, cfg, allowed: tuple[str, ...]) -> int:
    """``allowed``: the outcomes that pass unless the run's config names others."""
    from rig.commands import soak
    from rig.common.text import redact

    resume = getattr(args, "resume", None)
    idle = getattr(args, "cpu_idle", None)
    with cpuidle.Hold(idle or "os") as hold:  # released, its pollers reaped, however the run ends
        if idle:
            _log(f"cpu idle: {cpuidle.describe(hold, 'for the whole run')}")
        status, tally, run_id, reasons = soak.execute(
            cfg,
            args.command,
            resume=soak.Resume(resume, cycles_given=args.cycles is not None) if resume else None,
            allowed=allowed,
            log=_log,
            outputs=soak.Outputs(junit=args.junit, summary_json=getattr(args, "summary_json", None)),
            cpu_idle=hold.method if idle else None,
        )
    if args.command == "soak" or len(tally.rows) > 1:
        print(soak.summary_table(tally))
    for reason in reasons:
        print(f"FAIL: {reason}")
    from rig.contract.verdicts import explain

    for line in explain(reasons):  # what each verdict failed on means
        print(f"  {line}")
    print(f"results: {redact(str(cfg.results))}/cycles (run_id {run_id})")
    return status


def cmd_cycle(args) -> int:
    """A single cycle is a reproducer: it records and reports every outcome; soaks judge."""
    from rig.contract.verdicts import GROWTH_OUTCOMES, LOAD_OUTCOMES, OUTCOMES

    if args.allow_leaks is None and not args.config:
        args.allow_leaks = True  # a reproducer records leaks; a soak judges them
    cfg = run_config(args)
    if cfg is None:
        return _skipped(args)
    return _cycles(args, cfg, tuple(OUTCOMES) + tuple(LOAD_OUTCOMES) + tuple(GROWTH_OUTCOMES))


def cmd_soak(args) -> int:
    from rig.commands import soak

    cfg = run_config(args)
    if cfg is None:
        return _skipped(args)
    return _cycles(args, cfg, soak.DEFAULT_ALLOWED)


def cmd_bench(args) -> int:
    from rig.commands import bench

    counts = bench.instance_counts(args.instances)
    args.instances = counts[0] if counts else None
    cfg = run_config(args)
    if cfg is None:
        return _skipped(args)
    settings = BenchSettings(
        concurrency=args.concurrency,
        rates=args.rates,
        windows=args.windows,
        window_seconds=args.window_seconds,
        repeats=args.repeats,
        p99_bound_ms=args.p99_bound_ms,
        compare=args.compare,
        cpu_idle=args.cpu_idle,
        neighbour=args.neighbour,
        target_model=args.target_model,
        all_models=args.all_models,
        instances=tuple(counts),
        config_file=args.config,
    )
    return bench.run(cfg, settings, log=_log)


def _skipped(args) -> Exit:
    return Exit.OK if args.skip_ok else Exit.SKIPPED


def cmd_doctor(args) -> int:
    from rig.commands import doctor

    print(doctor.report())
    return Exit.OK


def cmd_worker(args) -> int:
    from rig.worker import main as worker

    return worker.main(args.spec, args.result_fd)


def cmd_fleet(args) -> int:
    from rig.commands import fleet
    from rig.worker.load.master import Master  # Locust's master: the worker's side, which only the entry point names

    return fleet.run(args, Master)


def cmd_cell(args) -> int:
    from rig.commands import cell

    return cell.main(args.spec, args.result_fd, log=_log)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.show_version:
            import rig

            print(rig.__version__)
            return Exit.OK
        if args.command is None:
            parser.print_help()
            return Exit.USAGE
        if args.command in RUNS_TRITON:
            _terminate_like_interrupt()
        return args.func(args)
    except RigError as e:
        print(f"rig: error: {e}", file=sys.stderr)
        return Exit.USAGE
    except ImportError as e:  # a dependency that does not import here (e.g. pyarrow vs numpy 1)
        first = (str(e).strip().splitlines() or [type(e).__name__])[-1]
        if (getattr(e, "name", None) or "").split(".")[0] == "rig":
            print(
                f"rig: error: this installation of the rig is incomplete ({first}); reinstall it "
                "from its checkout: pip install -e .",
                file=sys.stderr,
            )
        else:
            print(
                f"rig: error: a dependency does not import ({first}); `rig doctor` names the conflict", file=sys.stderr
            )
        return Exit.USAGE
    except KeyboardInterrupt:
        print("rig: interrupted; the cycles stored so far stay", file=sys.stderr)
        return Exit.INTERRUPTED
    except OSError as e:  # the machine failed the run: a full disk, a folder gone, ...
        where = f" ({e.filename})" if e.filename else ""
        print(
            f"rig: error: {e.strerror or e}{where}; the cycles stored before it stay (free space or "
            "choose another --results, then resume)",
            file=sys.stderr,
        )
        return Exit.MACHINE


def _terminate_like_interrupt() -> None:
    """A nightly job's timeout sends SIGTERM: kill the worker group and keep what is stored."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _log(msg: str) -> None:
    print(msg, flush=True)
