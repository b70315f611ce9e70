"""The sections of `rig report` (see ``rig.analysis.report``): lifecycle, performance,
differences from the baseline, nightly trends. Each takes frames and the group key and returns
a ``report_html.Section`` of tables and figures; statistics come from ``rig.analysis.stats``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rig.analysis import plots, stats, sweeps
from rig.analysis.report_html import Figure, Section, Table, cell

ALPHA = 0.05
MIN_EFFECT_PCT = 5.0  # a significant change smaller than this (in %) is not named: noise of a busy machine
MAX_GROUPS_PLOTTED = 8
BOOT_MAX = 2000  # values a bootstrap resamples at most (a seeded subsample beyond that)
MAX_MERGED = 5000  # windows merged per point at most (its latest)
MAX_MERGED_RUNS = 50  # runs whose histograms are read at most (the latest)


def _groups(df: pd.DataFrame, keys: list[str]):
    return df.groupby(keys, sort=True, dropna=False) if keys else [((), df)]


def _label(keys: list[str], k) -> str:
    k = k if isinstance(k, tuple) else (k,)
    return " · ".join(f"{v}" for v in k) if keys else "all"


def _sub(values: pd.Series) -> np.ndarray:
    a = values.dropna().to_numpy(dtype=float)
    if a.size > BOOT_MAX:
        a = np.random.default_rng(0).choice(a, BOOT_MAX, replace=False)
    return a


def _pct(x) -> str:
    return "-" if x is None or pd.isna(x) else f"{100 * x:.0f} %"


def _finalized(c: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per cycle: whether finalize was expected, and whether every expected one came before stop returned."""
    exp = c.finalize_expected.fillna(0).astype(float) > 0
    ok = exp & (c.finalize_before_stop.fillna(0).astype(float) >= c.finalize_expected.fillna(0).astype(float))
    return exp, ok


def lifecycle_section(cycles: pd.DataFrame, keys: list[str]) -> Section:
    c = cycles.copy()
    c["_exp"], c["_ok"] = _finalized(c)
    for col in ("stop_latency_s", "start_latency_s", "stubs_killed", "shm_regions_leaked",
                "worker_rss_bytes", "stub_rss_bytes", "cycle"):
        c[col] = pd.to_numeric(c[col], errors="coerce")
    g = c.groupby(keys, sort=True, dropna=False) if keys else c.groupby(lambda _: "all")
    agg = g.agg(cycles=("cycle", "size"), fin_n=("_exp", "sum"), fin_ok=("_ok", "sum"),
                stop_p50=("stop_latency_s", "median"), stop_p95=("stop_latency_s", lambda s: s.quantile(0.95)),
                stop_max=("stop_latency_s", "max"), start_p50=("start_latency_s", "median"),
                start_p95=("start_latency_s", lambda s: s.quantile(0.95)), start_max=("start_latency_s", "max"),
                stubs_killed=("stubs_killed", "mean"), shm_left=("shm_regions_leaked", "mean"))
    outcomes = pd.crosstab([c[k] for k in keys] if keys else [pd.Series("all", index=c.index)], c.outcome)
    agg["outcomes"] = [", ".join(f"{o} {int(n)}" for o, n in row.items() if n) for _, row in outcomes.reindex(agg.index).iterrows()]
    rows = []
    same = c[c.restart.astype("string") == "same-process"] if "restart" in c else c.iloc[:0]
    for idx, r in agg.iterrows():
        rate, lo, hi = stats.wilson(int(r.fin_ok), int(r.fin_n))
        row = dict(zip(keys, idx if isinstance(idx, tuple) else (idx,))) if keys else {}
        row.update({"cycles": int(r.cycles), "outcomes": r.outcomes, "finalize": _pct(rate),
                    "finalize 95 % CI": f"{_pct(lo)} – {_pct(hi)}" if rate is not None else "-",
                    "stop p50 s": r.stop_p50, "stop p95 s": r.stop_p95, "stop max s": r.stop_max,
                    "start p50 s": r.start_p50, "start p95 s": r.start_p95, "start max s": r.start_max,
                    "stubs killed/cycle": r.stubs_killed, "shm left/cycle": r.shm_left})
        mine = same
        for k, v in zip(keys, idx if isinstance(idx, tuple) else (idx,)):
            mine = mine[mine[k] == v]
        for col, name in (("worker_rss_bytes", "worker RSS KiB/cycle"), ("stub_rss_bytes", "stub RSS KiB/cycle")):
            s = stats.slope_ci(mine.cycle.to_numpy(), (mine[col] / 1024).to_numpy()) if len(mine) else None
            row[name] = "-" if s is None else f"{s[0]:+.1f} [{s[1]:+.1f}, {s[2]:+.1f}]"
        rows.append(row)
    table = pd.DataFrame(rows)
    sec = Section("Lifecycle").add(Table(table, "Outcomes, finalize success (Wilson interval), stop and start "
                                         "latency, leaks, RSS slope (same-process runs only)"))
    labelled = c.assign(_g=[_label(keys, k) for k in zip(*[c[k] for k in keys])] if keys else "all")
    top = labelled._g.value_counts().index[:MAX_GROUPS_PLOTTED]
    series = {p: {lab: labelled.loc[labelled._g == lab, col].to_numpy() for lab in top}
              for p, col in (("stop latency", "stop_latency_s"), ("start latency", "start_latency_s"))}
    sec.add(Figure(plots.png(plots.ecdf_figure(series, "Stop and start latency (ECDF per group)", "seconds")),
                   "ECDF of stop and start latency per group"))
    return sec


