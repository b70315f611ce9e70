"""`rig capacity --check`: the ``rig fleet`` runs of a store, measured as a bench point is, and
each compared with what the node's fitted model predicted for that many nodes (its throughput at
the p99 bound, its p99 at the fleet's load); how nodes add up, fitted from them
(``rig.analysis.capacity.plan`` fits the nodes themselves)."""

from __future__ import annotations

import math

import pandas as pd

from rig.analysis import tail
from rig.analysis.capacity.sweep import measured_windows
from rig.analysis.capacity.tags import HELD
from rig.common import hdr


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
    the nodes differ; ``held``: every node held its CPUs awake, ``rig soak --cpu-idle hold``),
    ``nodes``, ``users``, ``load`` (requests in flight a node: users / nodes x in-flight), ``rounds``,
    and what was measured: ``throughput`` (each node's requests over seconds in its measured windows,
    as a bench point's, summed over the nodes; the fleet table's totals where the nodes' windows are
    not in the store) and ``p99_us`` (their histograms merged)."""
    cols = [
        "run_id",
        "triton_version",
        "engine",
        "model",
        "cpu_share",
        "cpus",
        "instances",
        "in_flight",
        "nodes",
        "users",
        "load",
        "rounds",
        "throughput",
        "p99_us",
        "measured_from",
        "held",
    ]
    if fleet is None or fleet.empty:
        return pd.DataFrame(columns=cols)
    out = []
    by_run = runs.set_index("run_id") if len(runs) else pd.DataFrame()
    for run_id, f in fleet.groupby("run_id", sort=True):
        totals = f[(f["node"] == "*") & (f["outcome"] == "ok")]
        if totals.empty:
            continue
        nodes = f[(f["node"] != "*") & f["round"].isin(totals["round"]) & (f["outcome"] == "ok")]
        tags = _node_tags(nodes, by_run)
        n = int(nodes["node"].nunique())
        users = int(totals["users"].median()) if totals["users"].notna().any() else None
        in_flight = _same(tags, "in_flight") or 1
        measured, source = _fleet_measured(nodes, totals, windows)
        version = _same(tags, "triton_version")
        if version is None and "triton_version" in totals:
            version = totals["triton_version"].iloc[0]
        out.append(
            {
                "run_id": run_id,
                "triton_version": version,
                "engine": _same(tags, "engine"),
                "model": _same(tags, "model"),
                "cpu_share": _same(tags, "cpu_share"),
                "cpus": ", ".join(
                    f"{t['node']}:{t['cpus']}" for t in sorted(tags, key=lambda t: t["node"]) if t["cpus"]
                )
                or None,
                "instances": _same(tags, "instances"),
                "in_flight": in_flight,
                "nodes": n,
                "users": users,
                "load": users / n * in_flight if users and n else None,
                "rounds": len(totals),
                **measured,
                "measured_from": source,
                "held": bool(tags) and all(t["held"] for t in tags),
            }
        )
    return pd.DataFrame(out, columns=cols)


def _node_tags(nodes: pd.DataFrame, by_run: pd.DataFrame) -> list[dict]:
    """Each fleet node's tags from its run's row and config (``fleet_runs``)."""
    tags = []
    for rid in nodes["node_run_id"].dropna().unique():
        if rid not in by_run.index:
            continue
        r = by_run.loc[rid]
        r = r.iloc[0] if isinstance(r, pd.DataFrame) else r
        cfg = _toml(r.get("config"))
        share = r.get("cpu_share")
        tags.append(
            {
                "triton_version": r.get("triton_version"),
                "engine": r.get("engine"),
                "model": r.get("model"),
                "cpu_share": None if pd.isna(share) else float(share),
                "instances": None if cfg.get("model_repository") else cfg.get("instances", 1),
                "in_flight": (cfg.get("workload") or {}).get("in_flight", 1),
                "node": nodes.loc[nodes["node_run_id"] == rid, "node"].iloc[0],
                "cpus": r.get("cpus"),
                "held": r.get("cpu_idle") in HELD,
            }
        )
    return tags


def _same(tags: list[dict], key: str):
    """The value every node's ``key`` has, or None where they differ."""
    vals = {t[key] for t in tags}
    return vals.pop() if len(vals) == 1 else None


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
            tput = sum(
                g["requests"].sum() / g["length_s"].sum()
                for _, g in per_node.groupby("node")
                if g["length_s"].sum() > 0
            )
            h = hdr.merge(mw["histogram"].tolist()) if "histogram" in mw else None
            return {"throughput": float(tput), "p99_us": histogram_percentiles(h, (99,))["p99_us"]}, "node windows"
    h = hdr.merge(totals["histogram"].tolist())
    return (
        {
            "throughput": float(totals["throughput"].median()),
            "p99_us": histogram_percentiles(h, (99,))["p99_us"] if h is not None else None,
        },
        "fleet totals",
    )


