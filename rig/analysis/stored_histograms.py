"""Which windows' HDR histograms to read, read from the store only for them: a point's latest
windows, run by run, each read pruned to the run's own files and partitions. The windows are read
without their heavy histogram columns first (``frames``, ``rig report``, ``rig gate``); these fill
them in where a figure needs them (``rig.common.hdr`` decodes and merges them)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def latest(df: pd.DataFrame, n: int | None) -> pd.DataFrame:
    """The last ``n`` rows by date, run, cycle and window (all of them when ``n`` is None)."""
    if n is None or len(df) <= n:
        return df
    order = [c for c in ("date", "run_id", "cycle", "window") if c in df.columns]
    return df.sort_values(order, kind="stable").tail(n)


def attach_histograms(
    store, windows: pd.DataFrame, keys: list[str], latest_windows: int | None, max_runs: int = 50
) -> pd.DataFrame:
    """``windows`` (read without their heavy ``histogram`` column) with it filled in from
    ``store`` for each ``keys`` group's latest runs, as many as hold its latest
    ``latest_windows`` windows (all where None), at most ``max_runs`` runs in all; None
    elsewhere (``histograms``). (``performance`` leaves warm-up windows out: give it twice
    the windows it is to merge.)"""
    gid = windows.groupby(keys, dropna=False, sort=False).ngroup().to_numpy() if keys and len(windows) else None
    return windows.assign(histogram=histograms(store, windows, gid, latest_windows, max_runs))


def _partitions(windows: pd.DataFrame, rcode: np.ndarray, runs: np.ndarray) -> list[dict]:
    """For each of ``runs`` (run codes), the partition values its rows hold, as ``Store.read``
    filters (``triton_version=[...]``, ``date=[...]``) that list its folders only; a partition
    column with a null for the run is left out (all its folders are listed)."""
    out = [{} for _ in runs]
    rows = np.flatnonzero(np.isin(rcode, runs))
    pos = {int(r): i for i, r in enumerate(runs)}
    for p in ("triton_version", "date"):
        if p not in windows:
            continue
        codes, values = pd.factorize(windows[p].iloc[rows], use_na_sentinel=True)
        seen = np.unique(rcode[rows].astype(np.int64) * (len(values) + 1) + (codes + 1))
        for r, c in zip(*np.divmod(seen, len(values) + 1)):
            out[pos[int(r)]].setdefault(p, set()).add(str(values[c - 1]) if c else None)
    return [{p: sorted(v) for p, v in d.items() if None not in v} for d in out]


def histograms(
    store,
    windows: pd.DataFrame,
    gid: np.ndarray | None,
    latest_windows: int | None,
    max_runs: int = 50,
    run_codes: np.ndarray | None = None,
    column: str = "histogram",
) -> np.ndarray:
    """The stored histogram of each row of ``windows`` (an object array, None where not read;
    ``column``: which of a window's histograms, e.g. a stream's ``first_response_histogram``):
    those of each group's latest runs (``gid`` numbers the rows' groups, -1 for rows of none;
    None: one group), as many runs as hold its latest ``latest_windows`` windows (all where
    None), at most ``max_runs`` runs in all. One read per run, each pruned to that run's files.
    ``run_codes``: ``pd.factorize(windows["run_id"])[0]`` where the caller has it already."""
    out = np.full(len(windows), None, dtype=object)
    gid = np.zeros(len(windows), dtype=np.int64) if gid is None else np.asarray(gid, dtype=np.int64)
    if not len(windows) or gid.max() < 0:
        return out
    rcode = pd.factorize(windows["run_id"])[0] if run_codes is None else np.asarray(run_codes)
    first = np.empty(rcode.max() + 1, dtype=np.int64)
    first[rcode[::-1]] = np.arange(len(rcode) - 1, -1, -1)  # each run's first row (the last write wins)
    run_ids = windows["run_id"].iloc[first].to_numpy(dtype=object)
    dates = (
        windows["date"].iloc[first].astype("string").fillna("").to_numpy(dtype=str)
        if "date" in windows
        else np.full(len(run_ids), "")
    )
    latest_first = np.lexsort((np.asarray(run_ids, dtype=str), dates))[::-1]  # run codes, latest first
    mine = gid >= 0
    counts = np.bincount(gid[mine] * len(run_ids) + rcode[mine], minlength=(gid.max() + 1) * len(run_ids))
    counts = counts.reshape(-1, len(run_ids))[:, latest_first]
    before = np.cumsum(counts, axis=1) - counts  # windows of the group's later runs
    need = (counts > 0) & (True if latest_windows is None else before < latest_windows)
    wanted = latest_first[need.any(axis=0)][:max_runs]
    cols = ["run_id", "cycle", "window", "tool"]
    read = [
        store.read("windows", run_id=run_ids[r], columns=[*cols, column], **where)
        for r, where in zip(wanted, _partitions(windows, rcode, wanted))
    ]
    if read:
        rows = np.flatnonzero(mine & np.isin(rcode, wanted))
        part = windows.iloc[rows][cols].assign(_row=rows).merge(pd.concat(read), on=cols, how="inner")
        out[part["_row"].to_numpy()] = part[column].to_numpy(dtype=object)
    return out