def _points(windows: pd.DataFrame) -> pd.Series:
    return pd.to_numeric(windows.concurrency, errors="coerce").where(windows["mode"] == "closed",
                                                                      pd.to_numeric(windows.rate, errors="coerce"))


def _hist_percentiles(root: str, w: pd.DataFrame, pkeys: list[str], chosen: list) -> dict:
    """Exact percentiles and the latency curve of each chosen point, from its windows' merged
    HDR histograms (a point's latest ``MAX_MERGED`` windows, of the latest ``MAX_MERGED_RUNS``
    runs, where it has more: the table says how many were merged)."""
    from rig.store import Store

    sel = w.set_index(pkeys).loc[chosen].reset_index() if chosen else w.iloc[:0]
    if sel.empty:
        return {}
    sel = sel.sort_values(["date", "run_id", "cycle", "window"]).groupby(pkeys, dropna=False).tail(MAX_MERGED)
    latest = sel.drop_duplicates("run_id", keep="last").run_id.tail(MAX_MERGED_RUNS)  # one read per run
    sel = sel[sel.run_id.isin(latest)]
    store = Store(root)
    h = pd.concat([store.read("windows", run_id=r, columns=["run_id", "cycle", "window", "tool", "histogram"])
                   for r in sel.run_id.unique()])
    sel = sel.merge(h, on=["run_id", "cycle", "window", "tool"], how="left")
    out = {}
    qs = np.concatenate([np.linspace(0, 90, 46), 100 - np.logspace(1, -3, 60)])
    for k, g in sel.groupby(pkeys, sort=False, dropna=False):
        merged = stats.merge_histograms(g.histogram)
        if merged is None or not merged.get_total_count():
            continue
        curve = np.array([merged.get_value_at_percentile(q) for q in qs], dtype=float)
        out[k] = (stats.histogram_percentiles(merged, (50, 90, 99, 99.9)), (qs, curve), len(g))
    return out


