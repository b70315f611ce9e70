"""``--summary-json FILE`` of `rig soak`, `rig matrix` and `rig gate`: what the command judged, for a
job's script to read with ``json`` (the nightly CronJob does), never by scraping its log.

One JSON object, written once the exit status is known (on the failure paths that have a run id
too: a soak interrupted or stopped by the machine), to a temporary file beside FILE renamed over
it, so a reader finds the whole of it or nothing. Its keys (``SCHEMA`` 1):

- ``command``: soak, cycle, matrix or gate; ``exit_status``: the status the command returns
  (``rig.common.errors.Exit``) and ``exit``, its name (OK, FAILED, ...);
- ``run_ids``: the runs it stored (a soak: one; a matrix: each cell's; a gate: both sides'), and
  ``run_id`` for a soak;
- ``outcomes``: counts per verdict of each kind, ``{"lifecycle": {"clean": 200}, "load": {"ok":
  200}, "growth": {"ok": 200}}`` (a matrix: its cells' summed; a gate: per side);
- ``reasons``: why it failed (empty when it passed), the ``FAIL:`` lines without the prefix;
  ``verdict``: pass, fail, interrupted, machine (a soak), the gate's pass or fail, a matrix's
  statuses per cell."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rig.common.errors import Exit
from rig.common.outfile import check_writable

SCHEMA = 1
KINDS = (("lifecycle", "outcome"), ("load", "load_outcome"), ("growth", "growth_outcome"))


def check_path(path: str | None) -> None:
    """RigError (one line, before anything runs) unless ``path`` can be written as a local file."""
    if path is not None:
        check_writable(path, "--summary-json", "summary.json")


def write(path: str, summary: dict) -> None:
    """``summary`` as JSON at ``path``: a temporary file in the same folder, flushed, renamed over it."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.absolute().parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _status(status: int) -> dict:
    status = int(status)
    try:
        name = Exit(status).name
    except ValueError:
        name = str(status)
    return {"schema": SCHEMA, "exit_status": status, "exit": name}


def counts(rows, key: str) -> dict[str, int]:
    """Rows per verdict of ``key`` (rows: CycleRows or dicts; one without a verdict left out)."""
    out: dict[str, int] = {}
    for r in rows:
        value = r.get(key) if isinstance(r, dict) else getattr(r, key, None)
        if value is not None and value == value and value != "":
            out[str(value)] = out.get(str(value), 0) + 1
    return dict(sorted(out.items()))


def outcome_counts(rows) -> dict[str, dict[str, int]]:
    """``{"lifecycle": {...}, "load": {...}, "growth": {...}}`` of cycle rows."""
    return {kind: counts(rows, key) for kind, key in KINDS}


def soak(
    command: str,
    status: int,
    run_id: str,
    rows,
    reasons: list[str],
    *,
    verdict: str | None = None,
    cycles_planned: int | None = None,
    extra: dict | None = None,
) -> dict:
    """A soak's (or cycle's) summary: its run, its cycles' verdicts, why it failed."""
    if verdict is None:
        verdict = {Exit.OK: "pass", Exit.FAILED: "fail", Exit.INTERRUPTED: "interrupted", Exit.MACHINE: "machine"}.get(
            int(status), str(int(status))
        )
    return {
        **_status(status),
        "command": command,
        "run_id": run_id,
        "run_ids": [run_id],
        "verdict": verdict,
        "cycles": len(rows),
        "cycles_planned": cycles_planned,
        "outcomes": outcome_counts(rows),
        "reasons": list(reasons),
        **(extra or {}),
    }


def matrix(status: int, rows: list[dict], results: str) -> dict:
    """A matrix's summary: each cell's run, status and verdict counts; the counts summed over cells."""
    cells, total = [], {kind: {} for kind, _ in KINDS}
    for r in rows:
        per = {
            "lifecycle": r.get("outcomes") or {},
            "load": r.get("load_outcomes") or {},
            "growth": r.get("growth_outcomes") or {},
        }
        for kind, tally in per.items():
            for k, v in tally.items():
                total[kind][str(k)] = total[kind].get(str(k), 0) + int(v)
        cells.append(
            {
                "run_id": r.get("run_id"),
                "status": r.get("status"),
                "reason": r.get("reason") or "",
                "runtime": r.get("runtime"),
                "triton_version": r.get("triton_version"),
                "engine": r.get("engine"),
                "retain": r.get("retain"),
                "scenario": r.get("scenario"),
                "control": r.get("control"),
                "shape": r.get("shape"),
                "outcomes": {k: {str(a): int(b) for a, b in v.items()} for k, v in per.items()},
            }
        )
    statuses: dict[str, int] = {}
    for c in cells:
        statuses[str(c["status"])] = statuses.get(str(c["status"]), 0) + 1
    reasons = [
        f"{c['runtime']} {c['engine']}{' ' + c['scenario'] if c['scenario'] else ''}: {c['status']}: {c['reason']}"
        for c in cells
        if c["status"] in ("fail", "error", "crashed", "timeout", "finding", "machine")
    ]
    return {
        **_status(status),
        "command": "matrix",
        "results": results,
        "run_ids": [c["run_id"] for c in cells if c["run_id"]],
        "verdict": dict(sorted(statuses.items())),
        "outcomes": {k: dict(sorted(v.items())) for k, v in total.items()},
        "reasons": reasons,
        "cells": cells,
    }


def gate(status: int, reasons: list[str], baseline: str, candidate: str, sides: dict, results: str) -> dict:
    """A gate's summary: pass or fail, why, and each side (its label, runs and verdict counts)."""
    return {
        **_status(status),
        "command": "gate",
        "verdict": "fail" if reasons else "pass",
        "reasons": list(reasons),
        "baseline": baseline,
        "candidate": candidate,
        "results": results,
        "run_ids": [r for side in sides.values() for r in side["run_ids"]],
        "sides": sides,
        "outcomes": {name: side["outcomes"] for name, side in sides.items()},
    }


def gate_side(label: str, cycles) -> dict:
    """One side of a gate from its cycles frame: label, runs, cycles, verdict counts."""
    rows = cycles.to_dict("records")
    return {
        "label": label,
        "run_ids": sorted({str(r) for r in cycles["run_id"].unique()}),
        "cycles": len(rows),
        "outcomes": outcome_counts(rows),
    }
