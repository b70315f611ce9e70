"""`rig cycle`: one lifecycle cycle (start, infer, retain, stop, verify, record), run as `rig soak`
runs its cycles (``rig.commands.soak.cycles``), recording and reporting every outcome."""

from __future__ import annotations

from rig.parent.options import add_run_options, run_config


def add_parser(sub) -> None:
    c = sub.add_parser("cycle", help="one lifecycle cycle: start, infer, retain, stop, verify, record")
    add_run_options(c, "cycle")
    c.set_defaults(func=run)


def run(args) -> int:
    """A single cycle is a reproducer: it records and reports every outcome; soaks judge."""
    from rig.commands.soak import cycles, skipped
    from rig.contract.verdicts import GROWTH_OUTCOMES, LOAD_OUTCOMES, OUTCOMES

    if args.allow_leaks is None and not args.config:
        args.allow_leaks = True  # a reproducer records leaks; a soak judges them
    cfg = run_config(args)
    if cfg is None:
        return skipped(args)
    return cycles(args, cfg, tuple(OUTCOMES) + tuple(LOAD_OUTCOMES) + tuple(GROWTH_OUTCOMES))