def check(models: list[dict], fleets: pd.DataFrame) -> list[dict]:
    """Each fleet run beside the prediction of every group it matches (the same Triton version,
    engine, model, node share and instance count), one row per bench neighbour (``neighbour``:
    the node alone, or beside a burner; ``none`` first), so that which bench condition predicts the
    fleet better shows: the throughput of its nodes at its load (a
    node's, by the group's law and by the linear baseline's interpolation, times the nodes:
    what nodes that share nothing would do) with its interval, the p99 at that load, and the
    errors in % of the prediction (measured - predicted). ``at_bound``: the fleet ran at the
    whole load the model puts at the p99 bound. A fleet no group matches is a row that says why."""
    rows = []
    for f in fleets.to_dict("records"):
        match = [
            m
            for m in models
            if all(m[k] == f[k] for k in ("triton_version", "engine", "model", "cpu_share"))
            and (m["instances"] is None or f["instances"] is None or m["instances"] == f["instances"])
        ]
        row = {**f, "group": None, "why": None, "neighbour": None}
        if not match:
            row["why"] = (
                "no bench sweep of the same Triton version, engine, model, node share and instances"
                if f["model"] is not None and f["cpu_share"] is not None
                else "its nodes differ in version, model or share (or ran before shares were recorded)"
            )
            rows.append(row)
            continue
        by_neighbour: dict = {}
        for m in match:  # the first sweep of each neighbour
            by_neighbour.setdefault(m.get("neighbour"), m)
        for nb in sorted(by_neighbour, key=lambda v: (v not in (None, "none"), str(v))):
            rows.append(_predicted({**row, "neighbour": nb}, f, by_neighbour[nb]))
    return rows


def _predicted(row: dict, f: dict, m: dict) -> dict:
    """A fleet's row (``row``, from ``f``) with what group ``m`` predicted for it, and its errors."""
    import numpy as np

    from rig.analysis import usl

    load, n = f["load"], f["nodes"]
    law = m["fit"]
    per_usl = float(law.at(load)) if law is not None and load else None
    band = usl.interval([float(usl.throughput(load, *b["params"])) for b in m["boot"] if b["params"]])
    per_lin = float(np.interp(load, m["loads"], m["throughput"])) if load else None
    p99, p99_how = tail.p99_at(m.get("tail"), load, m["loads"], m["p99_us"]) if load else (None, None)
    lin_band, p99_band = _bands(m, load)
    whole = math.floor(m["load"] + 1e-9) if m["load"] else None

    def err(measured, predicted):
        return None if measured is None or not predicted else (measured - predicted) / predicted * 100

    boot_usl = [n * float(usl.throughput(load, *b["params"])) for b in m["boot"] if b["params"]] if load else []
    boot_lin = [n * v for v in _boot_linear(m, load)]
    row.update(
        group=m,
        by=m["by"],
        predicted_usl=n * per_usl if per_usl else None,
        predicted_usl_ci=tuple(n * v for v in band) if band[0] is not None else (None, None),
        predicted_usl_pi=_one_run(n * per_usl if per_usl else None, boot_usl, m, "throughput"),
        predicted_linear=n * per_lin if per_lin else None,
        predicted_linear_pi=_one_run(n * per_lin if per_lin else None, boot_lin, m, "throughput"),
        predicted_p99_us=p99,
        predicted_p99_pi=_one_run(p99, _boot_p99(m, load), m, "p99"),
        error_usl_pct=err(f["throughput"], n * per_usl if per_usl else None),
        error_linear_pct=err(f["throughput"], n * per_lin if per_lin else None),
        predicted_linear_ci=tuple(n * v for v in lin_band) if lin_band[0] is not None else (None, None),
        predicted_p99_ci=p99_band,
        predicted_p99_how=p99_how,
        error_p99_pct=err(f["p99_us"], p99 if p99 is not None and math.isfinite(p99) else None),
        within_bound=f["p99_us"] is not None and f["p99_us"] <= m["p99_ms"] * 1000,
        at_bound=whole is not None and whole >= 1 and abs(load - whole) < 1e-9,
        extrapolated=law is not None and load is not None and not law.n_min <= load <= law.n_max,
    )
    row.update(_covered(row))
    return row


