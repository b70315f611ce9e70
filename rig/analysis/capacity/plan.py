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

from rig.analysis import tail
from rig.analysis.capacity.sweep import GROUP, NODE, Sweep, measured_windows, norm_key, repeats
from rig.analysis.capacity.tags import node_title
from rig.common import hdr

DEFAULT_HEADROOM = 0.3


def _p99(g: pd.DataFrame) -> tuple[float | None, str]:
    hists = [h for h in g.get("histogram", pd.Series(dtype=object)) if isinstance(h, str) and h]
    if hists and len(hists) == len(g):
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
    cols = GROUP + [
        "point",
        "throughput",
        "p99_us",
        "requests",
        "errors",
        "seconds",
        "repeats",
        "runs",
        "windows",
        "stable",
        "p99_from",
    ]
    if w.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for key, g in w.groupby(GROUP + ["point"], dropna=False, sort=True):
        seconds = float(g["length_s"].sum())
        p99, source = _p99(g)
        out.append(
            dict(
                zip(GROUP + ["point"], norm_key(key)),
                throughput=g["requests"].sum() / seconds if seconds > 0 else None,
                p99_us=p99,
                requests=int(g["requests"].sum()),
                errors=int(g["errors"].sum()),
                seconds=seconds,
                repeats=int(g[["run_id", "cycle"]].drop_duplicates().shape[0]),
                runs=int(g["run_id"].nunique()),
                windows=len(g),
                stable=float((g["stable"] == True).mean()),  # noqa: E712
                p99_from=source,
            )
        )
    df = pd.DataFrame(out, columns=cols)
    for col in ("instances", "cpu_share", "neighbour"):
        df[col] = df[col].astype(object).where(df[col].notna(), None)
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
        key = norm_key(key)
        ok = g[(g["p99_us"].notna()) & (g["p99_us"] <= bound) & (g["errors"] == 0) & g["throughput"].notna()]
        row = dict(
            zip(GROUP, key),
            points=len(g),
            points_ok=len(ok),
            max_point=float(g["point"].max()),
            point=None,
            throughput=None,
            p99_us=None,
            repeats=None,
            per_instance=None,
            nodes=None,
        )
        if len(ok):
            best = ok.loc[ok["throughput"].idxmax()]
            row.update(
                point=float(best["point"]),
                throughput=float(best["throughput"]),
                p99_us=float(best["p99_us"]),
                repeats=int(best["repeats"]),
                nodes=nodes_needed(target, float(best["throughput"]), headroom),
            )
            n = row["instances"]
            if n is not None and not (isinstance(n, float) and math.isnan(n)) and n > 0:
                row["per_instance"] = row["throughput"] / n
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    for col in ("instances", "cpu_share", "neighbour"):
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    df["scaling"] = None
    for _, g in df.groupby(NODE, sort=False, dropna=False):
        known = g[g["instances"].notna() & g["throughput"].notna()]
        if known.empty:
            continue
        base = known.loc[known["instances"].astype(float).idxmin()]
        for i in known.index:
            df.at[i, "scaling"] = df.at[i, "throughput"] / base["throughput"]
    return df


def scaling_base(df: pd.DataFrame) -> dict:
    """Per (version, engine, model, share): the instance count the ``scaling`` column is relative to."""
    out = {}
    for key, g in df.groupby(NODE, sort=False, dropna=False):
        known = g[g["instances"].notna() & g["throughput"].notna()]
        if len(known):
            out[norm_key(key)] = int(known["instances"].astype(float).min())
    return out


