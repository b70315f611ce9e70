"""The version matrix's rows: one per cell (runtime x engine x retention policy), its figures read
back from the stored cycles, the summary table (Markdown) and the matrix's exit status.

A row is a plain dict: ``runtime``, ``triton_version``, ``engine``, ``retain``, ``status`` (one of
``STATUSES``), ``reason`` (why a cell did not pass, or was skipped), ``run_id`` and the figures of
``cell_figures`` (a soak's cell also the batch sizes Triton formed, ``batch_figures``); a scenario cell
also ``expected`` (the lifecycle's and the load's verdicts) and
``growth`` (the growth verdict it gives: ``rig.scenarios.catalog.Scenario.growth``, ``ok`` for a control).
Pure functions: no Triton, no store access.
"""

from __future__ import annotations

import re
import statistics

from rig.analysis.verdict import finalize_success, records
from rig.common.errors import Exit
from rig.common.text import md_cell
from rig.contract import server_stats
from rig.contract.verdicts import NOT_MEASURED
from rig.scenarios.known import admits, holds

# pass: the soak ran and held its thresholds; fail: it crossed one (exit 1); skipped: the cell
# cannot run here (a runtime without a stub for this Python, an engine that does not load over
# the core); error: the cell refused its input (exit 2); crashed / timeout: the soak process
# died or outlived its time; machine: the machine failed it (exit 4).
# unjudged: a scenario's cell ran, and nothing is known of its verdicts on that core and engine
# (recorded, not judged: it never fails the matrix).
# finding: a scenario's cell gave verdicts other than those known for its core, API and shape
# (rig.scenarios.known): the core behaves otherwise than it did when reviewed; it fails the matrix until
# someone reviews it (and accepts the new verdicts: rig scenarios --accept).
STATUSES = ("pass", "fail", "skipped", "error", "crashed", "timeout", "machine", "unjudged", "finding")

# What a retention policy is expected to do to stop(): a response or array kept across stop()
# holds its model, so stop() waits out exit_timeout (server#8755). The matrix allows it for
# those policies, so its status reflects surprises only; the table still shows every outcome.
EXPECTED_WITH_RETENTION = ("exit_timeout",)


def allowed_for(retain: str, base: tuple[str, ...]) -> tuple[str, ...]:
    """The outcomes a cell's soak passes with: ``base`` (the user's, default clean), plus
    exit_timeout where the policy keeps a reference across stop()."""
    extra = EXPECTED_WITH_RETENTION if retain != "none" else ()
    return tuple(dict.fromkeys((*base, *extra)))


def cell_figures(cycles) -> dict:
    """Figures of one cell from its stored cycles (a frame, dicts or ``CycleRow``s)."""
    rows = records(cycles)
    outcomes: dict[str, int] = {}
    loads: dict[str, int] = {}
    growths: dict[str, int] = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        if r.get("load_outcome"):
            loads[r["load_outcome"]] = loads.get(r["load_outcome"], 0) + 1
        if r.get("growth_outcome"):
            growths[r["growth_outcome"]] = growths.get(r["growth_outcome"], 0) + 1
    lat = sorted(float(r["stop_latency_s"]) for r in rows if r.get("stop_latency_s") is not None)
    versions = sorted({str(r["triton_version"]) for r in rows if r.get("triton_version")})
    cleanup: dict[str, int] = {}  # teardown after the stop was measured: a crash there is noted
    for r in rows:
        if r.get("cleanup") and r["cleanup"] != "ok":
            cleanup[r["cleanup"]] = cleanup.get(r["cleanup"], 0) + 1
    verdicts = [(r["outcome"], r.get("load_outcome")) for r in rows]
    return {
        "cycles": len(rows),
        "outcomes": outcomes,
        "load_outcomes": loads,
        "verdicts": verdicts,
        "growth_outcomes": growths,
        "growths": [r.get("growth_outcome") for r in rows],
        "finalize_before": sum(int(r.get("finalize_before_stop") or 0) for r in rows),
        "finalize_expected": sum(int(r.get("finalize_expected") or 0) for r in rows),
        "finalize_after": sum(int(r.get("finalize_after_stop") or 0) for r in rows),
        "finalize_success": finalize_success(rows),
        "stop_p50": statistics.median(lat) if lat else None,
        "stop_max": lat[-1] if lat else None,
        "triton_version": ", ".join(versions) or None,
        "cleanup": cleanup,
    }


