"""perf_analyzer's side of a `rig bench` sweep: the inputs it is given (the rig's own data), one run
of it at a point stored as the rig's windows are, and its server-side split read from its summary.
"""

from __future__ import annotations

import dataclasses
import platform

from rig.analysis.sweeps import measured, stable, summarize
from rig.common.errors import RigError
from rig.contract import server_stats
from rig.contract.rows import window_row
from rig.parent.config import RunConfig
from rig.workflows.bench_point import Point

# perf_analyzer's -s: its stability rule loosened so that it measures its 3 windows and stops, as
# the rig records the rule per window (``stable``) rather than enforcing it; at its default (10)
# a noisy machine fails most short points after 10 windows, and picks calm stretches for the rest.
PA_STABILITY_PCT = 100


def pa_input_options(p) -> dict:
    """perf_analyzer's ``input_data`` and ``shapes`` for the data the rig sends (``p.inputs``,
    from ``preflight.check_inputs``). Where the rig checked its entries before the run, they go
    over as a file in perf_analyzer's format, written into the run's work folder (every shape
    explicit, every value as raw bytes), so both tools send the same bytes: zero and random too
    (perf_analyzer's zero sends random strings to a BYTES input, and its random its own values).
    Otherwise the user's choice as given: zero, random or the file, with ``--shape``."""
    import json

    from rig.contract import perf_inputs

    info = p.inputs or {}
    model = p.models[0]
    metas, entries = info.get("metas"), info.get("entries")
    if metas and entries and model in entries:
        path = p.work_dir / "perf_analyzer-input.json"
        path.write_text(json.dumps(perf_inputs.perf_analyzer_file(metas[model], entries[model])))
        return {"input_data": str(path)}
    if p.config.input_data == "random" and not info.get("shapes"):
        return {}  # the default of both tools: perf_analyzer's command as it always was
    return {"input_data": p.config.input_data, "shapes": dict(info.get("shapes") or {})}


def pa_once(pa, p, cfg: RunConfig, repo, at: Point, inputs: dict | None = None) -> dict:
    """perf_analyzer at one point, with the rig's inputs (``pa_input_options``); its windows
    stored as ``tool = perf_analyzer`` rows."""
    cycle, point, closed, n = at.cycle, at.load, at.closed, at.instances
    try:
        kw = {"concurrency": [int(point)]} if closed else {"rate": [point]}
        got = pa.run_perf_analyzer(
            p.runtime,
            str(repo),
            p.models[0],
            stability_pct=PA_STABILITY_PCT,
            measurement_ms=int(cfg.workload.window_seconds * 1000),
            **(inputs or {}),
            **kw,
        )[0]
    except RigError as e:
        return {"throughput": None, "note": f"perf_analyzer failed: {e}"}
    windows = got.get("windows") or []
    if not windows:
        return {"throughput": None, "note": "perf_analyzer left no profile export (its windows): not stored"}
    tags = {
        "cycle": cycle,
        "tool": "perf_analyzer",
        "mode": "closed" if closed else "open",
        "concurrency": int(point) if closed else None,
        "rate": None if closed else float(point),
        "instances": n,
        "host": p.config.node or platform.node(),
    }
    server = pa_server_columns(got.get("server"), windows)
    rows = [
        window_row(p.run_id, p.engine, p.model_label, {**w, **tags, **server[i], "stable": stable(windows[: i + 1])})
        for i, w in enumerate(windows)
    ]
    p.store.write("windows", rows, p.runtime.triton_version, f"pa-c{cycle:06d}")
    ws = [dataclasses.asdict(r) for r in rows]
    return {**summarize(ws), "server": server_stats.over_windows(measured(ws))}


def pa_server_columns(summary: dict | None, windows: list[dict]) -> list[dict]:
    """perf_analyzer's server summary (``perf_analyzer_output.parse_server_summary``: Triton's averages
    over the windows it reported) as each of its windows' server columns: the same averages in
    each, its counts shared out by the window's requests, so that the windows together give its
    averages and counts back (``server_stats.over_windows``). Nothing where it printed none."""
    total = sum(w.get("requests") or 0 for w in windows)
    if not summary or not total:
        return [{} for _ in windows]
    out = []
    for w in windows:
        n = w.get("requests") or 0
        share = n / summary["success"] if summary["success"] else 0.0
        out.append(
            server_stats.from_averages(
                n,
                round((summary.get("inferences") or summary["success"]) * share),
                round((summary.get("executions") or summary["success"]) * share),
                summary["request_us"],
                summary["queue_us"],
                summary["compute_input_us"],
                summary["compute_infer_us"],
                summary["compute_output_us"],
            )
            if n
            else {}
        )
    return out
