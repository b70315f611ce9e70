"""`rig gate`: does a candidate (a Triton version or a run) regress from a baseline? Prints
both sides and the reasons; exit 0 pass, 1 regression, 2 bad input.

Each of a cycle's three verdicts is judged apart: a lifecycle outcome (but clean), a load outcome
(but ok) or a growth outcome (``leaking`` or ``slowing``: ``rig.contract.verdicts.GROWTH_OUTCOMES``) that
the candidate has and the baseline never had fails the gate (``rig.analysis.verdict.gate``); a
growth verdict ``not_measured``, or none (a cycle stored before schema 11), never fails it."""

from __future__ import annotations

import argparse
import time

from rig.common.errors import Exit, RigError
from rig.common.text import redact
from rig.workflows.gate_sides import MAX_MERGED, load, read_table, select, side_windows, where

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


def side_streaming(windows, store):
    """``frames.streaming`` of a side's windows (per point; first-response and gap histograms
    read from ``store`` for its streaming windows only), or None where none streamed."""
    from rig.analysis import frames

    if not len(windows) or "first_p50_us" not in windows or not windows["first_p50_us"].notna().any():
        return None
    return frames.streaming(windows, by=[], store=store, max_merged=MAX_MERGED)


def side_lines(label: str, cycles, windows, store=None, streaming=None) -> dict[str, str]:
    """The figures printed for one side, by row name. Latency percentiles come from the merged
    HDR histograms of each point's latest ``MAX_MERGED`` windows (read from ``store`` where
    ``windows`` lacks the histogram column); the line says so when that is not all of them."""
    import numpy as np

    from rig.analysis import frames

    out = {"": label, "runs": str(cycles["run_id"].nunique()), "cycles": str(len(cycles))}
    counts = cycles["outcome"].value_counts()
    out["outcomes"] = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    if "load_outcome" in cycles:
        loads = cycles["load_outcome"].dropna().value_counts()
        out["load"] = ", ".join(f"{k}={v}" for k, v in sorted(loads.items())) or "-"
    if "growth_outcome" in cycles:
        growth = cycles["growth_outcome"].dropna().value_counts()
        out["growth"] = ", ".join(f"{k}={v}" for k, v in sorted(growth.items())) or "-"
    ok, n = frames.finalize_counts(cycles)
    out["finalize"] = f"{ok}/{n} cycles ({ok / n:.0%})" if n else "-"
    lat = cycles["stop_latency_s"].dropna().to_numpy(dtype=float)
    if lat.size:
        out["stop p50/p95"] = f"{np.percentile(lat, 50):.3f} / {np.percentile(lat, 95):.3f} s"
    if len(windows):
        if "histogram" not in windows and store is not None:
            windows = frames.attach_histograms(store, windows, ["tool", *frames.POINT], 2 * MAX_MERGED)
        perf = frames.performance(windows, by=[], max_merged=MAX_MERGED)
        for r in perf.itertuples():
            name = f"{r.point}" + ("" if r.tool == "rig" else f" ({r.tool})")
            p99 = f", p99 {r.p99_us:,.0f} us" if r.p99_us is not None and r.p99_us == r.p99_us else ""
            if p99 and r.merged < r.windows:
                p99 += f" (HDR of the latest {r.merged:,} of {r.windows:,} windows)"
            out[name] = f"{r.throughput:,.0f} infer/s{p99}"
    for r in streaming.itertuples() if streaming is not None else ():
        name = f"first response @ {r.point}" + ("" if r.tool == "rig" else f" ({r.tool})")
        per = (
            "-"
            if r.responses_per_request is None or r.responses_per_request != r.responses_per_request
            else f"{r.responses_per_request:.2f}"
        )
        out[name] = f"p50 {r.first_p50_us:,.0f} / p99 {r.first_p99_us:,.0f} us, {per} responses/request"
    return out