def format_plan(df: pd.DataFrame, target: float, p99_ms: float, headroom: float) -> str:
    """The plan as text: a table per version and model, and plain statements where no point met
    the bound."""

    def f(v, fmt="{:,.0f}"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)

    lines = [
        (
            f"capacity for {f(target)} infer/s with p99 <= {p99_ms:g} ms, headroom {headroom:.0%} "
            f"(each node run at {1 - headroom:.0%} of its best throughput under the bound)"
        )
    ]
    bases = scaling_base(df)
    for key, g in df.groupby(NODE, sort=True, dropna=False):
        key = norm_key(key)
        base = bases.get(key)
        lines += [
            "",
            f"{node_title(key[0], key[1], key[2], key[3], neighbour=key[4])}:",
            (
                f"  {'instances':>9} {'best point':>10} {'infer/s':>10} {'p99 us':>8} {'per inst':>9} "
                f"{'scaling':>8} {'nodes':>6}  points met"
            ),
        ]
        for _, r in g.iterrows():
            inst = "-" if r["instances"] is None else str(int(r["instances"]))
            lines.append(
                f"  {inst:>9} {f(r['point'], '{:g}'):>10} {f(r['throughput']):>10} {f(r['p99_us']):>8} "
                f"{f(r['per_instance']):>9} {f(r['scaling'], '{:.2f}x'):>8} {f(r['nodes'], '{:,.0f}'):>6}"
                f"  {r['points_ok']}/{r['points']}"
            )
        for _, r in g[g["point"].isna()].iterrows():
            inst = "" if r["instances"] is None else f" with {int(r['instances'])} instance(s)"
            lines.append(
                f"  no point{inst} kept p99 <= {p99_ms:g} ms without errors (up to {r['max_point']:g} "
                "measured): no node count can be given; bench lighter points or relax the bound"
            )
        if base is not None and g["scaling"].notna().sum() > 1:
            lines.append(f"  scaling: best throughput relative to {base} instance(s)")
        fit = g[g["nodes"].notna()]
        if len(fit):
            b = fit.loc[fit["nodes"].astype(float).idxmin()]
            inst = "" if b["instances"] is None else f" with {int(b['instances'])} instance(s)"
            lines.append(
                f"  fewest nodes: {int(b['nodes'])}{inst}, each at {f(b['throughput'] * (1 - headroom))} "
                f"of {f(b['throughput'])} infer/s (point {b['point']:g}, p99 {f(b['p99_us'])} us)"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------- the scaling model, with intervals
#
# Per group (a node: version, engine, model, share; and an instance count), from its repeats: the
# USL over load (``rig.analysis.usl``) fitted to every repeat's throughput; the load where p99
# reaches the bound (the points' merged p99, interpolated); a node's throughput there by the law;
# beside it the linear baseline (the best measured point within the bound, as ``plan``). The
# intervals resample whole runs where more than one swept the group, then each point's repeats
# (cycles) with replacement (``Sweep.resample``), recompute every figure (throughputs, merged p99s,
# the fit, the load at the bound) and take percentiles.

DEFAULT_BOOTSTRAP = 1000
CONFIDENCE = 0.95


def _estimate(sw: Sweep, pick: list, bound_us: float, start=None) -> dict:
    """Every figure of one sample of repeats: the law's parameters, the load at the bound, a
    node's throughput there by the law (``cap_usl``) and by the best measured point
    (``cap_linear``, ``point_linear``)."""
    import numpy as np

    from rig.analysis import usl

    f = sw.figures(pick)
    law = usl.fit(f["n"], f["x"], start=start)
    at, how = usl.load_at(bound_us, sw.loads, f["p99"])
    ok = np.isfinite(f["p99"]) & (f["p99"] <= bound_us) & np.isfinite(f["throughput"])
    best = int(np.argmax(np.where(ok, f["throughput"], -1))) if ok.any() else None
    return {
        "fit": law,
        "load": at,
        "how": how,
        "throughput": f["throughput"],
        "p99": f["p99"],
        "cap_usl": float(law.at(at)) if law is not None and at is not None else None,
        "cap_linear": float(f["throughput"][best]) if best is not None else None,
        "point_linear": float(sw.loads[best]) if best is not None else None,
    }


def _resamples(sw: Sweep, est: dict, bound: float, n_boot: int, seed: int) -> list[dict]:
    """Each bootstrap resample's figures (``Sweep.resample``); none with one repeat a point and one run."""
    import numpy as np

    if min(len(m) for m in sw.members) < 2 and len(sw.runs) < 2:  # nothing to resample
        return []
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        b = _estimate(sw, sw.resample(rng), bound, est["fit"])
        law = b["fit"]
        boot.append(
            {
                "params": (law.lam, law.sigma, law.kappa) if law else None,
                "load": b["load"],
                "cap_usl": b["cap_usl"],
                "cap_linear": b["cap_linear"],
                "throughput": b["throughput"],
                "p99": b["p99"],
            }
        )
    return boot


def _intervals(boot: list[dict], confidence: float) -> dict:
    from rig.analysis import usl

    ci = {
        name: usl.interval([b["params"][i] for b in boot if b["params"]], confidence)
        for i, name in enumerate(("lam", "sigma", "kappa"))
    }
    for name in ("load", "cap_usl", "cap_linear"):
        ci[name] = usl.interval([b[name] for b in boot], confidence)
    return ci


def _chosen(est: dict) -> tuple[str | None, str]:
    """Which model gives the answer, and why."""
    from rig.analysis import usl

    law = est["fit"]
    if law is not None and law.usable and est["cap_usl"] is not None:
        return "usl", f"it fits {law.points} loads within {law.rms_rel:.1%} (rms)"
    if est["cap_linear"] is not None:
        return "linear", (
            "fewer than 3 loads measured: no USL to use"
            if law is None or law.points < usl.MIN_POINTS
            else f"the USL fits only within {law.rms_rel:.1%} (rms; {usl.FIT_TOLERANCE:.0%} needed)"
        )
    return None, "no load met the bound"


def model(
    windows: pd.DataFrame, p99_ms: float, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0, confidence: float = CONFIDENCE
) -> list[dict]:
    """Per group (``GROUP``): the scaling model of one node, with bootstrap intervals over its
    repeats. Each dict: the group's tags; ``loads``, ``throughput`` and ``p99_us`` per load
    measured (all repeats pooled), ``repeats`` (n, x of each); ``fit`` (``usl.Fit`` or None) and
    ``ci`` ({lam, sigma, kappa, load, cap_usl, cap_linear}: (low, high)); ``deviations``
    (``Sweep.deviations``: one measurement's from its pool, for a fleet run's prediction interval); ``load`` and ``how``
    (``usl.load_at``), ``cap_usl``, ``cap_linear``, ``point_linear``; ``boot``: each resample's
    {params, cap_usl, cap_linear} for intervals of what is derived later (nodes); ``by``: the
    one that gives the answer (``usl`` where its fit is usable and a load met the bound, else
    ``linear`` where a point did, else None) and ``why``."""
    reps = repeats(windows)
    bound = p99_ms * 1000.0
    out = []
    for key, g in reps.groupby(GROUP, dropna=False, sort=True):
        sw = Sweep(g)
        if not sw.loads.size:
            continue
        est = _estimate(sw, sw.members, bound)
        predicted_tail = tail.assess(sw.loads, est["throughput"], est["p99"], sw.latencies(), sw.law_without)
        boot = _resamples(sw, est, bound, n_boot, seed)
        ci = _intervals(boot, confidence)
        law = est["fit"]
        chosen, why = _chosen(est)
        tags = dict(zip(GROUP, norm_key(key)))
        tags["instances"] = None if tags["instances"] is None else int(tags["instances"])
        out.append(
            {
                **tags,
                "cpus": g["cpus"].iloc[0],
                "loads": sw.loads,
                "throughput": est["throughput"],
                "p99_us": est["p99"],
                "repeats": (sw.load, sw.throughput),
                "n_repeats": len(sw.load),
                "min_repeats": int(min(len(m) for m in sw.members)),
                "spread": sw.spread(),
                "deviations": sw.deviations(),
                "tail": predicted_tail,
                "fit": law,
                "ci": ci,
                "load": est["load"],
                "how": est["how"],
                "cap_usl": est["cap_usl"],
                "cap_linear": est["cap_linear"],
                "point_linear": est["point_linear"],
                "boot": boot,
                "by": chosen,
                "why": why,
                "p99_ms": p99_ms,
            }
        )
    return out


def capacity_of(m: dict) -> float | None:
    """A node's throughput at the bound by the group's chosen model."""
    return m.get("cap_usl") if m.get("by") == "usl" else m.get("cap_linear")


def nodes(
    m: dict,
    target: float,
    headroom: float,
    node_law: tuple[float, float] = (0.0, 0.0),
    which: str | None = None,
    confidence: float = CONFIDENCE,
    level: float = 1.0,
) -> dict:
    """Nodes for ``target`` by the group's model (``which``: ``usl`` or ``linear``, default the
    chosen one), nodes adding up as ``node_law`` (σ, κ over nodes; (0, 0): linearly), each serving
    ``level`` times the sweep's node (the fleets' level, ``rig.analysis.capacity.law``): the
    estimate and its interval (the same over every bootstrap resample's capacity), and where
    no node count can serve it (``unreachable``: the node law's peak is below the target)."""
    from rig.analysis import usl

    which = which or m.get("by")
    key = "cap_usl" if which == "usl" else "cap_linear"
    sigma, kappa = node_law
    base = m.get(key)
    cap = base * level if base else base
    est = usl.nodes_for(target, cap, headroom, sigma, kappa)
    boot = [usl.nodes_for(target, b[key] * level, headroom, sigma, kappa) for b in m.get("boot", []) if b[key]]
    low, high = usl.interval(boot, confidence)
    unreachable = sum(b is None for b in boot)
    return {
        "nodes": est,
        "low": None if low is None else int(math.floor(low)),
        "high": None if high is None else int(math.ceil(high)),
        "model": which,
        "unreachable": est is None and m.get(key) is not None,
        "unreachable_share": unreachable / len(boot) if boot else 0.0,
    }


def instance_laws(models: list[dict], confidence: float = CONFIDENCE) -> list[dict]:
    """Per node (version, engine, model, share) swept at 2 instance counts or more: the USL over
    instances, fitted to each count's throughput at the bound (by its chosen model), with
    intervals from the groups' resamples taken together (the b-th of each: the groups'
    resamples are independent). {tags, instances, fit, ci: {lam, sigma, kappa}}."""
    from rig.analysis import usl

    out = []
    keys = sorted({tuple(m[k] for k in NODE) for m in models}, key=str)
    for key in keys:
        ms = sorted(
            (m for m in models if tuple(m[k] for k in NODE) == key and m["instances"] is not None and capacity_of(m)),
            key=lambda m: m["instances"],
        )
        if len(ms) < 2:
            continue
        counts = [m["instances"] for m in ms]
        law = usl.fit(counts, [capacity_of(m) for m in ms])
        boots = []
        for b in range(min(len(m["boot"]) for m in ms)):
            caps = [m["boot"][b]["cap_usl" if m["by"] == "usl" else "cap_linear"] for m in ms]
            got = usl.fit(counts, caps, start=law) if all(caps) else None
            boots.append((got.lam, got.sigma, got.kappa) if got else None)
        ci = {
            name: usl.interval([b[i] for b in boots if b], confidence)
            for i, name in enumerate(("lam", "sigma", "kappa"))
        }
        out.append({**dict(zip(NODE, key)), "instances": counts, "fit": law, "ci": ci})
    return out
