"""The sections of `rig report` (see ``rig.analysis.report.page``): lifecycle, performance, streaming,
nightly trends (the differences from the baseline: ``rig.analysis.report.differences``). Each takes
frames and the group key and returns a ``html.Section`` of tables and figures; statistics
come from ``rig.analysis.stats``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rig.analysis import frames, plots, stats, sweeps
from rig.analysis.report.html import Figure, Section, Table
from rig.common import hdr

MAX_GROUPS_PLOTTED = 8
MAX_MERGED = 1000  # windows merged per point at most (its latest): 20-30 ms of decoding per 1,000
MAX_MERGED_RUNS = 50  # runs whose histograms are read at most (the latest)


def groups(df: pd.DataFrame, keys: list[str]):
    return df.groupby(keys, sort=True, dropna=False) if keys else [((), df)]


def label(keys: list[str], k) -> str:
    k = k if isinstance(k, tuple) else (k,)
    return " · ".join(f"{v}" for v in k) if keys else "all"


def _labels(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Each row's group label (``label`` of its keys), one string per group, not per row."""
    if not keys:
        return pd.Series("all", index=df.index)
    gid = df.groupby(keys, sort=False, dropna=False).ngroup()
    first = df.loc[~gid.duplicated(), keys]
    names = {g: label(keys, tuple(r)) for g, r in zip(gid[first.index], first.itertuples(index=False))}
    return gid.map(names)


def pct(x) -> str:
    return "-" if x is None or pd.isna(x) else f"{100 * x:.0f} %"


