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

from rig import hdr

GROUP = ["triton_version", "engine", "model", "cpu_share", "instances"]
NODE = GROUP[:4]  # what a node is: version, engine, model and its share of a machine
DEFAULT_HEADROOM = 0.3


def _norm(key) -> tuple:
    """A group's key with pandas' NaN for a missing tag made None again (so that keys compare)."""
    return tuple(None if isinstance(v, float) and math.isnan(v) else v for v in key)


def share_text(share, cpus=None) -> str:
    """A node's share of its machine: ``1 CPU (0)``; ``share not recorded`` before schema 13."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "share not recorded"
    return f"{share:g} CPU{'' if share == 1 else 's'}" + (f" ({cpus})" if cpus else "")


def node_title(version, engine, model, share, cpus=None) -> str:
    text = f"Triton {version}, engine {engine}, model {model}"
    return text if share is None else f"{text}, node share {share_text(share, cpus)}"


def with_shares(windows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``windows`` with their run's share of the machine (``cpu_share``, ``cpus``: ``runs``'
    columns, schema 13; None for runs stored before)."""
    w = windows.copy()
    cols = [c for c in ("cpu_share", "cpus") if c in runs.columns]
    for c in ("cpu_share", "cpus"):
        if c in w.columns:
            w = w.drop(columns=c)
    if cols and len(runs):
        w = w.merge(runs[["run_id", *cols]].drop_duplicates("run_id"), on="run_id", how="left")
    for c in ("cpu_share", "cpus"):
        if c not in w.columns:
            w[c] = None
        w[c] = w[c].astype(object).where(w[c].notna(), None)
    return w


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
    for col in ("instances", "cpu_share"):
        if col not in w:
            w[col] = None
        w[col] = w[col].astype(object).where(w[col].notna(), None)
    w = w.sort_values(["run_id", "cycle", "window"])
    per = w.groupby(["run_id", "cycle"])["window"]
    n, rank = per.transform("size"), per.cumcount()
    first_dropped = (n > 3) & (rank == 0)
    from_end = n - rank  # 1 for the last window
    return w[~first_dropped & (from_end <= 3)].reset_index(drop=True)


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
    cols = GROUP + ["point", "throughput", "p99_us", "requests", "errors", "seconds", "repeats", "runs",
                    "windows", "stable", "p99_from"]
    if w.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for key, g in w.groupby(GROUP + ["point"], dropna=False, sort=True):
        seconds = float(g["length_s"].sum())
        p99, source = _p99(g)
        out.append(dict(zip(GROUP + ["point"], _norm(key)),
                        throughput=g["requests"].sum() / seconds if seconds > 0 else None,
                        p99_us=p99, requests=int(g["requests"].sum()), errors=int(g["errors"].sum()),
                        seconds=seconds, repeats=int(g[["run_id", "cycle"]].drop_duplicates().shape[0]),
                        runs=int(g["run_id"].nunique()), windows=len(g),
                        stable=float((g["stable"] == True).mean()),  # noqa: E712 - None counts as not stable
                        p99_from=source))
    df = pd.DataFrame(out, columns=cols)
    for col in ("instances", "cpu_share"):
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
        key = _norm(key)
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
    for col in ("instances", "cpu_share"):
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
            out[_norm(key)] = int(known["instances"].astype(float).min())
    return out