def table(a: dict[str, str], b: dict[str, str]) -> str:
    names = list(dict.fromkeys([*a, *b]))
    w0 = max(len(n) for n in names)
    w1 = max(len(a.get(n, "-")) for n in names)
    return "\n".join(f"{n:<{w0}}  {a.get(n, '-'):<{w1}}  {b.get(n, '-')}".rstrip() for n in names)


def idle_regimes(runs, cycles) -> set[str]:
    """How the side's runs (of the ``runs`` frame) left the CPUs to idle (``runs.cpu_idle``;
    unset: ``os``, as every soak and every bench before the column ran)."""
    runs = runs[runs["run_id"].isin(set(cycles["run_id"]))]
    if "cpu_idle" not in runs:
        return {"os"} if len(runs) else set()
    return {"os" if v is None or v != v else str(v) for v in runs["cpu_idle"]}


def idle_note(a: set[str], b: set[str]) -> str:
    """A line when the sides measured under different CPU idle regimes (``rig bench --cpu-idle``)."""
    if not a or not b or a == b:
        return ""
    return (
        f"note: the baseline ran with cpu_idle={','.join(sorted(a))} and the candidate with "
        f"cpu_idle={','.join(sorted(b))}: held CPUs change throughput and latency by tens of per cent "
        'on some machines (README, "CPU idle states"), so those figures do not compare'
    )


def conformance_reasons(candidate) -> list[str]:
    """The candidate's scenario cells whose verdicts differ from those known for their scenario,
    shape, engine and core (``rig.scenarios.known``): findings, each a reason the gate fails on."""
    from rig.analysis.conformance.findings import findings

    if "scenario" not in candidate or not candidate["scenario"].notna().any():
        return []
    return [f"conformance: {f['reason']}" for f in findings(candidate)]


def junit_checks(reasons: list[str], ca, wa, cb, wb, args, streaming) -> list:
    """The gate's checks as JUnit test cases (``rig.parent.junit``, ``GATE_CHECKS``): each failed with
    the reasons ``verdict.gate`` gave, skipped where a side has nothing it reads, with its threshold
    as its output."""
    from rig.analysis import frames, verdict
    from rig.parent import junit
    from rig.scenarios import catalog as scenarios

    not_judged = {}
    for key, name in (("load_outcome", "new load outcomes"), ("growth_outcome", "new growth outcomes")):
        if key not in cb or not cb[key].notna().any():
            not_judged[name] = "the candidate's cycles have no such verdict (stored before it was recorded)"
    if not frames.finalize_counts(ca)[1] or not frames.finalize_counts(cb)[1]:
        not_judged["finalize success"] = "a side has no cycle that expected a finalize"
    if not ca["stop_latency_s"].notna().any() or not cb["stop_latency_s"].notna().any():
        not_judged["stop latency p95"] = "a side has no stop latency"
    if not len(wa) or not len(wb):
        not_judged["throughput"] = "a side has no measurement windows"
    if "scenario" not in cb or not cb["scenario"].isin(list(scenarios.SCENARIOS)).any():
        not_judged["conformance"] = "the candidate ran no lifecycle scenario"
    bound = args.max_first_response_p99_us
    if bound is None:
        not_judged["first response p99"] = "no --max-first-response-p99-us given"
    elif streaming is None:
        not_judged["first response p99"] = "the candidate has no streaming (decoupled) model's windows"
    new = "fails on a verdict the candidate has and the baseline never had"
    figures = {
        "new lifecycle outcomes": new + " (but clean)",
        "new load outcomes": new + " (but ok)",
        "new growth outcomes": new + " (leaking, slowing)",
        "finalize success": f"fails on a drop above {args.max_finalize_drop:g} (absolute), when significant",
        "stop latency p95": f"fails on a ratio above {args.max_stop_regression:g} (candidate/baseline), "
        "when significant",
        "throughput": f"fails on a drop above {args.max_throughput_drop:.0%} (at least "
        f"{verdict.ONE_RUN_DROP:.0%} where a side holds one run) at a point both sides "
        "measured, when significant",
        "first response p99": "not bounded" if bound is None else f"fails above {bound:,.0f} us at a point",
        "conformance": (
            "fails on a scenario cell whose verdicts differ from the known ones (rig/scenarios/known_verdicts.csv)"
        ),
    }
    return junit.judged(reasons, junit.GATE_CHECKS, "gate", not_judged, figures)


