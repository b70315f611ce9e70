"""The two sides of ``rig gate`` read from a store: its cycles (the columns the gate reads), a
side's windows and its streaming figures, ``--where``'s clauses, and a side chosen by Triton
version or run id."""

from __future__ import annotations

import dataclasses

from rig.common.errors import RigError
from rig.common.text import redact


def shorten(names, n: int = 5) -> str:
    names = sorted(names)
    return ", ".join(names[:n]) + (f", ... ({len(names)} in all)" if len(names) > n else "")


CYCLE_COLUMNS = [
    "run_id",
    "cycle",
    "outcome",
    "load_outcome",
    "growth_outcome",
    "finalize_expected",
    "finalize_before_stop",
    "stop_latency_s",
    "engine",
    "model",
    "retain",
    "stop_strategy",
    "restart",
    "triton_version",
    "date",
    "scenario",
    "control",
    "shape",
]  # the last three: the conformance check (the verdicts known per scenario cell)
WINDOW_COLUMNS = [
    "run_id",
    "cycle",
    "window",
    "tool",
    "mode",
    "concurrency",
    "rate",
    "stable",
    "requests",
    "errors",
    "throughput",
    "mean_us",
    "triton_version",
    "date",
    "first_p50_us",
    "first_p99_us",
    "gap_p50_us",
    "gap_p99_us",
    "responses",
    "responses_per_request",
]  # not the heavy histograms
MAX_MERGED = 2000  # windows per point whose HDR histograms are merged (the latest): 20-40 ms per 1,000


def read_table(store, results: str, table: str, **kw):
    import pyarrow as pa

    try:
        return store.read(table, **kw)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise RigError(f"{redact(results)} cannot be read as a results folder ({str(e).splitlines()[0][:120]})") from e


def load(results: str, keys=(), sides=()):
    """The cycles of a results folder (the columns the gate reads, and ``keys``: those of
    ``--where`` the table has) and its store; RigError for a missing, empty or foreign one.
    Where every one of ``sides`` names a Triton version the table has, only those versions'
    partitions are read. Windows are read per side (``side_windows``)."""
    from rig.contract.rows import CycleRow
    from rig.store import Store

    store = Store.open(results)
    names = {f.name for f in dataclasses.fields(CycleRow)} | {"triton_version", "date"}
    pruned = {}
    if sides and not keys:
        try:
            present = store.versions("cycles")
        except (OSError, ValueError):
            present = set()
        if set(sides) <= present:
            pruned = {"triton_version": sorted(set(sides))}
    cycles = read_table(
        store,
        results,
        "cycles",
        columns=list(dict.fromkeys([*CYCLE_COLUMNS, *(k for k in keys if k in names)])),
        **pruned,
    )
    if not len(cycles):
        raise RigError(f"{redact(results)} holds no cycles: no soak or bench stored there yet")
    return store, cycles


def side_windows(store, results: str, cycles, versions: set[str] | None, filtered: bool = False):
    """The windows of ``cycles``' runs (a side; only those of its cycles when ``--where``
    filtered them), read from those runs' files only (the version's partition for a version
    side), without the histogram column."""
    import pandas as pd

    runs = sorted(set(cycles["run_id"]))
    if versions:
        w = read_table(store, results, "windows", columns=WINDOW_COLUMNS, triton_version=sorted(versions))
        w = w[w["run_id"].isin(runs)]
    else:
        w = pd.concat([read_table(store, results, "windows", run_id=r, columns=WINDOW_COLUMNS) for r in runs])
    if filtered and len(w):
        w = w.merge(cycles[["run_id", "cycle"]].drop_duplicates(), on=["run_id", "cycle"], how="inner")
    return w.reset_index(drop=True)


def where(cycles, filters: list[str]):
    """Cycles kept by the ``--where`` clauses (``rig.store.where``: ``KEY=A,B`` any of them, as
    ``rig report`` and ``rig capacity`` read it)."""
    from rig.contract.rows import CycleRow
    from rig.store import where as wh

    names = [f.name for f in dataclasses.fields(CycleRow)] + ["triton_version", "date"]
    for key, values in wh.parse(filters):
        wh.check(key, names)  # every one of them is read (``load``)
        kept = cycles[wh.match(cycles[key], values)]
        if not len(kept):
            seen = {str(v) for v in cycles[key].dropna().unique()}
            raise RigError(f"--where {key}={','.join(values)}: no cycle matches; {key} is one of {shorten(seen)}")
        cycles = kept
    return cycles


def select(cycles, name: str, role: str, filtered: bool = False):
    """One side: a Triton version, else a run id (exact or a unique prefix). Returns its
    label, its cycles and the versions it is (None for a run)."""
    versions = {str(v) for v in cycles["triton_version"].dropna().unique()}
    runs = {str(r) for r in cycles["run_id"].unique()}
    if name in versions:
        mask = cycles["triton_version"] == name
        label, version = f"Triton {name}", {name}
    else:
        matches = [r for r in runs if r == name] or [r for r in runs if r.startswith(name)]
        if len(matches) > 1:
            raise RigError(f"--{role} {name}: matches {len(matches)} runs ({shorten(matches)}); give more of the id")
        if not matches:
            among = " among the cycles --where keeps" if filtered else ""
            raise RigError(
                f"--{role} {name}: no such Triton version or run id{among}; versions: "
                f"{shorten(versions)}; runs: {shorten(runs)}"
            )
        mask = cycles["run_id"] == matches[0]
        label, version = f"run {matches[0]}", None
    return label, cycles[mask], version


def side_streaming(windows, store):
    """``frames.streaming`` of a side's windows (per point; first-response and gap histograms
    read from ``store`` for its streaming windows only), or None where none streamed."""
    from rig.analysis import frames

    if not len(windows) or "first_p50_us" not in windows or not windows["first_p50_us"].notna().any():
        return None
    return frames.streaming(windows, by=[], store=store, max_merged=MAX_MERGED)
