"""Command line: the parser, the one registry of the subcommands and ``main``. Each command is a module
of ``rig.commands`` (``add_parser(sub)`` and ``run(args)``); the processes the rig starts (``rig worker``,
``rig cell``) and `rig fleet`'s Locust master are named here, the one module that imports ``rig.worker``."""

from __future__ import annotations

import argparse
import sys
import typing

from rig.common.errors import Exit, RigError
from rig.parent.options import Parser

_Parser = Parser  # one line, not usage + traceback


EXIT_STATUSES = (
    f"exit status: {Exit.OK:d} ok; {Exit.FAILED:d} a threshold crossed or a gate failed (FAIL: lines "
    f"say why); {Exit.USAGE:d} bad input (one line); {Exit.SKIPPED:d} nothing was run (--skip-ok makes "
    f"it {Exit.OK:d}); {Exit.MACHINE:d} the machine failed the run; {Exit.INTERRUPTED:d} interrupted"
)
RUNS_TRITON = ("cycle", "soak", "bench", "matrix", "cell")  # SIGTERM ends them as Ctrl-C does


def _add_module(name: str):
    """A command whose parser and run live in ``rig.commands.<name>`` (``add_parser(sub)``)."""

    def add(sub) -> None:
        import importlib

        importlib.import_module(f"rig.commands.{name}").add_parser(sub)

    return add


def _add_fleet(sub) -> None:
    _add_module("fleet")(sub)
    sub.choices["fleet"].set_defaults(func=cmd_fleet)  # with the worker side's Locust master


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
        ("cycle", _add_module("cycle"), True),
        ("soak", _add_module("soak"), True),
        ("bench", _add_module("bench"), True),
        ("report", _add_module("report"), True),
        ("gate", _add_module("gate"), True),
        ("capacity", _add_module("capacity"), True),
        ("compact", _add_module("compact"), True),
        ("check", _add_module("check"), True),
        ("matrix", _add_module("matrix"), True),
        ("fleet", _add_fleet, True),
        ("scenarios", _add_module("scenarios"), True),
        ("runtime", _add_module("runtime"), True),
        ("bisect", _add_module("bisect"), True),
        ("repro", _add_module("repro"), True),
        ("doctor", _add_module("doctor"), True),
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
