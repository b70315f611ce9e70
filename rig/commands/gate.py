"""`rig gate`: does a candidate (a Triton version or a run) regress from a baseline? Prints
both sides and the reasons; exit 0 pass, 1 regression, 2 bad input.

Each of a cycle's three verdicts is judged apart: a lifecycle outcome (but clean), a load outcome
(but ok) or a growth outcome (``leaking`` or ``slowing``: ``rig.contract.verdicts.GROWTH_OUTCOMES``) that
the candidate has and the baseline never had fails the gate (``rig.analysis.verdict.gate``); a
growth verdict ``not_measured``, or none (a cycle stored before schema 11), never fails it.

Its options are checked here; its work is ``rig.workflows.gate.run``."""

from __future__ import annotations

import argparse

from rig.common.errors import RigError

DESCRIPTION = """\
Compare a candidate with a baseline from one results folder. A and B are each a Triton
version (the triton_version partition, e.g. 2.51.0) or a run id (exact, or a unique prefix).

A regression fails the gate only when it exceeds its threshold AND is significant (p <= 0.05,
one-sided), so noise between runs of one configuration rarely fails it:
  finalize success  drop > --max-finalize-drop (default 0.05, absolute), Fisher's exact test
                    over cycles (or Wilson intervals apart)
  stop latency      p95 ratio > --max-stop-regression (default 1.5), Mann-Whitney U over cycles
  throughput        drop > --max-throughput-drop (default 0.10, relative) at a point both sides
                    measured, Mann-Whitney U over cycles' medians (runs' where a side has over
                    1,000 cycles; windows where it has under 3; warm-up windows left out)
  outcomes          any outcome but clean the candidate has and the baseline never had, each
                    verdict apart: the lifecycle's, the load's (but ok), the growth's (leaking,
                    slowing: a process's memory grew per 1,000 requests, or the load slowed)
  first response    with --max-first-response-p99-us N: a streaming (decoupled) model's time to
                    its first response, p99 of the candidate's merged HDR histograms at a point,
                    above N microseconds (a bound of the candidate alone; a candidate with no
                    streaming windows is not judged, and a line says so)
--junit FILE also writes each check as a JUnit XML test case, for CI; --summary-json FILE the
verdict, its reasons, both sides' runs and verdict counts and the exit status, as JSON.
Exit status: 0 pass, 1 regression, 2 bad input."""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "gate",
        help="fail when a candidate version or run regresses from a baseline",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", metavar="RESULTS", help="the results folder (as given to --results)")
    p.add_argument("--baseline", "-a", required=True, metavar="A", help="Triton version or run id")
    p.add_argument("--candidate", "-b", required=True, metavar="B", help="Triton version or run id")
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep only cycles whose column KEY equals VALUE (e.g. retain=none); repeatable",
    )
    p.add_argument(
        "--max-finalize-drop",
        type=float,
        default=0.05,
        metavar="F",
        help="largest allowed drop of finalize success, absolute (default 0.05)",
    )
    p.add_argument(
        "--max-stop-regression",
        type=float,
        default=1.5,
        metavar="X",
        help="largest allowed ratio of stop latency p95, candidate/baseline (default 1.5)",
    )
    p.add_argument(
        "--max-throughput-drop",
        type=float,
        default=0.10,
        metavar="P",
        help="largest allowed relative throughput drop at a point (default 0.10)",
    )
    p.add_argument(
        "--max-first-response-p99-us",
        type=float,
        default=None,
        metavar="N",
        help="streaming (decoupled) models: fail where the candidate's time to the first "
        "response, p99 at a point, exceeds N microseconds (default: not judged)",
    )
    p.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the gate's checks as JUnit XML for CI (a test case per check, the reason as "
        "its failure); its folder must exist (checked before anything is read)",
    )
    p.add_argument(
        "--summary-json",
        metavar="FILE",
        help="also write the gate's verdict as JSON: pass or fail, the reasons, each side's run ids and "
        "verdict counts, the exit status (written whole or not at all); its folder must exist",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rig.parent import junit
    from rig.workflows import gate, summary

    if args.baseline == args.candidate:
        raise RigError(f"--baseline and --candidate are both {args.baseline}: compare two different sides")
    for name in ("max_finalize_drop", "max_throughput_drop"):
        if not 0 <= getattr(args, name) <= 1:
            raise RigError(f"--{name.replace('_', '-')} is a fraction between 0 and 1")
    if args.max_stop_regression < 1:
        raise RigError("--max-stop-regression is a ratio of at least 1 (1.5: 50 % slower)")
    bound = getattr(args, "max_first_response_p99_us", None)
    if bound is not None and not bound > 0:
        raise RigError("--max-first-response-p99-us is a time in microseconds, above 0")
    if args.junit is not None:  # before anything is read
        junit.check_path(args.junit)
    summary.check_path(getattr(args, "summary_json", None))
    return gate.run(args)
