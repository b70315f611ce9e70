"""The batch sizes Triton formed, per cycle and per conformance cell, from the cycles' own counts
or their windows'. Pure."""

from __future__ import annotations

from rig.contract import server_stats


def cycle_batches(windows) -> dict[tuple[str, int], dict[int, int]]:
    """The batch sizes Triton formed in each cycle, {(run_id, cycle): {size: executions}}, summed
    over the windows (a frame or dicts with ``run_id``, ``cycle``, ``batch_sizes``) that recorded
    them; a cycle none of whose windows did is not there."""
    if windows is None:
        return {}
    if hasattr(windows, "columns"):
        if "batch_sizes" not in windows.columns or not len(windows):
            return {}
        windows = windows[windows["batch_sizes"].notna()]
        rows = zip(windows["run_id"], windows["cycle"], windows["batch_sizes"])
    else:
        rows = ((w.get("run_id"), w.get("cycle"), w.get("batch_sizes")) for w in windows)
    out: dict[tuple[str, int], dict[int, int]] = {}
    for run_id, cycle, text in rows:
        summed = server_stats.summed_batches([text])
        if summed is None or run_id is None or cycle is None:
            continue
        mine = out.setdefault((str(run_id), int(cycle)), {})
        for size, n in summed.items():
            mine[size] = mine.get(size, 0) + n
    return out


def cell_batches(rows: list[dict], by_cycle: dict) -> dict | None:
    """A cell's batch sizes from its cycles': each cycle's own (schema 15: over the whole cycle,
    with or without windows), else its windows' (``cycle_batches``); None where none recorded them."""
    out: dict[int, int] | None = None
    for r in rows:
        got = server_stats.summed_batches([r.get("batch_sizes")])
        if got is None and r.get("cycle") is not None:
            got = by_cycle.get((str(r.get("run_id")), int(r["cycle"])))
        if got is None:
            continue
        out = {} if out is None else out
        for size, n in got.items():
            out[size] = out.get(size, 0) + n
    return None if out is None else dict(sorted(out.items()))