def performance_section(data, windows: pd.DataFrame, keys: list[str], max_hist: int) -> Section:
    w = windows.copy()
    w["point"] = _points(w)
    pkeys = keys + ["tool", "mode", "point"]
    g = w.groupby(pkeys, sort=True, dropna=False)
    agg = g.agg(windows=("window", "size"), requests=("requests", "sum"), p50_med=("p50_us", "median"),
                p99_med=("p99_us", "median")).reset_index()
    chosen = [tuple(r) for r in agg.sort_values("requests", ascending=False)[pkeys].head(max_hist).itertuples(index=False)]
    hists = _hist_percentiles(data.root, w, pkeys, chosen)
    rows = []
    for k, grp in g:
        est, lo, hi = stats.bootstrap_ci(_sub(grp.throughput))
        row = dict(zip(pkeys, k))
        hp = hists.get(k, (None,))[0]
        a = agg[(agg[pkeys] == pd.Series(k, index=pkeys)).all(axis=1)].iloc[0]
        row.update({"windows": int(a.windows), "infer/s": est, "infer/s 95 % CI": f"{lo:,.0f} – {hi:,.0f}",
                    "p50 µs": hp["p50_us"] if hp else a.p50_med, "p99 µs": hp["p99_us"] if hp else a.p99_med,
                    "p99.9 µs": hp["p999_us"] if hp else None, "max µs": hp["max_us"] if hp else None,
                    "latency from": (f"HDR, {hists[k][2]} windows merged" if hp else "window medians"),
                    "throughput_lo": lo, "throughput_hi": hi})
        rows.append(row)
    pts = pd.DataFrame(rows)
    knees, lines = {}, []
    skeys = keys + ["tool", "mode"]
    for k, s in pts.groupby(skeys, sort=False, dropna=False):
        if s.point.nunique() < 2:
            continue
        lab = _label(skeys, k)
        kn = sweeps.knee(s.sort_values("point").rename(columns={"infer/s": "throughput", "p99 µs": "p99_us"})
                         [["point", "throughput", "p99_us"]].to_dict("records"), open_loop=k[-1] == "open")
        knees[lab] = kn["point"] if kn else None
        lines.append({"series": lab, "knee point": knees[lab], "infer/s at knee": kn["throughput"] if kn else None})
    shown = pts.drop(columns=["throughput_lo", "throughput_hi"])
    sec = Section("Performance").add(Table(shown, "Throughput (median of windows, bootstrap interval) and latency "
                                          "per point; percentiles exact from merged HDR histograms where marked"))
    if len(hists) < len(pts):
        sec.add(f"Histograms merged for the {len(hists)} busiest of {len(pts)} points (--max-histograms); "
                "the others show their windows' median percentiles.")
    if lines:
        sec.add(Table(pd.DataFrame(lines), "Knee of each sweep"))
        fig_pts = pts.rename(columns={"infer/s": "throughput", "p99 µs": "p99_us"})
        fig_pts["group"] = [_label(skeys, tuple(r)) for r in fig_pts[skeys].itertuples(index=False)]
        sec.add(Figure(plots.png(plots.sweep_figure(fig_pts, "group", knees)), "Throughput and p99 against load"))
    if hists:
        curves = {f"{_label(pkeys[:-1], k[:-1])} @ {k[-1]:g}": v[1] for k, v in list(hists.items())[:MAX_GROUPS_PLOTTED]}
        sec.add(Figure(plots.png(plots.latency_distribution_figure(curves)), "Latency by percentile, merged HDR histograms"))
    return sec


def _unit(df: pd.DataFrame, col: str) -> np.ndarray:
    """A soak's values per cycle (windows of one cycle are not independent); a point run once
    (bench) has one cycle, so its windows are the values."""
    per = df.groupby(["run_id", "cycle"])[col].median()
    return (per if len(per) >= 3 else df[col]).dropna().to_numpy(dtype=float)


