"""Capacity planning from bench sweeps: the most throughput one node (one server, one GPU or
CPU set) sustains with p99 under a bound, per version, engine, model and instance count, and the
nodes a target throughput needs with headroom.

Pure functions over the ``windows`` frame (``Store.read("windows")``: the table's columns plus
``triton_version``). Only the rig's own windows count (``tool == "rig"``). A cycle is one
measurement of a point; its *measured* windows are its last 3 (the first is dropped as warm-up
when it has more), as ``rig bench`` summarizes a point. Per point, over all its measured
windows (every repeat, every run): throughput is requests / seconds; p99 is that of the merged
HDR histograms (all those latencies together), or, where histograms are missing, the median of
the windows' stored ``p99_us``. A point qualifies when its p99 is within the bound and it had no
errors; the best point of a group is the qualifying one with the most throughput.
"""

from __future__ import annotations

import math

import pandas as pd

GROUP = ["triton_version", "engine", "model", "instances"]
DEFAULT_HEADROOM = 0.3


def _point(w: pd.DataFrame) -> pd.Series:
    return w["concurrency"].where(w["mode"] == "closed", w["rate"]).astype(float)


def measured_windows(windows: pd.DataFrame) -> pd.DataFrame:
    """The rig's windows that count: per (run, cycle) its last 3 windows, the first dropped as
    warm-up when there are more than 3 (as ``rig.analysis.sweeps.summarize``)."""
    w = windows[windows["tool"] == "rig"].copy()
    if w.empty:
        return w
    w["point"] = _point(w)
    w = w[w["point"].notna()]
    if "instances" not in w:
        w["instances"] = None
    w["instances"] = w["instances"].astype(object).where(w["instances"].notna(), None)
    w = w.sort_values(["run_id", "cycle", "window"])
    per = w.groupby(["run_id", "cycle"])["window"]
    n, rank = per.transform("size"), per.cumcount()
    first_dropped = (n > 3) & (rank == 0)
    from_end = n - rank  # 1 for the last window
    return w[~first_dropped & (from_end <= 3)].reset_index(drop=True)


def _p99(g: pd.DataFrame) -> tuple[float | None, str]:
    hists = [h for h in g.get("histogram", pd.Series(dtype=object)) if isinstance(h, str) and h]
    if hists and len(hists) == len(g):
        from rig import hdr
        from rig.analysis.stats import histogram_percentiles

        got = histogram_percentiles(hdr.merge(hists), (50, 99))
        return got["p99_us"], "histograms"
    vals = g["p99_us"].dropna()
    return (float(vals.median()) if len(vals) else None), "median of windows"