def format_plan(df: pd.DataFrame, target: float, p99_ms: float, headroom: float) -> str:
    """The plan as text: a table per version and model, and plain statements where no point met
    the bound."""
    def f(v, fmt="{:,.0f}"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)

    lines = [f"capacity for {f(target)} infer/s with p99 <= {p99_ms:g} ms, headroom {headroom:.0%} "
             f"(each node run at {1 - headroom:.0%} of its best throughput under the bound)"]
    bases = scaling_base(df)
    for key, g in df.groupby(NODE, sort=True, dropna=False):
        key = _norm(key)
        base = bases.get(key)
        lines += ["", f"{node_title(*key)}:",
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


# ---------------------------------------------------------------- the scaling model, with intervals
#
# Per group (a node: version, engine, model, share; and an instance count), from its repeats: the
# USL over load (``rig.analysis.usl``) fitted to every repeat's throughput; the load where p99
# reaches the bound (the points' merged p99, interpolated); a node's throughput there by the law;
# beside it the linear baseline (the best measured point within the bound, as ``plan``). The
# intervals resample each point's repeats (cycles) with replacement, recompute every figure
# (throughputs, merged p99s, the fit, the load at the bound) and take percentiles.

DEFAULT_BOOTSTRAP = 1000
CONFIDENCE = 0.95


def _hist_counts(hists: list) -> tuple[dict[int, int], object] | None:
    """A repeat's windows' histograms merged, as {bucket index: count}, with the histogram."""
    if not hists:
        return None
    h = hdr.merge(hists)
    if h is None or not h.get_total_count():
        return None
    import numpy as np

    counts = np.ctypeslib.as_array(h.counts)
    idx = np.flatnonzero(counts)
    return dict(zip(idx.tolist(), counts[idx].tolist())), h


def repeats(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per group, point and repeat (run, cycle), over its measured windows:
    ``requests``, ``seconds``, ``errors``, ``throughput``, ``p99_us`` (its windows' histograms
    merged; else the median of their p99), ``counts`` ({bucket: count}, None without histograms)
    and ``hist`` (an HdrHistogram of them, for the buckets' values)."""
    w = measured_windows(windows)
    cols = GROUP + ["point", "run_id", "cycle", "cpus", "requests", "seconds", "errors", "throughput", "p99_us",
                    "counts", "hist"]
    if w.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for key, g in w.groupby(GROUP + ["point", "run_id", "cycle"], dropna=False, sort=True):
        seconds = float(g["length_s"].sum())
        hists = [h for h in g.get("histogram", pd.Series(dtype=object)) if isinstance(h, str) and h]
        got = _hist_counts(hists) if len(hists) == len(g) else None
        p99 = (float(got[1].get_value_at_percentile(99)) if got else
               (float(g["p99_us"].median()) if g["p99_us"].notna().any() else None))
        out.append(dict(zip(GROUP + ["point", "run_id", "cycle"], _norm(key)),
                        cpus=g["cpus"].iloc[0] if "cpus" in g else None, requests=int(g["requests"].sum()),
                        seconds=seconds, errors=int(g["errors"].sum()),
                        throughput=g["requests"].sum() / seconds if seconds > 0 else None, p99_us=p99,
                        counts=got[0] if got else None, hist=got[1] if got else None))
    return pd.DataFrame(out, columns=cols)


class _Sweep:
    """One group's repeats as arrays: what a bootstrap resample recomputes from."""

    def __init__(self, g: pd.DataFrame):
        import numpy as np

        g = g[g["throughput"].notna()].sort_values(["point", "run_id", "cycle"]).reset_index(drop=True)
        self.load = g["point"].to_numpy(float)
        self.loads = np.unique(self.load)
        self.members = [np.flatnonzero(self.load == n) for n in self.loads]
        self.requests = g["requests"].to_numpy(float)
        self.seconds = g["seconds"].to_numpy(float)
        self.errors = g["errors"].to_numpy(float)
        self.p99 = g["p99_us"].to_numpy(float)
        self.throughput = g["throughput"].to_numpy(float)
        self.counts = self.values = None
        if len(g) and all(c is not None for c in g["counts"]):
            buckets = sorted(set().union(*g["counts"]))
            col = {b: i for i, b in enumerate(buckets)}
            m = np.zeros((len(g), len(buckets)))
            for r, c in enumerate(g["counts"]):
                for b, k in c.items():
                    m[r, col[b]] = k
            h = g["hist"].iloc[0]
            self.counts = m
            self.values = np.array([h.get_highest_equivalent_value(h.get_value_from_index(b)) for b in buckets],
                                   dtype=float)

    def figures(self, pick: list) -> dict:
        """Per load (``pick``: each load's repeats, as row indices, possibly repeated): the pooled
        throughput, the merged p99 (inf where a request failed: such a load never meets a bound),
        and every picked repeat's (load, throughput) for the fit."""
        import numpy as np

        tput, p99 = [], []
        for rows in pick:
            sec = self.seconds[rows].sum()
            tput.append(self.requests[rows].sum() / sec if sec > 0 else np.nan)
            if self.errors[rows].sum() > 0:
                p99.append(np.inf)
            elif self.counts is not None:
                c = np.cumsum(self.counts[rows].sum(axis=0))
                need = max(int(0.99 * c[-1] + 0.5), 1)
                p99.append(float(self.values[np.searchsorted(c, need)]))
            else:
                p99.append(float(np.nanmedian(self.p99[rows])) if np.isfinite(self.p99[rows]).any() else np.inf)
        every = np.concatenate(pick)
        return {"throughput": np.array(tput), "p99": np.array(p99), "n": self.load[every],
                "x": self.throughput[every]}


def _estimate(sw: _Sweep, pick: list, bound_us: float, start=None) -> dict:
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
    return {"fit": law, "load": at, "how": how, "throughput": f["throughput"], "p99": f["p99"],
            "cap_usl": float(law.at(at)) if law is not None and at is not None else None,
            "cap_linear": float(f["throughput"][best]) if best is not None else None,
            "point_linear": float(sw.loads[best]) if best is not None else None}


def model(windows: pd.DataFrame, p99_ms: float, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0,
          confidence: float = CONFIDENCE) -> list[dict]:
    """Per group (``GROUP``): the scaling model of one node, with bootstrap intervals over its
    repeats. Each dict: the group's tags; ``loads``, ``throughput`` and ``p99_us`` per load
    measured (all repeats pooled), ``repeats`` (n, x of each); ``fit`` (``usl.Fit`` or None) and
    ``ci`` ({lam, sigma, kappa, load, cap_usl, cap_linear}: (low, high)); ``load`` and ``how``
    (``usl.load_at``), ``cap_usl``, ``cap_linear``, ``point_linear``; ``boot``: each resample's
    {params, cap_usl, cap_linear} for intervals of what is derived later (nodes); ``by``: the
    one that gives the answer (``usl`` where its fit is usable and a load met the bound, else
    ``linear`` where a point did, else None) and ``why``."""
    import numpy as np

    from rig.analysis import usl

    reps = repeats(windows)
    bound = p99_ms * 1000.0
    out = []
    for key, g in reps.groupby(GROUP, dropna=False, sort=True):
        sw = _Sweep(g)
        if not sw.loads.size:
            continue
        est = _estimate(sw, sw.members, bound)
        rng = np.random.default_rng(seed)
        boot = []
        if min(len(m) for m in sw.members) > 1:  # one repeat a point: nothing to resample
            for _ in range(n_boot):
                b = _estimate(sw, [rng.choice(m, len(m)) for m in sw.members], bound, est["fit"])
                law = b["fit"]
                boot.append({"params": (law.lam, law.sigma, law.kappa) if law else None, "load": b["load"],
                             "cap_usl": b["cap_usl"], "cap_linear": b["cap_linear"]})
        ci = {}
        for i, name in enumerate(("lam", "sigma", "kappa")):
            ci[name] = usl.interval([b["params"][i] for b in boot if b["params"]], confidence)
        for name in ("load", "cap_usl", "cap_linear"):
            ci[name] = usl.interval([b[name] for b in boot], confidence)
        law = est["fit"]
        if law is not None and law.usable and est["cap_usl"] is not None:
            chosen, why = "usl", f"it fits {law.points} loads within {law.rms_rel:.1%} (rms)"
        elif est["cap_linear"] is not None:
            chosen = "linear"
            why = ("fewer than 3 loads measured: no USL to use" if law is None or law.points < usl.MIN_POINTS
                   else f"the USL fits only within {law.rms_rel:.1%} (rms; {usl.FIT_TOLERANCE:.0%} needed)")
        else:
            chosen, why = None, "no load met the bound"
        tags = dict(zip(GROUP, _norm(key)))
        tags["instances"] = None if tags["instances"] is None else int(tags["instances"])
        out.append({**tags, "cpus": g["cpus"].iloc[0], "loads": sw.loads, "throughput": est["throughput"],
                    "p99_us": est["p99"],
                    "repeats": (sw.load, sw.throughput), "n_repeats": int(len(sw.load)),
                    "min_repeats": int(min(len(m) for m in sw.members)), "fit": law, "ci": ci,
                    "load": est["load"], "how": est["how"], "cap_usl": est["cap_usl"],
                    "cap_linear": est["cap_linear"], "point_linear": est["point_linear"], "boot": boot,
                    "by": chosen, "why": why, "p99_ms": p99_ms})
    return out


def capacity_of(m: dict) -> float | None:
    """A node's throughput at the bound by the group's chosen model."""
    return m.get("cap_usl") if m.get("by") == "usl" else m.get("cap_linear")


def nodes(m: dict, target: float, headroom: float, node_law: tuple[float, float] = (0.0, 0.0),
          which: str | None = None, confidence: float = CONFIDENCE) -> dict:
    """Nodes for ``target`` by the group's model (``which``: ``usl`` or ``linear``, default the
    chosen one), nodes adding up as ``node_law`` (σ, κ over nodes; (0, 0): linearly): the
    estimate and its interval (the same over every bootstrap resample's capacity), and where
    no node count can serve it (``unreachable``: the node law's peak is below the target)."""
    from rig.analysis import usl

    which = which or m.get("by")
    key = "cap_usl" if which == "usl" else "cap_linear"
    sigma, kappa = node_law
    est = usl.nodes_for(target, m.get(key), headroom, sigma, kappa)
    boot = [usl.nodes_for(target, b[key], headroom, sigma, kappa) for b in m.get("boot", []) if b[key]]
    low, high = usl.interval(boot, confidence)
    unreachable = sum(b is None for b in boot)
    return {"nodes": est, "low": None if low is None else int(math.floor(low)),
            "high": None if high is None else int(math.ceil(high)), "model": which,
            "unreachable": est is None and m.get(key) is not None, "unreachable_share": unreachable / len(boot)
            if boot else 0.0}


def instance_laws(models: list[dict], confidence: float = CONFIDENCE) -> list[dict]:
    """Per node (version, engine, model, share) swept at 2 instance counts or more: the USL over
    instances, fitted to each count's throughput at the bound (by its chosen model), with
    intervals from the groups' resamples taken together (the b-th of each: the groups'
    resamples are independent). {tags, instances, fit, ci: {lam, sigma, kappa}}."""
    from rig.analysis import usl

    out = []
    keys = sorted({tuple(m[k] for k in NODE) for m in models}, key=str)
    for key in keys:
        ms = sorted((m for m in models if tuple(m[k] for k in NODE) == key and m["instances"] is not None
                     and capacity_of(m)), key=lambda m: m["instances"])
        if len(ms) < 2:
            continue
        counts = [m["instances"] for m in ms]
        law = usl.fit(counts, [capacity_of(m) for m in ms])
        boots = []
        for b in range(min(len(m["boot"]) for m in ms)):
            caps = [m["boot"][b]["cap_usl" if m["by"] == "usl" else "cap_linear"] for m in ms]
            got = usl.fit(counts, caps, start=law) if all(caps) else None
            boots.append((got.lam, got.sigma, got.kappa) if got else None)
        ci = {name: usl.interval([b[i] for b in boots if b], confidence)
              for i, name in enumerate(("lam", "sigma", "kappa"))}
        out.append({**dict(zip(NODE, key)), "instances": counts, "fit": law, "ci": ci})
    return out


def format_instance_law(law: dict) -> str:
    fit, ci = law["fit"], law["ci"]
    counts = ", ".join(map(str, law["instances"]))
    if fit is None:
        return f"  instances {counts}: the USL over instances could not be fitted"
    peak = f"; peaks at {fit.peak:.3g} instances" if math.isfinite(fit.peak) else ""
    return (f"  USL over instances {counts} (each at the bound): λ {_ci(fit.lam, ci['lam'])} infer/s an instance, "
            f"σ {_param(fit.sigma)} ({_param(ci['sigma'][0])}-{_param(ci['sigma'][1])}), κ {_param(fit.kappa)} "
            f"({_param(ci['kappa'][0])}-{_param(ci['kappa'][1])}); fits within {fit.rms_rel:.1%} (rms){peak}")


# ---------------------------------------------------------------- checked against measured fleets

def _toml(text) -> dict:
    import tomllib

    try:
        return tomllib.loads(text) if isinstance(text, str) else {}
    except tomllib.TOMLDecodeError:
        return {}


def fleet_runs(fleet: pd.DataFrame, runs: pd.DataFrame, windows: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per ``rig fleet`` run, over its rounds where every node reported (total ``ok``):
    its nodes' tags (``triton_version``, ``engine``, ``model``, ``cpu_share``, ``cpus`` as
    ``a:0,b:1``, ``instances`` and ``in_flight`` from their runs' rows and configs; None where
    the nodes differ), ``nodes``, ``users``, ``load`` (requests in flight a node: users / nodes x
    in-flight), ``rounds``, and what was measured: ``throughput`` (each node's requests over
    seconds in its measured windows, as a bench point's, summed over the nodes; the fleet
    table's totals where the nodes' windows are not in the store) and ``p99_us`` (their
    histograms merged)."""
    cols = ["run_id", "triton_version", "engine", "model", "cpu_share", "cpus", "instances", "in_flight",
            "nodes", "users", "load", "rounds", "throughput", "p99_us", "measured_from"]
    if fleet is None or fleet.empty:
        return pd.DataFrame(columns=cols)
    out = []
    by_run = runs.set_index("run_id") if len(runs) else pd.DataFrame()
    for run_id, f in fleet.groupby("run_id", sort=True):
        totals = f[(f["node"] == "*") & (f["outcome"] == "ok")]
        if totals.empty:
            continue
        nodes = f[(f["node"] != "*") & f["round"].isin(totals["round"]) & (f["outcome"] == "ok")]
        tags = []
        for rid in nodes["node_run_id"].dropna().unique():
            if rid not in by_run.index:
                continue
            r = by_run.loc[rid]
            r = r.iloc[0] if isinstance(r, pd.DataFrame) else r
            cfg = _toml(r.get("config"))
            share = r.get("cpu_share")
            tags.append({"triton_version": r.get("triton_version"), "engine": r.get("engine"),
                         "model": r.get("model"), "cpu_share": None if pd.isna(share) else float(share),
                         "instances": None if cfg.get("model_repository") else cfg.get("instances", 1),
                         "in_flight": (cfg.get("workload") or {}).get("in_flight", 1),
                         "node": nodes.loc[nodes["node_run_id"] == rid, "node"].iloc[0], "cpus": r.get("cpus")})

        def same(k):
            vals = {t[k] for t in tags}
            return vals.pop() if len(vals) == 1 else None

        n = int(nodes["node"].nunique())
        users = int(totals["users"].median()) if totals["users"].notna().any() else None
        in_flight = same("in_flight") or 1
        measured, source = _fleet_measured(nodes, totals, windows)
        version = same("triton_version") or (totals["triton_version"].iloc[0] if "triton_version" in totals else None)
        out.append({"run_id": run_id, "triton_version": version,
                    "engine": same("engine"), "model": same("model"), "cpu_share": same("cpu_share"),
                    "cpus": ", ".join(f"{t['node']}:{t['cpus']}" for t in sorted(tags, key=lambda t: t["node"])
                                      if t["cpus"]) or None,
                    "instances": same("instances"), "in_flight": in_flight, "nodes": n, "users": users,
                    "load": users / n * in_flight if users and n else None, "rounds": int(len(totals)),
                    **measured, "measured_from": source})
    return pd.DataFrame(out, columns=cols)


def _fleet_measured(nodes: pd.DataFrame, totals: pd.DataFrame, windows: pd.DataFrame | None) -> tuple[dict, str]:
    from rig.analysis.stats import histogram_percentiles

    if windows is not None and len(windows):
        keys = set(zip(nodes["node_run_id"], nodes["node_cycle"].astype("Int64")))
        w = windows[[k in keys for k in zip(windows["run_id"], windows["cycle"].astype("Int64"))]]
        w = w.assign(mode=w["mode"].fillna("closed"), concurrency=w["concurrency"].fillna(0)) if len(w) else w
        mw = measured_windows(w) if len(w) else w
        if len(mw) and len(keys) == mw[["run_id", "cycle"]].drop_duplicates().shape[0]:
            names = nodes[["node_run_id", "node"]].drop_duplicates().rename(columns={"node_run_id": "run_id"})
            per_node = mw.merge(names, on="run_id")
            tput = sum(g["requests"].sum() / g["length_s"].sum() for _, g in per_node.groupby("node")
                       if g["length_s"].sum() > 0)
            h = hdr.merge(mw["histogram"].tolist()) if "histogram" in mw else None
            return {"throughput": float(tput), "p99_us": histogram_percentiles(h, (99,))["p99_us"]}, "node windows"
    h = hdr.merge(totals["histogram"].tolist())
    return ({"throughput": float(totals["throughput"].median()),
             "p99_us": histogram_percentiles(h, (99,))["p99_us"] if h is not None else None}, "fleet totals")


def check(models: list[dict], fleets: pd.DataFrame) -> list[dict]:
    """Each fleet run beside the prediction of the group it matches (the same Triton version,
    engine, model, node share and instance count): the throughput of its nodes at its load (a
    node's, by the group's law and by the linear baseline's interpolation, times the nodes:
    what nodes that share nothing would do) with its interval, the p99 at that load, and the
    errors in % of the prediction (measured - predicted). ``at_bound``: the fleet ran at the
    whole load the model puts at the p99 bound. A fleet no group matches is a row that says why."""
    import numpy as np

    from rig.analysis import usl

    rows = []
    for f in fleets.to_dict("records"):
        match = [m for m in models if all(m[k] == f[k] for k in ("triton_version", "engine", "model", "cpu_share"))
                 and (m["instances"] is None or f["instances"] is None or m["instances"] == f["instances"])]
        row = {**f, "group": None, "why": None}
        if not match:
            row["why"] = ("no bench sweep of the same Triton version, engine, model, node share and instances"
                          if f["model"] is not None and f["cpu_share"] is not None
                          else "its nodes differ in version, model or share (or ran before shares were recorded)")
            rows.append(row)
            continue
        m = match[0]
        load, n = f["load"], f["nodes"]
        law = m["fit"]
        per_usl = float(law.at(load)) if law is not None and load else None
        band = usl.interval([float(usl.throughput(load, *b["params"])) for b in m["boot"] if b["params"]])
        per_lin = float(np.interp(load, m["loads"], m["throughput"])) if load else None
        p99 = usl.p99_at(load, m["loads"], m["p99_us"]) if load else None
        whole = math.floor(m["load"] + 1e-9) if m["load"] else None

        def err(measured, predicted):
            return None if measured is None or not predicted else (measured - predicted) / predicted * 100

        row.update(group=m, by=m["by"], predicted_usl=n * per_usl if per_usl else None,
                   predicted_usl_ci=tuple(n * v for v in band) if band[0] is not None else (None, None),
                   predicted_linear=n * per_lin if per_lin else None, predicted_p99_us=p99,
                   error_usl_pct=err(f["throughput"], n * per_usl if per_usl else None),
                   error_linear_pct=err(f["throughput"], n * per_lin if per_lin else None),
                   error_p99_pct=err(f["p99_us"], p99 if p99 is not None and math.isfinite(p99) else None),
                   within_bound=f["p99_us"] is not None and f["p99_us"] <= m["p99_ms"] * 1000,
                   at_bound=whole is not None and whole >= 1 and abs(load - whole) < 1e-9,
                   extrapolated=law is not None and load is not None and not law.n_min <= load <= law.n_max)
        rows.append(row)
    return rows


def node_law(checked: list[dict], m: dict) -> dict | None:
    """How nodes add up, fitted over the fleet runs of ``m``'s node: each run's efficiency
    (measured over the nodes x one node's prediction at the run's load, by ``m``'s model) and
    ``usl.fit_nodes``. {sigma, kappa, nodes: the counts measured}; None where no run matches."""
    from rig.analysis import usl

    key = "predicted_usl" if m["by"] == "usl" else "predicted_linear"
    runs = [c for c in checked if c.get("group") is m and c.get(key) and c.get("throughput")]
    if not runs:
        return None
    got = usl.fit_nodes([c["nodes"] for c in runs], [c["throughput"] / c[key] for c in runs])
    return None if got is None else {"sigma": got[0], "kappa": got[1], "nodes": sorted({c["nodes"] for c in runs})}


# ---------------------------------------------------------------- as text

def _f(v, fmt="{:,.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def _ci(v, ci, fmt="{:,.0f}") -> str:
    lo, hi = ci if ci else (None, None)
    return _f(v, fmt) + (f" ({_f(lo, fmt)}-{_f(hi, fmt)})" if lo is not None else "")


def _param(v) -> str:
    return "-" if v is None else (f"{v:.3g}" if v else "0")


def _pct(v) -> str:
    return "-" if v is None else f"{v:+.1f} %"


def format_model(m: dict, targets: list[float], headroom: float, law: dict | None) -> str:
    """One node's model as text: the law with its intervals, the load and throughput at the
    bound, the nodes for each target (by the USL and by the linear baseline; nodes adding up
    linearly, or as fitted over fleet runs), which model answers and how far it is measured."""
    fit, ci = m["fit"], m["ci"]
    loads = ", ".join(f"{v:g}" for v in m["loads"])
    inst = "" if m["instances"] is None else f" ({m['instances']} instance(s))"
    boot = (f"95 % intervals over {len(m['boot']):,} resamples of the repeats" if m["boot"] else
            "no interval: one repeat a load (bench --repeats 3 gives them)")
    out = [f"  model of one node{inst}: {m['n_repeats']} repeat(s) over loads {loads}; {boot}"]
    if fit is None:
        out.append("    USL: not fitted (fewer than 2 loads measured)")
    else:
        peak = fit.peak
        if peak <= 1:
            where = "; throughput is highest at one request in flight (σ near 1: more in flight only queues)"
        elif math.isfinite(peak):
            where = f"; throughput peaks at load {peak:.3g} ({_f(float(fit.at(peak)))} infer/s)"
        else:
            where = f"; no peak (κ 0): throughput tends to {_f(fit.lam / fit.sigma) if fit.sigma else 'infinity'}"
        out.append(f"    USL: λ {_ci(fit.lam, ci['lam'])} infer/s, σ {_param(fit.sigma)} "
                   f"({_param(ci['sigma'][0])}-{_param(ci['sigma'][1])}), κ {_param(fit.kappa)} "
                   f"({_param(ci['kappa'][0])}-{_param(ci['kappa'][1])}); fits within {fit.rms_rel:.1%} (rms){where}")
    bound = f"p99 <= {m['p99_ms']:g} ms"
    if m["load"] is None:
        out.append(f"    at {bound}: no load measured met it (the least, {m['loads'][0]:g}, had p99 "
                   f"{_f(m['p99_us'][0])} us or errors)")
    else:
        how = {"within": "interpolated between the loads measured",
               "not reached": "the bound was not reached: the largest load measured, never beyond"}[m["how"]]
        lin = (f"; the linear baseline (best point measured, {m['point_linear']:g}): "
               f"{_ci(m['cap_linear'], ci['cap_linear'])} infer/s" if m["cap_linear"] is not None else "")
        out.append(f"    at {bound}: load {_ci(m['load'], ci['load'], '{:.3g}')} ({how}); a node serves "
                   f"{_ci(m['cap_usl'], ci['cap_usl'])} infer/s by the USL{lin}")
    sigma, kappa = (law["sigma"], law["kappa"]) if law else (0.0, 0.0)
    measured_nodes = max(law["nodes"]) if law else 1
    columns = [("usl", (sigma, kappa)), ("linear", (sigma, kappa))] + ([("usl", (0.0, 0.0))] if law else [])
    if targets:
        out.append(f"    nodes, each at {1 - headroom:.0%} of that:  {'target infer/s':>15}  {'USL':>16}  "
                   f"{'linear baseline':>16}" + (f"  {'USL, nodes linear':>17}" if law else ""))
    far, beyond, unsure = [], False, 0.0
    for t in targets:
        cells = []
        for which, adds in columns:
            got = nodes(m, t, headroom, adds, which)
            if m["cap_usl" if which == "usl" else "cap_linear"] is None:
                cells.append("-")
            elif got["unreachable"]:
                cells.append("unreachable")
                beyond = beyond or adds != (0.0, 0.0)
            else:
                lo, hi = got["low"], got["high"]
                star = "*" if got["unreachable_share"] else ""
                unsure = max(unsure, got["unreachable_share"])
                cells.append(f"{got['nodes']:,}" + (f" ({lo:,}-{hi:,}{star})" if lo is not None else ""))
                if got["nodes"] and got["nodes"] > measured_nodes:
                    far.append(got["nodes"])
        out.append(f"    {'':>36}{_f(t):>15}  {cells[0]:>16}  {cells[1]:>16}" + (f"  {cells[2]:>17}" if law else ""))
    if unsure:
        out.append(f"    * no node count served it in up to {unsure:.0%} of the resamples: the interval is over "
                   "the others")
    answer = {"usl": "the USL", "linear": "the linear baseline", None: "none"}[m["by"]]
    counts = ", ".join(map(str, law["nodes"])) if law else ""
    adds = (f"nodes add up as fitted over fleet runs of {counts} node(s): σ {_param(sigma)}, κ {_param(kappa)}"
            if law else "nodes add up linearly (no fleet run of this node: assumed, not measured)")
    out.append(f"    answer: {answer} ({m['why']}); {adds}")
    if beyond:
        top = math.sqrt((1 - sigma) / kappa) if kappa > 0 else math.inf  # nodes where the fitted law peaks
        most = capacity_of(m) * (top / (1 + sigma * (top - 1) + kappa * top * (top - 1)) if kappa > 0 else 1 / sigma)
        out.append(f"    unreachable: nodes that add up as fitted never serve more than {_f(most)} infer/s together "
                   f"(at {1 - headroom:.0%}: {_f(most * (1 - headroom) if most else None)}), whatever their number; "
                   "fitted over few node counts, so measure more before trusting it")
    if far:
        out.append(f"    trust: loads {m['loads'][0]:g}-{m['loads'][-1]:g} measured, {measured_nodes} node(s) at most; "
                   f"{min(far):,} node(s) and more are extrapolations (they assume nodes that share nothing: the "
                   "balancer, network and store scaling with them)")
    if m["load"] is not None and m["load"] >= 1:
        whole = math.floor(m["load"] + 1e-9)
        out.append(f"    to check it: a fleet at {whole} request(s) in flight a node, e.g. rig fleet --nodes 2 --users "
                   f"{2 * whole} (nodes: rig soak --locust-master HOST:PORT --cpus ... --in-flight 1), then "
                   "rig capacity --check")
    return "\n".join(out)


def format_check(checked: list[dict], p99_ms: float) -> str:
    """The fleet runs beside their predictions, with the errors in % of the prediction."""
    out = [f"checked against measured fleets (p99 <= {p99_ms:g} ms; error = (measured - predicted) / predicted):"]
    for c in checked:
        share = share_text(c["cpu_share"])
        cpus = f" ({c['cpus']})" if c["cpus"] else ""
        head = (f"  fleet {c['run_id']}: {c['nodes']} node(s){cpus}, Triton "
                f"{c['triton_version']}, engine {c['engine']}, model {c['model']}, node share {share}, "
                f"{c['users']} user(s) = load {_f(c['load'], '{:g}')} a node, {c['rounds']} round(s)")
        if c["group"] is None:
            out += [head, f"    not checked: {c['why']}"]
            continue
        if c["at_bound"]:
            head += (" [the load the model puts at the bound]" if c["group"]["how"] == "within" else
                     " [the largest load swept: the sweep never reached the bound]")
        out.append(head)
        x = f"    throughput: measured {_f(c['throughput'])} infer/s ({c['measured_from']}); predicted "
        if c["predicted_usl"] is not None:
            x += (f"{_ci(c['predicted_usl'], c['predicted_usl_ci'])} by the USL (error {_pct(c['error_usl_pct'])}"
                  f"{', extrapolated' if c['extrapolated'] else ''}), ")
        x += f"{_f(c['predicted_linear'])} by the linear baseline (error {_pct(c['error_linear_pct'])})"
        out.append(x)
        out.append(f"    p99: measured {_f(c['p99_us'])} us; predicted {_f(c['predicted_p99_us'])} us at that load "
                   f"(error {_pct(c['error_p99_pct'])}); the bound {'met' if c['within_bound'] else 'NOT met'}")
    return "\n".join(out)