def batch_figures(windows) -> dict:
    """The batch sizes Triton formed over a cell's windows (a frame or dicts with ``batch_sizes``):
    ``batches`` ({size: executions}, None where no window recorded them: a fixed count of requests
    stores no windows, ``--server-stats off`` or an older core none of them) and ``mean_batch``."""
    if hasattr(windows, "columns"):
        values = windows["batch_sizes"].tolist() if "batch_sizes" in windows.columns else []
    else:
        values = [w.get("batch_sizes") for w in windows]
    batches = server_stats.summed_batches(values)
    return {"batches": batches, "mean_batch": None if batches is None else server_stats.mean_batch(batches)}


def growth_held(got: str | None, want: str | None) -> bool:
    """Whether a cycle's growth verdict ``got`` holds against the one expected (``want``; None: ok):
    a cycle with none (stored before schema 11) or ``not_measured`` is not held against the cell;
    an intermittent cell's ``want`` names alternatives (rig.scenarios.known.admits)."""
    return got in (None, NOT_MEASURED) or admits(want or "ok", got)


def judge_scenario(row: dict) -> dict:
    """A scenario cell judged by its stored verdicts: ``as_expected`` (cycles that gave exactly
    the ``expected`` pair, lifecycle and load, and the ``growth`` verdict expected, ok where none
    is given: a cycle without one or whose growth was not measured holds) and its status: a cell
    whose soak passed yet a cycle gave other verdicts fails; one with nothing ``expected`` (None:
    not known for that core and engine) that ran is ``unjudged``. A cell that did not run keeps its
    status."""
    want, got = row.get("expected"), row.get("verdicts") or []
    growth = row.get("growth") or "ok"
    growths = list(row.get("growths") or [None] * len(got))
    growths += [None] * (len(got) - len(growths))
    row["as_expected"] = (
        None if want is None else sum(holds(v, want) and growth_held(g, growth) for v, g in zip(got, growths))
    )
    if row["status"] != "pass":
        return row
    if want is None:
        row.update(
            status="unjudged",
            reason=f"nothing known for Triton {row.get('triton_version') or '?'} "
            f"through {row.get('engine')} in shape {row.get('shape') or 'unbatched'}: verdicts recorded, "
            "not judged",
        )
    elif not got or row["as_expected"] < len(got):
        bad = []
        if any(not holds(v, want) for v in got):
            shown = ", ".join(f"{k} {v}" for k, v in sorted(_pairs(got).items()))
            bad.append(f"verdicts {shown}; expected {' / '.join(want)}")
        wrong = _counts([g for g in growths if not growth_held(g, growth)])
        if wrong:
            bad.append(f"growth {', '.join(f'{k} {v}' for k, v in sorted(wrong.items()))} (expected {growth})")
        row.update(status="finding" if got else "fail", reason="; ".join(bad) or "no cycle stored")
    return row


def _counts(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _pairs(verdicts) -> dict[str, int]:
    out: dict[str, int] = {}
    for o, load in verdicts:
        key = f"{o} / {load or '-'}"
        out[key] = out.get(key, 0) + 1
    return out


def bench_figures(windows) -> list[dict]:
    """A bench cell's points (the rig's own windows, not perf_analyzer's): per concurrency or
    rate, the medians over its last windows (``rig.analysis.sweeps.summarize``)."""
    from rig.analysis.sweeps import summarize

    rows = records(windows)
    rows = [r for r in rows if (r.get("tool") or "rig") == "rig"]
    points: dict[float, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r.get("cycle") or 0, r.get("window") or 0)):
        point = r.get("concurrency") if r.get("mode") != "open" else r.get("rate")
        points.setdefault(float(point or 0), []).append(r)
    return [{"point": p, **summarize(ws)} for p, ws in sorted(points.items())]


def _finalize(row: dict) -> str:
    if not row.get("finalize_expected"):
        return "-"
    fs = row["finalize_before"] / row["finalize_expected"]
    after = row.get("finalize_after") or 0
    text = f"{fs:.0%} ({row['finalize_before']}/{row['finalize_expected']})"
    return text + (f", {after} after" if after else "")