def expected(m: dict, load: float, nodes: int) -> dict:
    """What a fleet of ``nodes`` at ``load`` requests in flight a node should measure, by group
    ``m``: its throughput by the chosen model and its p99 at that load, each with the estimate's
    interval and the interval for one run (``_one_run``), as ``--check`` will judge it."""
    f = {"load": load, "nodes": nodes, "throughput": None, "p99_us": None}
    row = _predicted(dict(f), f, m)
    tp = "usl" if m["by"] == "usl" else "linear"
    return {
        "throughput": row[f"predicted_{tp}"],
        "throughput_ci": row[f"predicted_{tp}_ci"],
        "throughput_pi": row[f"predicted_{tp}_pi"],
        "p99_us": row["predicted_p99_us"],
        "p99_ci": row["predicted_p99_ci"],
        "p99_pi": row["predicted_p99_pi"],
    }


PI_DRAWS = 4000  # a prediction interval's draws: an estimate's resample times one measurement's deviation


def _one_run(estimate, boot: list, m: dict, figure: str) -> tuple:
    """The 95 % prediction interval for what one fleet run measures: the estimate's resamples
    (``boot``; the estimate alone without them), each times the deviation of one measurement from
    its pool drawn from the sweep's (``Sweep.deviations``: its repeats, each taken at one time, as
    a fleet run is). One deviation stands for the whole fleet: what moves a run (the machine's
    state) moves its nodes together. (None, None) without an estimate or deviations."""
    import numpy as np

    from rig.analysis import usl

    devs = (m.get("deviations") or {}).get(figure)
    if estimate is None or not math.isfinite(estimate) or devs is None or not len(devs):
        return (None, None)
    rng = np.random.default_rng(0)
    base = np.asarray([b for b in boot if b is not None and math.isfinite(b)] or [estimate], dtype=float)
    draws = rng.choice(base, PI_DRAWS) * np.exp(rng.choice(devs, PI_DRAWS))
    return usl.interval(draws.tolist())


def _boot_linear(m: dict, load) -> list[float]:
    """A node's throughput at ``load`` by the linear baseline's interpolation, per resample."""
    import numpy as np

    if not load:
        return []
    return [
        float(np.interp(load, m["loads"], b["throughput"])) for b in m["boot"] if np.isfinite(b["throughput"]).all()
    ]


def _boot_p99(m: dict, load) -> list[float]:
    """p99 at ``load`` per resample (as ``_bands``: the queue's shape at each resample's level
    where the queue gives the answer, else each resample's interpolation)."""
    import numpy as np

    from rig.analysis import usl

    if not load or not m["boot"]:
        return []
    got, how = tail.p99_at(m.get("tail"), load, m["loads"], m["p99_us"])
    if how.startswith("the queue") and got is not None:
        x = float(np.interp(load, m["loads"], m["throughput"]))
        return [got * x / v for v in _boot_linear(m, load) if v > 0]
    return [v for b in m["boot"] if (v := usl.p99_at(load, m["loads"], b["p99"])) is not None]


def _bands(m: dict, load) -> tuple[tuple, tuple]:
    """The intervals, over the group's resamples, of a node's throughput by the linear baseline's
    interpolation and of p99 at ``load`` (each (None, None) without resamples or a load): how well
    the sweep knows its estimates (``_one_run``: where one fleet run may land)."""
    from rig.analysis import usl

    if not load or not m["boot"]:
        return (None, None), (None, None)
    return usl.interval(_boot_linear(m, load)), usl.interval(_boot_p99(m, load))


NEAR = 0.10  # a prediction within 10 % of what the fleet measured is near enough
WIDE = 2.0  # an interval whose high end is over twice its low end says little (as the plan's "how sure")