def finalized(c: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per cycle: whether finalize was expected, and whether every expected one came before stop returned."""
    exp = c.finalize_expected.fillna(0).astype(float) > 0
    ok = exp & (c.finalize_before_stop.fillna(0).astype(float) >= c.finalize_expected.fillna(0).astype(float))
    return exp, ok


def lifecycle_section(cycles: pd.DataFrame, keys: list[str]) -> Section:
    c = cycles.copy()
    c["_exp"], c["_ok"] = finalized(c)
    for col in (
        "stop_latency_s",
        "start_latency_s",
        "stubs_killed",
        "shm_regions_leaked",
        "worker_rss_bytes",
        "stub_rss_bytes",
        "cycle",
    ):
        c[col] = pd.to_numeric(c[col], errors="coerce")
    agg = _lifecycle_groups(c, keys)
    same = c[c.restart.astype("string").isin(frames.ONE_WORKER)] if "restart" in c else c.iloc[:0]
    table = pd.DataFrame([_lifecycle_row(keys, idx, r, same) for idx, r in agg.iterrows()])
    sec = Section("Lifecycle").add(
        Table(
            table,
            "Outcomes (the lifecycle's verdict) and the load's verdict, each "
            "judged apart; finalize success (Wilson interval), stop and start "
            "latency, leaks, RSS slope (same-process and reload runs only)",
        )
    )
    return sec.add(_latency_figure(c, keys))


def _lifecycle_groups(c: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per group of ``keys``: its cycles, finalizes, latencies, leaks, and the lifecycle's
    and the load's verdicts counted (``outcomes``, ``load``)."""
    g = c.groupby(keys, sort=True, dropna=False) if keys else c.groupby(lambda _: "all")
    agg = g.agg(
        cycles=("cycle", "size"),
        fin_n=("_exp", "sum"),
        fin_ok=("_ok", "sum"),
        stop_p50=("stop_latency_s", "median"),
        stop_p95=("stop_latency_s", lambda s: s.quantile(0.95)),
        stop_max=("stop_latency_s", "max"),
        start_p50=("start_latency_s", "median"),
        start_p95=("start_latency_s", lambda s: s.quantile(0.95)),
        start_max=("start_latency_s", "max"),
        stubs_killed=("stubs_killed", "mean"),
        shm_left=("shm_regions_leaked", "mean"),
    )
    by = [c[k] for k in keys] if keys else [pd.Series("all", index=c.index)]
    # the load's verdict, apart (older stores read one through rig.store; a frame without it shows -)
    load = c["load_outcome"] if "load_outcome" in c else pd.Series(None, index=c.index, dtype=object)
    for name, verdicts in (("outcomes", c.outcome), ("load", load.fillna("-"))):
        counted = pd.crosstab(by, verdicts).reindex(agg.index)
        agg[name] = [", ".join(f"{o} {int(n)}" for o, n in row.items() if n) for _, row in counted.iterrows()]
    return agg


def _lifecycle_row(keys: list[str], idx, r, same: pd.DataFrame) -> dict:
    """A group's row of the lifecycle table; its RSS slopes over its cycles in one worker (``same``)."""
    rate, lo, hi = stats.wilson(int(r.fin_ok), int(r.fin_n))
    values = idx if isinstance(idx, tuple) else (idx,)
    row = dict(zip(keys, values)) if keys else {}
    row.update(
        {
            "cycles": int(r.cycles),
            "outcomes": r.outcomes,
            "load": r.load,
            "finalize": pct(rate),
            "finalize 95 % CI": f"{pct(lo)} – {pct(hi)}" if rate is not None else "-",
            "stop p50 s": r.stop_p50,
            "stop p95 s": r.stop_p95,
            "stop max s": r.stop_max,
            "start p50 s": r.start_p50,
            "start p95 s": r.start_p95,
            "start max s": r.start_max,
            "stubs killed/cycle": r.stubs_killed,
            "shm left/cycle": r.shm_left,
        }
    )
    mine = same
    for k, v in zip(keys, values):
        mine = mine[mine[k] == v]
    for col, name in (("worker_rss_bytes", "worker RSS KiB/cycle"), ("stub_rss_bytes", "stub RSS KiB/cycle")):
        s = stats.slope_ci(mine.cycle.to_numpy(), (mine[col] / 1024).to_numpy()) if len(mine) else None
        row[name] = "-" if s is None else f"{s[0]:+.1f} [{s[1]:+.1f}, {s[2]:+.1f}]"
    return row


def _latency_figure(c: pd.DataFrame, keys: list[str]) -> Figure:
    """Stop and start latency, an ECDF per group (the most common ``MAX_GROUPS_PLOTTED``)."""
    labelled = c.assign(_g=_labels(c, keys))
    top = labelled._g.value_counts().index[:MAX_GROUPS_PLOTTED]
    series = {
        p: {lab: labelled.loc[labelled._g == lab, col].to_numpy() for lab in top}
        for p, col in (("stop latency", "stop_latency_s"), ("start latency", "start_latency_s"))
    }
    return Figure(
        plots.render("ecdf_figure", series, "Stop and start latency (ECDF per group)", "seconds"),
        "ECDF of stop and start latency per group",
    )


def load_points(windows: pd.DataFrame) -> pd.Series:
    return pd.to_numeric(windows.concurrency, errors="coerce").where(
        windows["mode"] == "closed", pd.to_numeric(windows.rate, errors="coerce")
    )


def _hist_percentiles(root: str, w: pd.DataFrame, gid: np.ndarray, chosen: list[int]) -> dict:
    """Exact percentiles and the latency curve of each chosen point (``gid`` numbers the
    points of ``w``), from its windows' merged HDR histograms (a point's latest ``MAX_MERGED``
    windows, of the latest ``MAX_MERGED_RUNS`` runs, where it has more: the table says how many
    were merged). Only those windows' histograms are read."""
    from rig.store import Store

    on = np.isin(gid, chosen)
    if not on.any():
        return {}
    h = frames.histograms(Store(root), w, np.where(on, gid, -1), MAX_MERGED, MAX_MERGED_RUNS, _run_codes(w))
    got = np.flatnonzero(on & pd.notna(h))
    cols = [c for c in ("run_id", "cycle", "window", "date") if c in w]
    sel = w[cols].iloc[got].assign(_g=gid[got], histogram=h[got])
    out = {}
    qs = np.concatenate([np.linspace(0, 90, 46), 100 - np.logspace(1, -3, 60)])
    for k, g in sel.groupby("_g", sort=False):
        g = frames.latest(g, MAX_MERGED)
        merged = hdr.merge(g.histogram)
        if merged is None or not merged.get_total_count():
            continue
        table = merged.get_percentile_to_value_dict(list(qs))  # one pass over the counts
        curve = np.array([table[q] for q in qs], dtype=float)
        out[k] = (stats.histogram_percentiles(merged, (50, 90, 99, 99.9)), (qs, curve), len(g))
    return out


def points(windows: pd.DataFrame, keys: list[str]) -> dict:
    """The windows' points (group keys, tool, mode, load point), numbered once for the
    performance and differences sections: ``frame`` (the windows' columns they read), ``gid``
    (each window's point, numbered in key order), ``names`` (each point's key tuple),
    ``units`` (each point's throughput and p99 latency at each independent unit,
    ``frames.unit_levels``, from one grouping of all windows by point, run and cycle) and
    ``medians`` (throughput, p50 and p99 over each point's windows, an array by point)."""
    pkeys = keys + ["tool", "mode", "point"]
    w = windows[
        [
            c
            for c in dict.fromkeys(
                [
                    *keys,
                    "tool",
                    "mode",
                    "run_id",
                    "cycle",
                    "window",
                    "date",
                    "requests",
                    "throughput",
                    "p50_us",
                    "p99_us",
                    "_run",
                ]
            )
            if c in windows
        ]
    ]
    w = w.assign(point=load_points(windows))
    gid = w.groupby(pkeys, sort=True, dropna=False).ngroup().to_numpy()
    if not len(gid):  # soaks without a workload store no windows: no points to show
        return {"keys": pkeys, "frame": w, "gid": gid, "names": [], "units": {}, "medians": {}}
    first = np.empty(gid.max() + 1, dtype=np.int64)
    first[gid[::-1]] = np.arange(len(gid) - 1, -1, -1)  # each point's first window (the last write wins)
    names = [tuple(r) for r in w[pkeys].iloc[first].itertuples(index=False)]
    cols = ["throughput", "p99_us"]
    vals = {c: pd.to_numeric(w[c], errors="coerce").to_numpy(dtype=float, na_value=np.nan) for c in (*cols, "p50_us")}
    per = pd.DataFrame({"g": gid, "run": _run_codes(w), "cycle": w["cycle"].to_numpy(), **vals})
    per = per.groupby(["g", "run", "cycle"], sort=False, dropna=False)[cols].median()
    order = np.argsort(gid, kind="stable")
    bounds = np.searchsorted(gid[order], np.arange(len(names) + 1))
    units = {}
    medians = {c: np.full(len(names), np.nan) for c in vals}  # each point's median over its windows
    for g, part in per.groupby(level="g", sort=False):
        rows = order[bounds[g] : bounds[g + 1]]  # the point's windows, in frame order
        units[g] = {
            c: {"windows": v[~np.isnan(v)], **frames.cycle_levels(part[c].droplevel("g"))}
            for c in cols
            for v in (vals[c][rows],)
        }
        for c, v in vals.items():
            v = units[g][c]["windows"] if c in cols else v[rows][~np.isnan(v[rows])]
            medians[c][g] = np.median(v) if v.size else np.nan
    return {"keys": pkeys, "frame": w, "gid": gid, "names": names, "units": units, "medians": medians}


def performance_section(data, pts: dict, keys: list[str], max_hist: int) -> Section:
    pkeys, w, gid, names = pts["keys"], pts["frame"], pts["gid"], pts["names"]
    agg = w.groupby(gid, sort=True).agg(windows=("window", "size"), requests=("requests", "sum"))
    med = pts["medians"]
    agg = agg.assign(
        p50_med=med["p50_us"][agg.index], p99_med=med["p99_us"][agg.index], tput=med["throughput"][agg.index]
    )
    chosen = list(agg.sort_values("requests", ascending=False).index[:max_hist])
    hists = _hist_percentiles(data.root, w, gid, chosen)
    hists = {names[i]: v for i, v in hists.items()}
    if hists:  # asked for first: a renderer draws it while the rest is computed
        curves = {f"{label(pkeys[:-1], k[:-1])} @ {k[-1]:g}": v[1] for k, v in list(hists.items())[:MAX_GROUPS_PLOTTED]}
        latency = Figure(
            plots.render("latency_distribution_figure", curves), "Latency by percentile, merged HDR histograms"
        )
    points = list(zip(agg.index, agg.itertuples(index=False)))
    rows = [_point_row(pts, names[i], i, a, hists) for i, a in points]
    capped = sum(names[i] in hists and hists[names[i]][2] < a.windows for i, a in points)
    skeys = keys + ["tool", "mode"]
    pts = pd.DataFrame(rows)
    knees, lines = _knees(pts, skeys)
    shown = pts.drop(columns=["throughput_lo", "throughput_hi"])
    sec = Section("Performance").add(
        Table(
            shown,
            "Throughput (median of windows; bootstrap interval of the median "
            "over independent units: cycles' medians, runs' for a point with over "
            f"{frames.MAX_UNITS:,} cycles, windows for one measured in under 3 cycles) "
            "and latency per point; percentiles exact from merged HDR histograms where "
            "marked",
        )
    )
    if len(hists) < len(pts):
        sec.add(
            f"Histograms merged for the {len(hists)} busiest of {len(pts)} points (--max-histograms); "
            "the others show their windows' median percentiles."
        )
    if capped:
        sec.add(
            f"HDR percentiles merge a point's latest {MAX_MERGED:,} windows with histograms, of its latest "
            f"{MAX_MERGED_RUNS} runs at most: {capped} point(s) here merge fewer than all their windows "
            "('latency from' says how many)."
        )
    if lines:
        sec.add(Table(pd.DataFrame(lines), "Knee of each sweep"))
        fig_pts = pts.rename(columns={"infer/s": "throughput", "p99 µs": "p99_us"})
        fig_pts["group"] = [label(skeys, tuple(r)) for r in fig_pts[skeys].itertuples(index=False)]
        sec.add(Figure(plots.render("sweep_figure", fig_pts, "group", knees), "Throughput and p99 against load"))
    if hists:
        sec.add(latency)
    return sec


def _point_row(pts: dict, k: tuple, i, a, hists: dict) -> dict:
    """A point's row of the performance table: its throughput with the bootstrap interval over its
    independent units, and its percentiles, exact from merged HDR histograms where ``hists`` has them."""
    lv = pts["units"][i]["throughput"]
    unit = max(lv, key=frames.LEVELS.index)
    vals = lv[unit]
    _, lo, hi = stats.bootstrap_ci(vals)
    est = a.tput
    lo, hi = (min(lo, est), max(hi, est)) if pd.notna(est) else (lo, hi)
    row = dict(zip(pts["keys"], k))
    hp = hists.get(k, (None,))[0]
    row.update(
        {
            "windows": int(a.windows),
            "infer/s": est,
            "infer/s 95 % CI": f"{lo:,.0f} – {hi:,.0f}",
            "CI over": f"{vals.size:,} {unit}",
            "p50 µs": hp["p50_us"] if hp else a.p50_med,
            "p99 µs": hp["p99_us"] if hp else a.p99_med,
            "p99.9 µs": hp["p999_us"] if hp else None,
            "max µs": hp["max_us"] if hp else None,
            "latency from": (f"HDR, {hists[k][2]:,} windows merged" if hp else "window medians"),
            "throughput_lo": lo,
            "throughput_hi": hi,
        }
    )
    return row


def _knees(pts: pd.DataFrame, skeys: list[str]) -> tuple[dict, list[dict]]:
    """The knee of each sweep (a series of ``skeys`` with two points or more): by its label, and as
    the rows of the knees' table."""
    knees, lines = {}, []
    for k, s in pts.groupby(skeys, sort=False, dropna=False):
        if s.point.nunique() < 2:
            continue
        lab = label(skeys, k)
        kn = sweeps.knee(
            s.sort_values("point")
            .rename(columns={"infer/s": "throughput", "p99 µs": "p99_us"})[["point", "throughput", "p99_us"]]
            .to_dict("records"),
            open_loop=k[-1] == "open",
        )
        knees[lab] = kn["point"] if kn else None
        lines.append({"series": lab, "knee point": knees[lab], "infer/s at knee": kn["throughput"] if kn else None})
    return knees, lines


def streaming_section(root: str, windows: pd.DataFrame, keys: list[str]) -> Section | None:
    """Streaming (decoupled) models' points: time to the first response and gaps between
    responses (p50/p99 from merged HDR histograms, read for these windows only), responses per
    request. None where no window streamed."""
    from rig.store import Store

    if "first_p50_us" not in windows or not windows["first_p50_us"].notna().any():
        return None
    t = frames.streaming(windows, by=keys, store=Store(root), max_merged=MAX_MERGED)
    if not len(t):
        return None
    shown = t[[*keys, "tool", "point", "runs", "windows"]].assign(
        **{
            "first response p50 µs": t.first_p50_us,
            "first response p99 µs": t.first_p99_us,
            "gap p50 µs": t.gap_p50_us,
            "gap p99 µs": t.gap_p99_us,
            "responses/request": t.responses_per_request,
            "responses": t.responses,
            "from": [f if f == g else f"{f}; gaps: {g}" for f, g in zip(t.first_from, t.gap_from)],
        }
    )
    return Section("Streaming").add(
        Table(
            shown,
            "Streaming (decoupled) models, per point: time from submission to a "
            "request's first response with data (to its final flag where none had "
            "data), gaps between consecutive responses of a request, and responses "
            "with data per answered request; the latency of the Performance section "
            "is to the final flag. Percentiles exact from merged HDR histograms "
            f"(a point's latest {MAX_MERGED:,} windows) where marked",
        )
    )


def _run_codes(df: pd.DataFrame) -> np.ndarray:
    """``pd.factorize(df.run_id)[0]``, from the ``_run`` column ``report.build`` adds where present."""
    return df["_run"].to_numpy() if "_run" in df else pd.factorize(df["run_id"])[0]


def trends_section(cycles: pd.DataFrame, windows: pd.DataFrame, keys: list[str]) -> Section | None:
    dates = {str(d) for d in (*cycles.date.dropna().unique(), *windows.date.dropna().unique())}
    if len(dates) < 2:
        return None
    skeys = [k for k in keys if k != "run_id"]
    if "triton_version" in skeys and cycles.groupby("date").triton_version.nunique().max() <= 1:
        skeys.remove("triton_version")  # one version a night: an upgrade is a step of one series
    exp, ok = finalized(cycles)
    c = cycles.assign(_exp=exp, _ok=ok)
    night = (
        c.groupby(skeys + ["date"], dropna=False)
        .agg(
            throughput=("throughput", "median"),
            stop_latency_s=("stop_latency_s", "median"),
            _ok=("_ok", "sum"),
            _exp=("_exp", "sum"),
        )
        .reset_index()
    )
    night["finalize_pct"] = 100 * night._ok / night._exp.where(night._exp > 0)
    wn = (
        windows.groupby(skeys + ["date"], dropna=False)
        .agg(p99_us=("p99_us", "median"), w_tp=("throughput", "median"))
        .reset_index()
    )
    night = night.merge(wn, on=skeys + ["date"], how="outer") if len(night) else wn.assign(throughput=wn.w_tp)
    night["throughput"] = night.throughput.fillna(night.w_tp)
    night["series"] = [label(skeys, tuple(r)) for r in night[skeys].itertuples(index=False)] if skeys else "all"
    night = night.sort_values(["series", "date"])
    found, changes = [], {}
    metrics = (
        ("throughput", "infer/s"),
        ("p99_us", "p99 µs"),
        ("stop_latency_s", "stop latency s"),
        ("finalize_pct", "finalize %"),
    )
    for m, name in metrics:
        for s, g in night.groupby("series", sort=False):
            g = g.dropna(subset=[m])
            for pos in stats.change_points(g[m].to_numpy(dtype=float)):
                before, after = g[m].iloc[:pos].median(), g[m].iloc[pos:].median()
                found.append(
                    {
                        "series": s,
                        "metric": name,
                        "night": g.date.iloc[pos],
                        "before": before,
                        "after": after,
                        "change": f"{100 * (after / before - 1):+.1f} %" if before else "-",
                    }
                )
                if m in ("throughput", "p99_us"):
                    changes.setdefault((m, s), []).append(g.date.iloc[pos])
    sec = Section("Trends across nights")
    sec.add(f"{len(dates)} nights; change points by PELT (ruptures) on each series' nightly medians.")
    sec.add(
        Table(
            pd.DataFrame(found, columns=["series", "metric", "night", "before", "after", "change"]),
            "Change points (the night a step happens)",
        )
    )
    for m, name in metrics[:2]:
        if night[m].notna().any():
            ch = {s: d for (mm, s), d in changes.items() if mm == m}
            sec.add(Figure(plots.render("trend_figure", night, m, name, ch), f"{name} per night"))
    return sec
