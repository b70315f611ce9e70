"""`rig soak`: many cycles (the nightly job), with progress, summary and exit status. The run itself,
its tally and what it writes are ``rig.workflows.soak``'s; ``cycles`` here is shared with `rig cycle`."""

from __future__ import annotations

import functools

from rig.common import cpuidle
from rig.common.errors import Exit
from rig.parent.options import add_run_options, run_config

_log = functools.partial(print, flush=True)


def add_parser(sub) -> None:
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
    s.set_defaults(func=run)


def run(args) -> int:
    from rig.workflows import soak

    cfg = run_config(args)
    if cfg is None:
        return skipped(args)
    return cycles(args, cfg, soak.DEFAULT_ALLOWED)


def cycles(args, cfg, allowed: tuple[str, ...]) -> int:
    """Run `rig soak`'s or `rig cycle`'s cycles and print what was judged. ``allowed``: the outcomes
    that pass unless the run's config names others."""
    from rig.common.text import redact
    from rig.workflows import soak

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


def skipped(args) -> Exit:
    """A run whose model cannot run here: skipped, or ok with --skip-ok."""
    return Exit.OK if args.skip_ok else Exit.SKIPPED