def _test_rows(b: pd.DataFrame, o: pd.DataFrame, bw: pd.DataFrame, ow: pd.DataFrame) -> list[dict]:
    rows = []
    if len(b) and len(o):
        be, bok = _finalized(b)
        oe, ook = _finalized(o)
        if be.sum() and oe.sum():
            rb, ro = bok.sum() / be.sum(), ook.sum() / oe.sum()
            rows.append({"metric": "finalize success", "baseline": _pct(rb), "other": _pct(ro),
                         "change": f"{100 * (ro - rb):+.0f} points", "estimate": 100 * (ro - rb), "lo": np.nan,
                         "hi": np.nan, "p": stats.fisher(int(ook.sum()), int(oe.sum()), int(bok.sum()), int(be.sum()),
                                                       alternative="two-sided"), "sign": np.sign(ro - rb)})
        for col, name in (("stop_latency_s", "stop latency"), ("start_latency_s", "start latency")):
            rows.append(_num_row(name, b[col].to_numpy(dtype=float), o[col].to_numpy(dtype=float), "s"))
    for pk, bp in bw.groupby(["tool", "mode", "point"], sort=True):
        op = ow[(ow.tool == pk[0]) & (ow["mode"] == pk[1]) & (ow.point == pk[2])]
        if op.empty:
            continue
        where = f" @ {pk[1]} {pk[2]:g}" + ("" if pk[0] == "rig" else f" ({pk[0]})")
        rows.append(_num_row("throughput" + where, _unit(bp, "throughput"), _unit(op, "throughput"), "infer/s"))
        rows.append(_num_row("p99 latency" + where, _unit(bp, "p99_us"), _unit(op, "p99_us"), "µs"))
    return [r for r in rows if r is not None]


def _num_row(name, a, b, unit):
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not a.size or not b.size:
        return None
    cmp = stats.compare(a, b)
    est, lo, hi = stats.ratio_ci(_sub(pd.Series(a)), _sub(pd.Series(b)))
    return {"metric": name, "baseline": f"{cell(cmp['a_median'])} {unit}", "other": f"{cell(cmp['b_median'])} {unit}",
            "change": "-" if pd.isna(est) else f"{100 * est:+.1f} %", "estimate": 100 * est, "lo": 100 * lo,
            "hi": 100 * hi, "p": cmp["p_value"], "sign": np.sign(cmp["diff"] or 0)}


def differences_section(cycles, windows, keys, axis, base) -> Section:
    from scipy.stats import false_discovery_control

    rest = [k for k in keys if k != axis]
    w = windows.assign(point=_points(windows))
    rows = []
    for rk, c_rest in _groups(cycles, rest):
        w_rest = w
        for k, v in zip(rest, rk if isinstance(rk, tuple) else (rk,)):
            w_rest = w_rest[w_rest[k] == v]
        vals = sorted(set(c_rest[axis].dropna().astype(str)) | set(w_rest[axis].dropna().astype(str)))
        bc, bw = c_rest[c_rest[axis].astype(str) == base], w_rest[w_rest[axis].astype(str) == base]
        for other in (v for v in vals if v != base):
            oc, ow = c_rest[c_rest[axis].astype(str) == other], w_rest[w_rest[axis].astype(str) == other]
            for r in _test_rows(bc, oc, bw, ow):
                r.update({"scope": _label(rest, rk) if rest else "", axis: other})
                rows.append(r)
    sec = Section("Differences from the baseline")
    if not rows:
        sec.headlines = [f"No group shares a measure with the baseline {axis}={base}."]
        return sec.add(sec.headlines[0])
    t = pd.DataFrame(rows)
    tested = t.p.notna()
    t["p adj"] = np.nan
    if tested.any():
        t.loc[tested, "p adj"] = false_discovery_control(t.loc[tested, "p"].astype(float).to_numpy(), method="bh")
    material = t.estimate.abs().ge(MIN_EFFECT_PCT) | t.metric.eq("finalize success")
    t["significant"] = t["p adj"].lt(ALPHA) & material
    t["direction"] = np.where(t.sign > 0, "higher", np.where(t.sign < 0, "lower", "same"))
    heads = [f"{axis}={r[axis]}{' (' + r['scope'] + ')' if r['scope'] else ''} vs {base}: {r['metric']} "
             f"{r['direction']} ({r['baseline']} → {r['other']}, {r['change']}, p={r['p']:.2g})"
             for r in t[t.significant].to_dict("records")]
    if not heads:
        heads = [f"No significant difference from {axis}={base} ({int(tested.sum())} tests, "
                 f"Benjamini-Hochberg at {ALPHA:.0%}, changes of {MIN_EFFECT_PCT:g} % or more)."]
    sec.headlines = heads
    cols = [axis] + (["scope"] if rest else []) + ["metric", "baseline", "other", "change", "direction", "p",
                                                      "p adj", "significant"]
    sec.add(*heads, Table(t[cols], f"Each {axis} against {axis}={base} (Mann-Whitney U per cycle, or per window "
                          f"for a single-cycle point; Fisher's exact test for finalize; BH-adjusted p; significant: "
                          f"p adj < {ALPHA:g} and a change of {MIN_EFFECT_PCT:g} % or more)"))
    fig_rows = t[t.estimate.notna()].head(30).assign(label=lambda d: d[axis] + " " + d.metric)
    if len(fig_rows):
        sec.add(Figure(plots.png(plots.comparison_figure(fig_rows, f"Change from {axis}={base} (95 % interval)")),
                       "Differences from the baseline with intervals; significant in red"))
    return sec


