"""Tidy frames over the stored tables: one row per group (lifecycle), per group and point
(performance), or per run (nightly). Inputs are the frames ``rig.store.Store.read`` returns;
outputs are plain pandas frames for a notebook, a report or the gate.

    from rig.store import Store
    from rig.analysis import frames
    s = Store("results")
    frames.lifecycle(s.read("cycles"))
    frames.performance(s.read("windows"), cycles=s.read("cycles"))
    frames.nightly(s.read("cycles"), s.read("windows"), "stop_p95", by=["retain"])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rig.analysis import stats
from rig.analysis.stored_histograms import attach_histograms, histograms, latest  # noqa: F401 - frames' API too
from rig.common import hdr

TAGS = ("triton_version", "engine", "model", "retain", "stop_strategy", "restart")
WINDOW_TAGS = ("triton_version", "engine", "model")
POINT = ("mode", "concurrency", "rate")
PERCENTILES = (50, 90, 99, 99.9)


def default_by(df: pd.DataFrame, candidates=TAGS) -> list[str]:
    """The tag columns that tell the rows apart (more than one value), else triton_version."""
    by = [c for c in candidates if c in df.columns and df[c].nunique(dropna=True) > 1]
    return by or ["triton_version"]


def _by(df: pd.DataFrame, by, candidates=TAGS) -> list[str]:
    if by is None:
        return default_by(df, candidates)
    by = [by] if isinstance(by, str) else list(by)
    unknown = [c for c in by if c not in df.columns]
    if unknown:
        raise KeyError(f"no column {', '.join(unknown)}; columns: {', '.join(df.columns)}")
    return by


def _values(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").dropna().to_numpy(dtype=float)


def _quantile(s: pd.Series, q: float) -> float | None:
    v = _values(s)
    return float(np.percentile(v, q)) if v.size else None


def finalize_counts(cycles: pd.DataFrame) -> tuple[int, int]:
    """(cycles whose every finalize ran before stop returned, cycles that expected any)."""
    exp = pd.to_numeric(cycles["finalize_expected"], errors="coerce").fillna(0)
    before = pd.to_numeric(cycles["finalize_before_stop"], errors="coerce").fillna(0)
    mask = exp > 0
    return int((before[mask] == exp[mask]).sum()), int(mask.sum())


ONE_WORKER = ("same-process", "reload")  # restart modes whose cycles share one worker: a slope means a leak


def rss_slope(cycles: pd.DataFrame, column: str = "worker_rss_bytes", skip: int = 0):
    """Bytes per cycle that ``column`` grows by across cycles of one worker (same-process and
    reload restarts only; None otherwise or with too few cycles): the slope with its 95 % interval,
    pooled over runs with each run's own level (values and cycle numbers centred per run).
    ``skip`` drops each run's first cycles (warm-up)."""
    c = cycles[cycles["restart"].isin(ONE_WORKER)] if "restart" in cycles else cycles.iloc[0:0]
    c = c[["run_id", "cycle", column]].dropna()
    c = c[c["cycle"] > skip]
    if len(c) < 3:
        return None
    x = c["cycle"].astype(float) - c.groupby("run_id")["cycle"].transform("mean")
    y = c[column].astype(float) - c.groupby("run_id")[column].transform("mean")
    return stats.slope_ci(x.to_numpy(), y.to_numpy())


