"""The conformance table's findings (``rig.analysis.conformance.table`` builds the table): every cell
whose cycles gave verdicts other than the known ones, each with one line that says it (``rig gate``
fails on them)."""

from __future__ import annotations

from pathlib import Path

from rig.analysis.conformance.table import FINDING, Conformance, build


def findings(frame, known_path: str | Path | None = None) -> list[dict]:
    """Every cell whose cycles gave verdicts other than the known ones: a dict each with the
    cell's key, the known verdicts, the verdicts its cycles gave (counted), the runs, and
    ``reason``, one line that says it."""
    table = frame if isinstance(frame, Conformance) else build(frame, known_path)
    out = []
    for c in table.cells:
        if c.judgement != FINDING:
            continue
        got = ", ".join(f"{n}x {v}" for v, n in c.got.items())
        out.append(
            {
                "scenario": c.scenario,
                "control": c.control,
                "shape": c.shape,
                "engine": c.engine,
                "triton_version": c.triton_version,
                "cycles": c.cycles,
                "differing": c.differing,
                "known": c.known,
                "got": dict(c.got),
                "run_ids": list(c.run_ids),
                "reason": f"{c.label}, {c.shape}, {c.engine}, Triton {c.triton_version}: {c.differing}/{c.cycles} "
                f"cycle(s) differ from the known {' / '.join(c.known or ())} (got {got})",
            }
        )
    return out