def _covered(row: dict) -> dict:
    """Whether the fleet's throughput and p99 fell inside the estimate's intervals (``_inside``),
    inside the intervals for one fleet run (``_inside_run``: the prediction intervals, ``_one_run``),
    each of the chosen model for throughput, and within ``NEAR`` of the predictions; None where
    there is no such interval or no prediction."""

    def inside(v, band):
        lo, hi = band or (None, None)
        return None if v is None or lo is None else bool(lo <= v <= hi)

    def near(err):
        return None if err is None else abs(err) <= NEAR * 100

    def span(band):
        lo, hi = band or (None, None)
        return hi / lo if lo and hi and lo > 0 else None

    tp = "usl" if row["by"] == "usl" else "linear"
    pis = {"throughput": row.get(f"predicted_{tp}_pi"), "p99": row.get("predicted_p99_pi")}
    return {
        "throughput_inside": inside(row["throughput"], row[f"predicted_{tp}_ci"]),
        "throughput_inside_run": inside(row["throughput"], pis["throughput"]),
        "throughput_near": near(row[f"error_{tp}_pct"]),
        "p99_inside": inside(row["p99_us"], row["predicted_p99_ci"]),
        "p99_inside_run": inside(row["p99_us"], pis["p99"]),
        "p99_near": near(row["error_p99_pct"]),
        # an interval for one run that spans more than WIDE covers too much to plan on: a fleet inside
        # it is not counted as covered (the plan asks for more measurement at the same size)
        **{f"{k}_run_span": span(v) for k, v in pis.items()},
    }


# the error each figure's coverage averages: the chosen model's, for throughput
_ERROR = {
    "throughput": lambda c: "error_usl_pct" if c.get("by") == "usl" else "error_linear_pct",
    "p99": lambda c: "error_p99_pct",
}


def _counts(c: dict, fig: str, key: str) -> bool:
    """Whether fleet row ``c`` counts as covered by ``key`` for ``fig`` (inside an interval for one
    run that spans more than ``WIDE`` does not)."""
    if key == "inside_run" and (c.get(f"{fig}_run_span") or 0) > WIDE:
        return False
    return bool(c.get(f"{fig}_{key}"))


def coverage(checked: list[dict]) -> dict:
    """Over the fleets checked against a prediction (pass one neighbour's rows: a fleet has one
    row per bench neighbour): for throughput and for p99, how many fell inside the estimate's
    interval (``inside``), inside the interval for one run (``inside_run``), within ``NEAR`` of the
    prediction (``near``), the fleets that did none of these (``missed``; inside an interval for
    one run that spans more than ``WIDE`` is not covered: ``wide`` counts those), and the mean
    unsigned error in % ({figure: {checked, inside, inside_run, wide, near, missed: [run_id, ...],
    mean_error}})."""
    rows = [c for c in checked if c.get("group") is not None]
    out = {}
    keys = ("inside", "inside_run", "near")
    for fig in ("throughput", "p99"):
        judged = [c for c in rows if any(c.get(f"{fig}_{k}") is not None for k in keys)]
        errors = [abs(e) for c in judged if (e := c.get(_ERROR[fig](c))) is not None]
        out[fig] = {
            "checked": len(judged),
            **{k: sum(_counts(c, fig, k) for c in judged) for k in keys},
            "wide": sum(bool(c.get(f"{fig}_inside_run")) and not _counts(c, fig, "inside_run") for c in judged),
            "missed": [c["run_id"] for c in judged if not any(_counts(c, fig, k) for k in keys)],
            "mean_error": sum(errors) / len(errors) if errors else None,
        }
    return out


def node_law(checked: list[dict], m: dict) -> dict | None:
    """How nodes add up, fitted over the fleet runs of ``m``'s node: each run's efficiency
    (measured over the nodes x one node's prediction at the run's load, by ``m``'s model) and
    ``usl.fit_nodes``. {sigma, kappa, nodes: the counts measured, efficiency: {count: the median
    efficiency of its runs}}; None where no run matches. The fit cannot go above linear, so where
    the efficiency rises with nodes (nodes serve more together than alone) it reads σ 0, κ 0, and
    ``efficiency`` is what shows it."""
    import statistics

    from rig.analysis import usl

    key = "predicted_usl" if m["by"] == "usl" else "predicted_linear"
    runs = [c for c in checked if c.get("group") is m and c.get(key) and c.get("throughput")]
    if not runs:
        return None
    got = usl.fit_nodes([c["nodes"] for c in runs], [c["throughput"] / c[key] for c in runs])
    counts = sorted({c["nodes"] for c in runs})
    eff = {n: statistics.median(c["throughput"] / c[key] for c in runs if c["nodes"] == n) for n in counts}
    return None if got is None else {"sigma": got[0], "kappa": got[1], "nodes": counts, "efficiency": eff}


# ---------------------------------------------------------------- as text