def _num(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _secs(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def status(row: dict, short: bool = False) -> str:
    """``status: reason``; ``short``: the reason's first clause, at most 200 characters."""
    status, reason = row["status"], md_cell(row.get("reason") or "")
    if short:  # the first clause, folders left out of paths
        reason = re.sub(r"(?<![\w.])/(?:[^\s/,:()]+/)+", "", reason.split("; ")[0])
        reason = reason if len(reason) <= 200 else reason[:197] + "..."
    return f"{status}: {reason}" if reason else status


def format_table(rows: list[dict]) -> str:
    """The matrix as a Markdown table (the same text on stdout and in the README)."""
    head = [
        "runtime",
        "Triton",
        "engine",
        "retain",
        "outcomes",
        "load",
        "growth",
        "batches",
        "finalize before stop",
        "stop p50 / max (s)",
        "status",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted((r.get("outcomes") or {}).items())) or "-"
        if r.get("cleanup"):
            outcomes += " (cleanup " + ", ".join(f"{k} in {v}" for k, v in sorted(r["cleanup"].items())) + ")"
        stop = "-" if r.get("stop_p50") is None else f"{_secs(r['stop_p50'])} / {_secs(r.get('stop_max'))}"
        loads = ", ".join(f"{k} {v}" for k, v in sorted((r.get("load_outcomes") or {}).items())) or "-"
        cells = [
            r["runtime"],
            r.get("triton_version") or "-",
            r.get("engine") or "-",
            r.get("retain") or "-",
            outcomes,
            loads,
            _tally(r.get("growth_outcomes")),
            _batches(r),
            _finalize(r),
            stop,
            status(r, short=True),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def _batches(row: dict) -> str:
    """The batch sizes Triton formed in the cell (``batch_figures``): ``1x45 8x1221 (mean 7.6)``."""
    return server_stats.batch_compact(row.get("batches"))


def _tally(counts: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted((counts or {}).items())) or "-"


def _as_expected(row: dict) -> str:
    if row["status"] == "skipped" or not row.get("cycles"):
        return "-"
    if row.get("expected") is None:
        return "not known for this core"
    n = row.get("as_expected") or 0
    return f"{'yes' if n == row['cycles'] else 'no'} ({n}/{row['cycles']})"


def format_scenarios(rows: list[dict]) -> str:
    """The scenario cells as a Markdown table: scenario (its control marked), runtime and Triton
    version, engine, the verdicts counted (lifecycle, load, growth), the batch sizes Triton formed,
    those expected there (the three), whether every cycle gave them."""
    head = [
        "scenario",
        "shape",
        "runtime",
        "Triton",
        "engine",
        "outcomes",
        "load",
        "growth",
        "batches",
        "expected",
        "as expected",
        "status",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted((r.get("outcomes") or {}).items())) or "-"
        loads = ", ".join(f"{k} {v}" for k, v in sorted((r.get("load_outcomes") or {}).items())) or "-"
        want = r.get("expected")
        expected = (
            "-" if r["status"] == "skipped" else " / ".join((*want, r.get("growth") or "ok")) if want else "not known"
        )  # unjudged
        name = r.get("scenario") or "-"
        cells = [
            name + (" (control)" if r.get("control") else ""),
            r.get("shape") or "-",
            r["runtime"],
            r.get("triton_version") or "-",
            r.get("engine") or "-",
            outcomes,
            loads,
            _tally(r.get("growth_outcomes")),
            _batches(r),
            expected,
            _as_expected(r),
            status(r, short=True),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def format_bench(rows: list[dict]) -> str:
    """Bench cells: one line per runtime and engine, its points side by side."""
    lines = ["| runtime | Triton | engine | points: infer/s (p99 us) | status |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        pts = (
            "; ".join(
                f"{p['point']:g}: {_num(p.get('throughput'))} ({_num(p.get('p99_us'))})" for p in r.get("points") or []
            )
            or "-"
        )
        lines.append(
            f"| {r['runtime']} | {r.get('triton_version') or '-'} | {r.get('engine') or '-'} | {pts} | "
            f"{status(r, short=True)} |"
        )
    return "\n".join(lines)


def exit_status(rows: list[dict]) -> int:
    """0: every cell that can run here ran and passed (skips are rows that say why); 1: a cell
    failed its thresholds, refused its input, crashed or timed out; 3: every cell was skipped
    (or there were none); 4: the machine failed a cell and nothing worse happened."""
    ran = [r for r in rows if r["status"] != "skipped"]
    if not ran:
        return Exit.SKIPPED
    if any(r["status"] in ("fail", "error", "crashed", "timeout", "finding") for r in ran):
        return Exit.FAILED
    if any(r["status"] == "machine" for r in ran):
        return Exit.MACHINE
    return Exit.OK
