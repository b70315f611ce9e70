"""A prepared `rig matrix` run and tabled (``run_and_table``): its cells numbered and run
(``rig.workflows.matrix_run.run_jobs``), each scenario cell whose cycles raced run for more
(``rig.workflows.matrix_races.extend``, --race-cycles), then its benches, alone; each scenario cell
judged by its stored verdicts, over all its runs, against the known ones
(``rig.analysis.matrix.judge_scenario``); the table printed,
with the cells left unjudged and the findings; --junit and --summary-json written; the exit status
(``rig.analysis.matrix.exit_status``)."""

from __future__ import annotations

import os
from pathlib import Path

from rig.workflows import matrix_races
from rig.workflows.matrix_run import run_jobs
from rig.workflows.matrix_setup import Prepared


def run_and_table(args, prepared: Prepared) -> int:
    """Run the cells (then the benches, alone), print the table (and write --junit): the exit status."""
    from rig.analysis import matrix

    jobs, bench_jobs, rows, timeout = prepared.jobs, prepared.bench_jobs, prepared.rows, prepared.timeout
    results, scens, shard = prepared.results, prepared.scens, prepared.shard
    total = len(jobs) + len(bench_jobs)
    for i, job in enumerate([*jobs, *bench_jobs], 1):
        job.label = f"[{i}/{total}] {job.label}"
        job.start_line = f"[{i}/{total}] {job.start_line}" if job.start_line else ""
    where = f"shard {shard[0]}/{shard[1]}: " if shard else ""
    print(
        f"{where}{len(jobs)} cell(s) to run{f', {args.jobs} side by side' if args.jobs > 1 else ''}"
        f"{f', {len(bench_jobs)} bench(es) after them, alone' if bench_jobs else ''}",
        flush=True,
    )
    logs = Path(results) / "logs" / f"matrix-{os.getpid()}" if "://" not in results else None
    judge = matrix.judge_scenario if scens is not None else (lambda row: row)
    cell_rows = run_jobs(jobs, args.jobs, timeout, results, logs, judge, matrix.status)
    if scens is not None and args.race_cycles:  # the races: more cycles (matrix_races)
        cell_rows = matrix_races.extend(
            jobs, cell_rows, args.race_cycles, args.jobs, timeout, prepared.cycles, results, logs, judge, matrix.status
        )
    rows += cell_rows
    bench_rows = run_jobs(bench_jobs, 1, timeout, results, None, lambda row: row, matrix.status)
    print()
    print(matrix.format_table(rows) if scens is None else matrix.format_scenarios(rows))
    say_unjudged_and_findings(rows)
    if bench_rows:
        print()
        print(matrix.format_bench(bench_rows))
    if args.junit:
        from rig.parent import junit

        junit.write(args.junit, [junit.matrix_suite(rows + bench_rows)])
        print(f"\njunit: {args.junit}")
    from rig.common.text import redact

    print(
        f"\nresults: {redact(results)} (compare them: rig report {redact(results)}"
        f"{f'; the grid: rig report --conformance {redact(results)}' if scens is not None else ''})"
    )
    status = matrix.exit_status(rows + bench_rows)
    if getattr(args, "summary_json", None):
        from rig.workflows import summary

        summary.write(args.summary_json, summary.matrix(status, rows + bench_rows, redact(results)))
        print(f"summary JSON: {args.summary_json}")
    return status


def say_unjudged_and_findings(rows: list[dict]) -> None:
    unjudged = [r for r in rows if r["status"] == "unjudged"]
    if unjudged:
        print(
            f"\n{len(unjudged)} cell(s) ran where nothing is known of their scenario's verdicts (that core, "
            "engine or shape was never reviewed): recorded, not judged (review them: rig report --conformance "
            "RESULTS; accept them: rig scenarios --accept RESULTS)"
        )
    findings = [r for r in rows if r["status"] == "finding"]
    for r in findings:
        print(
            f"FINDING: {r['scenario']}{' (control)' if r.get('control') else ''} [{r.get('shape')}] on Triton "
            f"{r.get('triton_version')} through {r.get('engine')}: {r.get('reason')}"
        )