def points(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per group and point: ``throughput`` (infer/s), ``p99_us``, ``requests``,
    ``errors``, ``seconds``, ``repeats`` (cycles), ``runs``, ``windows``, ``stable`` (fraction
    of windows that met perf_analyzer's rule), ``p99_from``."""
    w = measured_windows(windows)
    cols = GROUP + ["point", "throughput", "p99_us", "requests", "errors", "seconds", "repeats", "runs",
                    "windows", "stable", "p99_from"]
    if w.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for key, g in w.groupby(GROUP + ["point"], dropna=False, sort=True):
        seconds = float(g["length_s"].sum())
        p99, source = _p99(g)
        out.append(dict(zip(GROUP + ["point"], key), throughput=g["requests"].sum() / seconds if seconds > 0 else None,
                        p99_us=p99, requests=int(g["requests"].sum()), errors=int(g["errors"].sum()),
                        seconds=seconds, repeats=int(g[["run_id", "cycle"]].drop_duplicates().shape[0]),
                        runs=int(g["run_id"].nunique()), windows=len(g),
                        stable=float((g["stable"] == True).mean()),  # noqa: E712 - None counts as not stable
                        p99_from=source))
    df = pd.DataFrame(out, columns=cols)
    df["instances"] = df["instances"].astype(object).where(df["instances"].notna(), None)
    return df


def nodes_needed(target: float, throughput: float | None, headroom: float = DEFAULT_HEADROOM) -> int | None:
    """Nodes for ``target`` infer/s when each is run at ``1 - headroom`` of ``throughput``."""
    if not throughput or throughput <= 0 or not 0 <= headroom < 1:
        return None
    return max(1, math.ceil(target / (throughput * (1 - headroom)) - 1e-9))


def plan(windows: pd.DataFrame, target: float, p99_ms: float, headroom: float = DEFAULT_HEADROOM) -> pd.DataFrame:
    """One row per group (version, engine, model, instances): the best point whose p99 is within
    ``p99_ms`` and that had no errors (``point`` None when none met the bound), its throughput
    and p99, throughput per instance, ``scaling`` (best throughput over that of 1 instance, or
    of the fewest instances swept, of the same version, engine and model), ``nodes`` for
    ``target`` infer/s with ``headroom``, and ``points`` / ``points_ok`` (points measured, met)."""
    pts = points(windows)
    bound = p99_ms * 1000.0
    rows = []
    for key, g in pts.groupby(GROUP, dropna=False, sort=True):
        ok = g[(g["p99_us"].notna()) & (g["p99_us"] <= bound) & (g["errors"] == 0) & g["throughput"].notna()]
        row = dict(zip(GROUP, key), points=len(g), points_ok=len(ok), max_point=float(g["point"].max()),
                   point=None, throughput=None, p99_us=None, repeats=None, per_instance=None, nodes=None)
        if len(ok):
            best = ok.loc[ok["throughput"].idxmax()]
            row.update(point=float(best["point"]), throughput=float(best["throughput"]),
                       p99_us=float(best["p99_us"]), repeats=int(best["repeats"]),
                       nodes=nodes_needed(target, float(best["throughput"]), headroom))
            n = row["instances"]
            if n is not None and not (isinstance(n, float) and math.isnan(n)) and n > 0:
                row["per_instance"] = row["throughput"] / n
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["instances"] = df["instances"].astype(object).where(df["instances"].notna(), None)
    df["scaling"] = None
    for _, g in df.groupby(GROUP[:3], sort=False):
        known = g[g["instances"].notna() & g["throughput"].notna()]
        if known.empty:
            continue
        base = known.loc[known["instances"].astype(float).idxmin()]
        for i in known.index:
            df.at[i, "scaling"] = df.at[i, "throughput"] / base["throughput"]
    return df


def scaling_base(df: pd.DataFrame) -> dict:
    """Per (version, engine, model): the instance count the ``scaling`` column is relative to."""
    out = {}
    for key, g in df.groupby(GROUP[:3], sort=False):
        known = g[g["instances"].notna() & g["throughput"].notna()]
        if len(known):
            out[key] = int(known["instances"].astype(float).min())
    return out


def format_plan(df: pd.DataFrame, target: float, p99_ms: float, headroom: float) -> str:
    """The plan as text: a table per version and model, and plain statements where no point met
    the bound."""
    def f(v, fmt="{:,.0f}"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)

    lines = [f"capacity for {f(target)} infer/s with p99 <= {p99_ms:g} ms, headroom {headroom:.0%} "
             f"(each node run at {1 - headroom:.0%} of its best throughput under the bound)"]
    bases = scaling_base(df)
    for (version, engine, model), g in df.groupby(GROUP[:3], sort=True):
        base = bases.get((version, engine, model))
        lines += ["", f"Triton {version}, engine {engine}, model {model}:",
                  f"  {'instances':>9} {'best point':>10} {'infer/s':>10} {'p99 us':>8} {'per inst':>9} "
                  f"{'scaling':>8} {'nodes':>6}  points met"]
        for _, r in g.iterrows():
            inst = "-" if r["instances"] is None else str(int(r["instances"]))
            lines.append(f"  {inst:>9} {f(r['point'], '{:g}'):>10} {f(r['throughput']):>10} {f(r['p99_us']):>8} "
                         f"{f(r['per_instance']):>9} {f(r['scaling'], '{:.2f}x'):>8} {f(r['nodes'], '{:,.0f}'):>6}"
                         f"  {r['points_ok']}/{r['points']}")
        for _, r in g[g["point"].isna()].iterrows():
            inst = "" if r["instances"] is None else f" with {int(r['instances'])} instance(s)"
            lines.append(f"  no point{inst} kept p99 <= {p99_ms:g} ms without errors (up to {r['max_point']:g} "
                         "measured): no node count can be given; bench lighter points or relax the bound")
        if base is not None and g["scaling"].notna().sum() > 1:
            lines.append(f"  scaling: best throughput relative to {base} instance(s)")
        fit = g[g["nodes"].notna()]
        if len(fit):
            b = fit.loc[fit["nodes"].astype(float).idxmin()]
            inst = "" if b["instances"] is None else f" with {int(b['instances'])} instance(s)"
            lines.append(f"  fewest nodes: {int(b['nodes'])}{inst}, each at {f(b['throughput'] * (1 - headroom))} "
                         f"of {f(b['throughput'])} infer/s (point {b['point']:g}, p99 {f(b['p99_us'])} us)")
    return "\n".join(lines)
