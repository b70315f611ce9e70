"""What `rig gate` does once its options are checked (``rig.commands.gate``): both sides read from
the store (``rig.workflows.gate_sides``), printed side by side with their notes
(``rig.workflows.gate_lines``), judged (``rig.analysis.verdict.gate``, and the candidate's
conformance findings: ``conformance_reasons``), --junit (``junit_checks``) and --summary-json
written; the exit status."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from rig.common.errors import Exit, RigError
from rig.common.text import redact
from rig.workflows.gate_lines import idle_note, idle_regimes, mixed_notes, side_lines, table
from rig.workflows.gate_sides import load, read_table, select, side_streaming, side_windows, where


@dataclasses.dataclass
class Side:
    """One side of the gate: its label (``Triton 2.51.0``, ``run ...``), its cycles, its windows and
    its streaming figures (``side_streaming``; None where none streamed)."""

    label: str
    cycles: Any
    windows: Any
    streaming: Any


def run(args) -> int:
    """The gate over ``args`` (its options checked): both sides printed and judged, --junit and
    --summary-json written; ``Exit.FAILED`` where the candidate regressed, else ``Exit.OK``."""
    from rig.analysis import stats
    from rig.parent import junit

    started = (junit.now(), time.monotonic())
    stats.preload("scipy.stats")  # while the cycles are read
    store, a, b = read_sides(args)
    say_sides(args, store, a, b)
    reasons = judge(args, a, b)
    if args.junit is not None:
        write_junit(args, reasons, a, b, started)
    status = Exit.FAILED if reasons else Exit.OK
    summary_json = getattr(args, "summary_json", None)
    if summary_json:
        write_summary(summary_json, args, status, reasons, a, b)
    return status


def read_sides(args) -> tuple[Any, Side, Side]:
    """The store and both sides, the cycles kept by ``--where``; RigError where the two select the
    same runs."""
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
    return store, Side(la, ca, wa, sa), Side(lb, cb, wb, sb)


def say_sides(args, store, a: Side, b: Side) -> None:
    """Both sides' figures side by side, then the notes: a side that mixes configurations, sides
    measured under different CPU idle regimes, a first-response bound the candidate cannot meet."""
    print(
        table(
            side_lines("baseline: " + a.label, a.cycles, a.windows, store, a.streaming),
            side_lines("candidate: " + b.label, b.cycles, b.windows, store, b.streaming),
        )
    )
    for line in mixed_notes((("baseline", a.cycles), ("candidate", b.cycles))):
        print(line)
    runs = read_table(store, args.results, "runs", columns=["run_id", "cpu_idle"])
    note = idle_note(idle_regimes(runs, a.cycles), idle_regimes(runs, b.cycles))
    if note:
        print(note)
    if getattr(args, "max_first_response_p99_us", None) is not None and b.streaming is None:
        print(
            "note: --max-first-response-p99-us: the candidate has no streaming (decoupled) model's "
            "windows; the first response is not judged"
        )


def judge(args, a: Side, b: Side) -> list[str]:
    """The reasons the candidate fails the gate (``verdict.gate``, then its conformance findings),
    each printed as a FAIL line; PASS where there are none."""
    from rig.analysis import verdict

    reasons = verdict.gate(
        a.cycles,
        a.windows,
        b.cycles,
        b.windows,
        max_finalize_drop=args.max_finalize_drop,
        max_stop_regression=args.max_stop_regression,
        max_throughput_drop=args.max_throughput_drop,
        max_first_response_p99_us=getattr(args, "max_first_response_p99_us", None),
        candidate_streaming=b.streaming,
    )
    reasons += conformance_reasons(b.cycles)
    for r in reasons:
        print(f"FAIL: {r}")
    if not reasons:
        print("PASS: no significant regression beyond the thresholds")
    return reasons


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


def write_junit(args, reasons: list[str], a: Side, b: Side, started: tuple[str, float]) -> None:
    """--junit: the gate's checks as one suite, timed from ``started`` (a timestamp, a monotonic time)."""
    from rig.parent import junit

    suite = junit.suite(
        f"rig gate {args.baseline} -> {args.candidate}",
        junit_checks(reasons, a.cycles, a.windows, b.cycles, b.windows, args, b.streaming),
        time=time.monotonic() - started[1],
        timestamp=started[0],
        properties={
            "baseline": a.label,
            "candidate": b.label,
            "results": redact(args.results),
            "where": "; ".join(args.where) or None,
        },
    )
    junit.write(args.junit, [suite])
    print(f"JUnit XML: {args.junit}")


def write_summary(path: str, args, status: int, reasons: list[str], a: Side, b: Side) -> None:
    """--summary-json: the verdict, its reasons, both sides' runs and verdict counts, the exit status."""
    from rig.workflows import summary

    sides = {"baseline": summary.gate_side(a.label, a.cycles), "candidate": summary.gate_side(b.label, b.cycles)}
    summary.write(path, summary.gate(status, reasons, args.baseline, args.candidate, sides, redact(args.results)))
    print(f"summary JSON: {path}")