def run(args) -> int:
    from rig.analysis import stats, verdict
    from rig.parent import junit

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
    from rig.workflows import summary

    summary_json = getattr(args, "summary_json", None)
    summary.check_path(summary_json)
    started = (junit.now(), time.monotonic())
    stats.preload("scipy.stats")  # while the cycles are read
    from rig.store import where as wh

    store, cycles = load(args.results, wh.keys(args.where), (args.baseline, args.candidate))
    cycles = where(cycles, args.where)
    la, ca, va = select(cycles, args.baseline, "baseline", bool(args.where))
    lb, cb, vb = select(cycles, args.candidate, "candidate", bool(args.where))
    if set(ca["run_id"]) == set(cb["run_id"]):
        raise RigError(
            f"--baseline {args.baseline} and --candidate {args.candidate} select the same "
            "runs: compare two different sides"
        )
    wa = side_windows(store, args.results, ca, va, bool(args.where))
    wb = side_windows(store, args.results, cb, vb, bool(args.where))
    sa, sb = side_streaming(wa, store), side_streaming(wb, store)
    print(table(side_lines("baseline: " + la, ca, wa, store, sa), side_lines("candidate: " + lb, cb, wb, store, sb)))
    for label, c in (("baseline", ca), ("candidate", cb)):
        mixed = [
            f"{k}={','.join(sorted(map(str, c[k].dropna().unique())))}"
            for k in ("engine", "model", "retain", "stop_strategy", "restart")
            if c[k].nunique() > 1
        ]
        if mixed:
            print(f"note: the {label} mixes {'; '.join(mixed)} (pin one with --where)")
    runs = read_table(store, args.results, "runs", columns=["run_id", "cpu_idle"])
    note = idle_note(idle_regimes(runs, ca), idle_regimes(runs, cb))
    if note:
        print(note)
    if bound is not None and sb is None:
        print(
            "note: --max-first-response-p99-us: the candidate has no streaming (decoupled) model's "
            "windows; the first response is not judged"
        )
    reasons = verdict.gate(
        ca,
        wa,
        cb,
        wb,
        max_finalize_drop=args.max_finalize_drop,
        max_stop_regression=args.max_stop_regression,
        max_throughput_drop=args.max_throughput_drop,
        max_first_response_p99_us=bound,
        candidate_streaming=sb,
    )
    reasons += conformance_reasons(cb)
    for r in reasons:
        print(f"FAIL: {r}")
    if not reasons:
        print("PASS: no significant regression beyond the thresholds")
    if args.junit is not None:
        suite = junit.suite(
            f"rig gate {args.baseline} -> {args.candidate}",
            junit_checks(reasons, ca, wa, cb, wb, args, sb),
            time=time.monotonic() - started[1],
            timestamp=started[0],
            properties={
                "baseline": la,
                "candidate": lb,
                "results": redact(args.results),
                "where": "; ".join(args.where) or None,
            },
        )
        junit.write(args.junit, [suite])
        print(f"JUnit XML: {args.junit}")
    status = Exit.FAILED if reasons else Exit.OK
    if summary_json:
        sides = {"baseline": summary.gate_side(la, ca), "candidate": summary.gate_side(lb, cb)}
        summary.write(
            summary_json, summary.gate(status, reasons, args.baseline, args.candidate, sides, redact(args.results))
        )
        print(f"summary JSON: {summary_json}")
    return status