def trends_section(cycles: pd.DataFrame, windows: pd.DataFrame, keys: list[str]) -> Section | None:
    dates = pd.concat([cycles.date, windows.date]).dropna().astype(str).unique()
    if len(dates) < 2:
        return None
    skeys = [k for k in keys if k != "run_id"]
    if "triton_version" in skeys and cycles.groupby("date").triton_version.nunique().max() <= 1:
        skeys.remove("triton_version")  # one version a night: an upgrade is a step of one series
    c = cycles.assign(_exp=_finalized(cycles)[0], _ok=_finalized(cycles)[1])
    night = c.groupby(skeys + ["date"], dropna=False).agg(throughput=("throughput", "median"),
                                                          stop_latency_s=("stop_latency_s", "median"),
                                                          _ok=("_ok", "sum"), _exp=("_exp", "sum")).reset_index()
    night["finalize_pct"] = 100 * night._ok / night._exp.where(night._exp > 0)
    wn = windows.groupby(skeys + ["date"], dropna=False).agg(p99_us=("p99_us", "median"),
                                                             w_tp=("throughput", "median")).reset_index()
    night = night.merge(wn, on=skeys + ["date"], how="outer") if len(night) else wn.assign(throughput=wn.w_tp)
    night["throughput"] = night.throughput.fillna(night.w_tp)
    night["series"] = [_label(skeys, tuple(r)) for r in night[skeys].itertuples(index=False)] if skeys else "all"
    night = night.sort_values(["series", "date"])
    found, changes = [], {}
    metrics = (("throughput", "infer/s"), ("p99_us", "p99 µs"), ("stop_latency_s", "stop latency s"),
               ("finalize_pct", "finalize %"))
    for m, name in metrics:
        for s, g in night.groupby("series", sort=False):
            g = g.dropna(subset=[m])
            for pos in stats.change_points(g[m].to_numpy(dtype=float)):
                before, after = g[m].iloc[:pos].median(), g[m].iloc[pos:].median()
                found.append({"series": s, "metric": name, "night": g.date.iloc[pos], "before": before,
                              "after": after, "change": f"{100 * (after / before - 1):+.1f} %" if before else "-"})
                if m in ("throughput", "p99_us"):
                    changes.setdefault((m, s), []).append(g.date.iloc[pos])
    sec = Section("Trends across nights")
    sec.add(f"{len(dates)} nights; change points by PELT (ruptures) on each series' nightly medians.")
    sec.add(Table(pd.DataFrame(found, columns=["series", "metric", "night", "before", "after", "change"]),
                  "Change points (the night a step happens)"))
    for m, name in metrics[:2]:
        if night[m].notna().any():
            ch = {s: d for (mm, s), d in changes.items() if mm == m}
            sec.add(Figure(plots.png(plots.trend_figure(night, m, name, ch)), f"{name} per night"))
    return sec