def lifecycle(cycles: pd.DataFrame, by=None) -> pd.DataFrame:
    """Per group: cycles and runs, outcome counts (``outcome_<name>``; the load's verdicts as
    ``load_<name>``), finalize success
    (cycles whose every finalize ran before stop returned, among cycles that expected one) with
    its Wilson interval, start and stop latency p50/p95/max, stubs killed and shared-memory
    regions left per cycle, and worker/stub RSS growth per cycle with its interval
    (same-process and reload restarts only)."""
    by = _by(cycles, by)
    outcomes = sorted(cycles["outcome"].dropna().unique()) if len(cycles) else []
    loads = sorted(cycles["load_outcome"].dropna().unique()) if len(cycles) and "load_outcome" in cycles else []
    rows = []
    for key, g in cycles.groupby(by, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        row.update(runs=g["run_id"].nunique(), cycles=len(g))
        counts = g["outcome"].value_counts()
        row.update({f"outcome_{o}": int(counts.get(o, 0)) for o in outcomes})
        if loads:  # the load's verdict, counted apart (``load_<name>``)
            lc = g["load_outcome"].value_counts()
            row.update({f"load_{o}": int(lc.get(o, 0)) for o in loads})
        ok, n = finalize_counts(g)
        rate, low, high = stats.wilson(ok, n)
        row.update(finalize_ok=ok, finalize_cycles=n, finalize_rate=rate, finalize_low=low, finalize_high=high)
        for what in ("start", "stop"):
            col = g[f"{what}_latency_s"]
            row.update(
                {
                    f"{what}_p50_s": _quantile(col, 50),
                    f"{what}_p95_s": _quantile(col, 95),
                    f"{what}_max_s": _quantile(col, 100),
                }
            )
        row["stubs_killed_per_cycle"] = float(pd.to_numeric(g["stubs_killed"], errors="coerce").fillna(0).mean())
        row["shm_left_per_cycle"] = float(pd.to_numeric(g["shm_regions_leaked"], errors="coerce").fillna(0).mean())
        for col, name in (("worker_rss_bytes", "worker_rss"), ("stub_rss_bytes", "stub_rss")):
            s = rss_slope(g, col)
            row.update(
                {
                    f"{name}_slope": s[0] if s else None,
                    f"{name}_slope_low": s[1] if s else None,
                    f"{name}_slope_high": s[2] if s else None,
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


def measured_windows(windows: pd.DataFrame) -> pd.DataFrame:
    """The windows that measure: within each run, cycle, tool and point (in window order), the
    first window is dropped as warm-up when there are more than 3 (as analysis.sweeps.summarize
    does), and windows perf_analyzer's stability rule marked unstable (``stable == False``) are
    dropped too where the point has stable ones. Idempotent: a frame it returned (or rows of
    one; pandas keeps the mark in ``attrs``) comes back as it is."""
    if not len(windows) or windows.attrs.get("measured_windows"):
        return windows
    w = windows.sort_values(["run_id", "cycle", "tool", "window"], kind="stable")
    keys = ["run_id", "cycle", "tool", *POINT]
    gid = w.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    first = ~pd.Series(gid).duplicated().to_numpy()  # sorted: a group's first row is its first window
    keep = ~(first & (np.bincount(gid)[gid] > 3))
    w, gid = w[keep], gid[keep]
    if "stable" in w and w["stable"].notna().any():
        stable = w["stable"].astype("boolean").fillna(False).to_numpy(dtype=bool)
        has_stable = pd.Series(stable).groupby(gid).transform("any").to_numpy()
        w = w[~has_stable | stable]  # where a point has stable windows, those only
    w = w.copy() if w is windows else w
    w.attrs["measured_windows"] = True
    return w


def point_label(mode, concurrency, rate) -> str:
    """``concurrency 4`` or ``rate 100/s``: how a point is named in the gate and the report."""
    if rate is not None and not pd.isna(rate):
        return f"rate {rate:g}/s"
    if concurrency is not None and not pd.isna(concurrency):
        return f"concurrency {int(concurrency)}"
    return str(mode)


def with_cycle_tags(windows: pd.DataFrame, cycles: pd.DataFrame | None) -> pd.DataFrame:
    """Windows with their cycle's retain, stop_strategy and restart (from ``cycles``)."""
    if cycles is None or not len(cycles) or not len(windows):
        return windows
    extra = [c for c in ("retain", "stop_strategy", "restart") if c not in windows.columns]
    return windows.merge(cycles[["run_id", "cycle", *extra]], on=["run_id", "cycle"], how="left")


MAX_UNITS = 1000  # cycles a side may have before its runs become the unit (see ``unit_values``)


def unit_levels(df: pd.DataFrame, column: str, max_units: int = MAX_UNITS) -> dict[str, np.ndarray]:
    """``column`` at each unit a test or an interval may take as independent, as the rows
    allow: "windows" (the rows themselves) always; "cycles" (each cycle's median; windows of one
    cycle share its process) where 3 cycles or more have one; "runs" (each run's median; cycles
    of one run share its night and machine, and a year of nightly runs varies between nights)
    where more than ``max_units`` cycles over 3 runs or more do."""
    v = pd.to_numeric(df[column], errors="coerce")
    out = {"windows": v.dropna().to_numpy(dtype=float)}
    if {"run_id", "cycle"} <= set(df.columns) and len(df):
        out.update(cycle_levels(v.groupby([df["run_id"], df["cycle"]], dropna=False, sort=False).median(), max_units))
    return out


def cycle_levels(per_cycle: pd.Series, max_units: int = MAX_UNITS) -> dict[str, np.ndarray]:
    """The "cycles" and "runs" of ``unit_levels`` from each cycle's median (indexed by run, cycle)."""
    per_cycle = per_cycle.dropna()
    out = {}
    if len(per_cycle) >= 3:
        out["cycles"] = per_cycle.to_numpy(dtype=float)
    if len(per_cycle) > max_units:
        per_run = per_cycle.groupby(level=0, sort=False).median()
        if len(per_run) >= 3:
            out["runs"] = per_run.to_numpy(dtype=float)
    return out


LEVELS = ("windows", "cycles", "runs")


def unit_values(df: pd.DataFrame, column: str, max_units: int = MAX_UNITS) -> tuple[np.ndarray, str]:
    """``column`` at the coarsest unit ``unit_levels`` allows, and its name."""
    levels = unit_levels(df, column, max_units)
    name = max(levels, key=LEVELS.index)
    return levels[name], name


def paired_units(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, str]:
    """Two sides' ``unit_levels`` at the coarsest unit both have (the same unit on both sides:
    a version's run medians are not set against one run's cycles)."""
    name = max(set(a) & set(b), key=LEVELS.index)
    return a[name], b[name], name


STREAM_HISTOGRAMS = (("first_response_histogram", "first"), ("gap_histogram", "gap"))


def streaming(windows: pd.DataFrame, by=None, store=None, max_merged: int | None = None) -> pd.DataFrame:
    """Per group, point and tool, over the measured windows of streaming (decoupled) models
    (those with ``first_p50_us``; none: an empty frame): the time to the first response and the
    gaps between responses, p50/p99 of the merged HDR histograms of the latest ``max_merged``
    windows (all where None; ``first_response_histogram``, ``gap_histogram``: from the frame
    where it has them, else read from ``store``; without either, the median of the windows'
    percentiles, ``first_from``/``gap_from`` saying which), and responses per request: all
    responses over the streaming requests (each window's ``responses / responses_per_request``;
    its requests where that is 0: all answered by the final flag alone)."""
    if not len(windows) or "first_p50_us" not in windows:
        return pd.DataFrame()
    w = windows[pd.to_numeric(windows["first_p50_us"], errors="coerce").notna()]
    if not len(w):
        return pd.DataFrame()
    by = _by(w, by, WINDOW_TAGS)
    w = measured_windows(w).reset_index(drop=True)
    keys = [*by, *POINT, "tool"]
    gid = w.groupby(keys, dropna=False, sort=True).ngroup().to_numpy()
    for column, _ in STREAM_HISTOGRAMS:
        if column not in w and store is not None:
            w[column] = histograms(store, w, gid, max_merged, column=column)
    rows = []
    for key, part in w.groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, key))
        row["point"] = point_label(row["mode"], row["concurrency"], row["rate"])
        row.update(runs=part["run_id"].nunique(), windows=len(part))
        for column, name in STREAM_HISTOGRAMS:
            found = part[column].dropna() if column in part else pd.Series(dtype=object)
            found = latest(part.loc[found.index], max_merged)[column] if len(found) else found
            merged = hdr.merge(found) if len(found) else None
            if merged is not None and merged.get_total_count():
                pct = merged.get_percentile_to_value_dict([50, 99])
                row.update(
                    {
                        f"{name}_p50_us": float(pct[50]),
                        f"{name}_p99_us": float(pct[99]),
                        f"{name}_from": f"HDR, {len(found):,} windows",
                    }
                )
            else:
                row.update(
                    {
                        f"{name}_p50_us": _quantile(part[f"{name}_p50_us"], 50),
                        f"{name}_p99_us": _quantile(part[f"{name}_p99_us"], 50),
                        f"{name}_from": "window medians" if part[f"{name}_p50_us"].notna().any() else "-",
                    }
                )
        responses = pd.to_numeric(part["responses"], errors="coerce").fillna(0)
        per = pd.to_numeric(part["responses_per_request"], errors="coerce")
        streamed = (responses / per).where(per > 0, pd.to_numeric(part["requests"], errors="coerce")).sum()
        row["responses"] = int(responses.sum())
        row["responses_per_request"] = float(responses.sum() / streamed) if streamed else None
        rows.append(row)
    return pd.DataFrame(rows)


def performance(
    windows: pd.DataFrame, by=None, cycles: pd.DataFrame | None = None, max_merged: int | None = None
) -> pd.DataFrame:
    """Per group, point (mode, concurrency or rate) and tool (rig / perf_analyzer), over the
    measured windows (``measured_windows``): windows, requests, errors, the throughput median
    over windows with its bootstrap interval over independent units (``unit_values``; named
    in ``throughput_unit``, e.g. "5 cycles"), and latency percentiles of the merged HDR
    histograms (exact: the latencies of all windows together, never averaged percentiles) of
    the latest ``max_merged`` windows (all where None), ``merged`` saying how many.
    ``cycles`` adds the cycle tags (retain, ...) so they can group too. Windows without a
    histogram (or a frame without the column) count in every figure but the percentiles."""
    w = with_cycle_tags(windows, cycles)
    by = _by(w, by, TAGS if cycles is not None else WINDOW_TAGS)
    w = measured_windows(w)
    rows = []
    keys = [*by, *POINT, "tool"]
    for key, g in w.groupby(keys, dropna=False, sort=True) if len(w) else []:
        row = dict(zip(keys, key))
        row["point"] = point_label(row["mode"], row["concurrency"], row["rate"])
        tput = _values(g["throughput"])
        units, unit = unit_values(g, "throughput")
        est = float(np.median(tput)) if tput.size else None
        _, low, high = stats.bootstrap_ci(units)
        if est is not None:
            low, high = min(low, est), max(high, est)
        row.update(
            runs=g["run_id"].nunique(),
            windows=len(g),
            requests=int(g["requests"].sum()),
            errors=int(g["errors"].sum()),
            throughput=est,
            throughput_low=low,
            throughput_high=high,
            throughput_unit=f"{units.size} {unit}",
        )
        hist = g["histogram"].dropna() if "histogram" in g else pd.Series(dtype=object)
        hist = latest(g.loc[hist.index], max_merged)["histogram"] if len(hist) else hist
        pct = stats.histogram_percentiles(hdr.merge(hist), PERCENTILES)
        n = pct.pop("count")
        row.update(pct)
        if "mean_us" in g:
            mean = pd.to_numeric(g["mean_us"], errors="coerce")
            req = g["requests"].where(mean.notna(), 0)
            row["mean_us"] = float((mean.fillna(0) * req).sum() / req.sum()) if req.sum() else None
        else:
            row["mean_us"] = None
        row["latencies"] = n
        row["merged"] = len(hist)
        rows.append(row)
    return pd.DataFrame(rows)


def run_starts(cycles: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.Series:
    """Each run's start time (the runs table's ``started_at`` where given, else its first cycle's)."""
    if runs is not None and len(runs):
        return runs.set_index("run_id")["started_at"]
    return cycles.groupby("run_id")["started_at"].min()


def _run_value(metric: str, c: pd.DataFrame, w: pd.DataFrame, point: dict | None):
    if metric == "finalize_success":
        ok, n = finalize_counts(c)
        return ok / n if n else None
    if metric.startswith(("stop_", "start_")):
        what, q = metric.split("_")
        return _quantile(c[f"{what}_latency_s"], 100 if q == "max" else float(q[1:]))
    if metric in ("stubs_killed", "shm_regions_leaked"):
        return float(pd.to_numeric(c[metric], errors="coerce").fillna(0).mean()) if len(c) else None
    if metric in ("worker_rss_slope", "stub_rss_slope"):
        s = rss_slope(c, metric.replace("_slope", "_bytes"))
        return s[0] if s else None
    w = measured_windows(w)
    for k, v in (point or {}).items():
        w = w[w[k] == v]
    if not len(w):
        return None
    if metric == "throughput":
        return float(np.median(_values(w["throughput"])))
    return stats.histogram_percentiles(hdr.merge(w["histogram"]), PERCENTILES).get(metric)


NIGHTLY_METRICS = (
    "finalize_success",
    "stop_p50",
    "stop_p95",
    "stop_max",
    "start_p50",
    "start_p95",
    "stubs_killed",
    "shm_regions_leaked",
    "worker_rss_slope",
    "stub_rss_slope",
    "throughput",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "max_us",
)


def nightly(
    cycles: pd.DataFrame,
    windows: pd.DataFrame | None,
    metric: str,
    by=None,
    point: dict | None = None,
    runs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One value of ``metric`` per run, runs ordered by start time within each series (``by``:
    tag columns; default none, one series), with ``change`` True where stats.change_points
    says a new level starts. Metrics: NIGHTLY_METRICS (throughput and latencies from the
    windows, at ``point`` such as ``{"concurrency": 4}`` where given)."""
    if metric not in NIGHTLY_METRICS:
        raise ValueError(f"unknown metric {metric!r}: choose from {', '.join(NIGHTLY_METRICS)}")
    by = [] if by is None else ([by] if isinstance(by, str) else list(by))
    if by:
        _by(cycles, by)  # unknown columns: KeyError naming them
    windows = windows if windows is not None else pd.DataFrame(columns=["run_id", "histogram"])
    starts = run_starts(cycles, runs)
    per_run = dict(tuple(windows.groupby("run_id", sort=False))) if len(windows) else {}
    rows = []
    for run_id, c in cycles.groupby("run_id", sort=False):
        row = {k: c[k].iloc[0] for k in by}
        w = per_run.get(run_id, windows.iloc[:0])
        row.update(run_id=run_id, started_at=starts.get(run_id), cycles=len(c), value=_run_value(metric, c, w, point))
        rows.append(row)
    df = pd.DataFrame(rows, columns=[*by, "run_id", "started_at", "cycles", "value"])
    if not len(df):
        return df.assign(metric=metric, change=False)
    df = df.sort_values([*by, "started_at", "run_id"]).reset_index(drop=True)
    df["metric"] = metric
    df["change"] = False
    for _, g in df.groupby(by, dropna=False, sort=False) if by else [(None, df)]:
        vals = g["value"].dropna()
        for i in stats.change_points(vals.to_numpy(dtype=float)):
            df.loc[vals.index[i], "change"] = True
    return df
