"""`rig capacity --check`: the ``rig fleet`` runs of a store, measured as a bench point is, and
each compared with what the node's fitted model predicted for that many nodes (its throughput at
the p99 bound, its p99 at the fleet's load); how nodes add up, fitted from them
(``rig.analysis.capacity.plan`` fits the nodes themselves)."""

from __future__ import annotations

import math

import pandas as pd

from rig.analysis import tail
from rig.analysis.capacity import law as law_
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
    not in the store) and ``p99_us`` (their histograms merged); the master's (``_master``):
    ``master_cpu_s``, ``master_requests``, ``master_seconds``, ``master_host``, ``master_shares``."""
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
        *MASTER_COLS,
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
                **_master(totals, nodes, tags),
            }
        )
    return pd.DataFrame(out, columns=cols)


MASTER_COLS = ("master_cpu_s", "master_requests", "master_seconds", "master_host", "master_shares")


def _cpus(text) -> set[int] | None:
    """A CPU list as the kernel writes it (``0-3,8``) as a set; None where there is none."""
    if not isinstance(text, str) or not text.strip():
        return None
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _master(totals: pd.DataFrame, nodes: pd.DataFrame, tags: list[dict]) -> dict:
    """The master's figures over a fleet's rounds counted (its total rows): the CPU seconds it spent
    over their load, the requests and seconds of load they had, its host, and whether it shared the
    nodes' CPUs (``master_shares``: every node's machine is the master's, and the master's CPUs
    overlap a node's; None where the rows are older than that record)."""

    def col(df, name):
        return df[name] if name in df else pd.Series([None] * len(df), index=df.index, dtype=object)

    cpu = pd.to_numeric(col(totals, "master_cpu_s"), errors="coerce")
    timed = totals[cpu.notna()]
    hosts = {h for h in col(totals, "host") if isinstance(h, str)}
    node_hosts = list(col(nodes, "host"))
    shares = None
    if len(hosts) == 1 and node_hosts and all(isinstance(h, str) for h in node_hosts):
        (host,) = hosts
        mine = [_cpus(c) for c in col(totals, "master_cpus")]
        theirs = [_cpus(t["cpus"]) for t in tags]
        overlap = all(a is None or any(b is None or bool(a & b) for b in theirs) for a in mine)
        shares = all(h == host for h in node_hosts) and overlap
    return {
        "master_cpu_s": float(cpu.sum()) if len(timed) else None,
        "master_requests": int(timed["requests"].sum()) if len(timed) else None,
        "master_seconds": float(timed["seconds"].sum()) if len(timed) else None,
        "master_host": hosts.pop() if len(hosts) == 1 else None,
        "master_shares": shares,
    }


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


def check(models: list[dict], fleets: pd.DataFrame, master: str = law_.AUTO) -> list[dict]:
    """Each fleet run beside the prediction of every group it matches (the same Triton version,
    engine, model, node share and instance count), one row per bench neighbour (``neighbour``:
    the node alone, or beside a burner; ``none`` first), so that which bench condition predicts the
    fleet better shows. Each fleet is judged by a plan that did not see it: the group's law
    (``rig.analysis.capacity.law``: the node law, the master's cost, p99's bias) fitted over the
    group's *other* fleets (leave one out), its prior where there is none. Per row: the throughput
    of its nodes at its load (by the group's law and by the linear baseline's interpolation) with
    its intervals, the p99 at that load, the errors in % of the prediction (measured - predicted),
    and beside them the sweep's alone (``raw_*``: nodes that share nothing, no master, the sweep's
    p99). ``at_bound``: the fleet ran at the whole load the model puts at the p99 bound. A fleet
    no group matches is a row that says why. ``master``: ``rig capacity --master``."""
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
            rows.append(_raw_row({**row, "neighbour": nb}, f, by_neighbour[nb]))
    for r in rows:
        if r["group"] is not None:
            others = [o for o in rows if o["group"] is r["group"] and o["run_id"] != r["run_id"]]
            _predicted(r, law_.fit(r["group"], others, master))
    return rows


def raw(m: dict, load) -> dict:
    """What the sweep of group ``m`` alone says of one node at ``load``: its throughput by the USL and
    by the linear baseline's interpolation, and its p99 (``tail.p99_at``), each (estimate, its
    resamples'), with the intervals of those resamples (``usl_ci``, ``linear_ci``, ``p99_ci``) and how
    p99 was read (``p99_how``)."""
    import numpy as np

    from rig.analysis import usl

    law = m["fit"]
    per_usl = float(law.at(load)) if law is not None and load else None
    boot_usl = [float(usl.throughput(load, *b["params"])) for b in m["boot"] if b["params"]] if load else []
    per_lin = float(np.interp(load, m["loads"], m["throughput"])) if load else None
    p99, p99_how = tail.p99_at(m.get("tail"), load, m["loads"], m["p99_us"]) if load else (None, None)
    lin_band, p99_band = _bands(m, load)
    return {
        "usl": (per_usl, boot_usl if per_usl else []),
        "linear": (per_lin, _boot_linear(m, load) if per_lin else []),
        "p99": (p99, _boot_p99(m, load)),
        "usl_ci": usl.interval(boot_usl),
        "linear_ci": lin_band,
        "p99_ci": p99_band,
        "p99_how": p99_how,
    }


def _err(measured, predicted):
    return None if measured is None or not predicted else (measured - predicted) / predicted * 100


def _raw_row(row: dict, f: dict, m: dict) -> dict:
    """A fleet's row (``row``, from ``f``) with what group ``m``'s sweep alone predicted for it (nodes
    that share nothing: ``raw_*``), and what the law needs of it (``per_node``, ``raw_p99_us``)."""
    load, n = f["load"], f["nodes"]
    r = raw(m, load)
    per = r["usl"][0] if m["by"] == "usl" else r["linear"][0]
    p99 = r["p99"][0]
    whole = math.floor(m["load"] + 1e-9) if m["load"] else None
    law = m["fit"]
    row.update(
        group=m,
        by=m["by"],
        raw=r,
        per_node=per,
        raw_p99_us=p99 if p99 is not None and math.isfinite(p99) else None,
        raw_usl=n * r["usl"][0] if r["usl"][0] else None,
        raw_linear=n * r["linear"][0] if r["linear"][0] else None,
        raw_error_usl_pct=_err(f["throughput"], n * r["usl"][0] if r["usl"][0] else None),
        raw_error_linear_pct=_err(f["throughput"], n * r["linear"][0] if r["linear"][0] else None),
        raw_error_p99_pct=_err(f["p99_us"], p99 if p99 is not None and math.isfinite(p99) else None),
        predicted_p99_how=r["p99_how"],
        within_bound=f["p99_us"] is not None and f["p99_us"] <= m["p99_ms"] * 1000,
        at_bound=whole is not None and whole >= 1 and abs(load - whole) < 1e-9,
        extrapolated=law is not None and load is not None and not law.n_min <= load <= law.n_max,
    )
    return row


def _predicted(row: dict, law: dict) -> dict:
    """A fleet's row with what ``law`` (fitted without it) predicts for it, its errors and coverage."""
    got = law_.apply(row["group"], law, row["nodes"], row["raw"], row["load"], _known_bool(row.get("master_shares")))
    (usl_, usl_ci, usl_pi), (lin, lin_ci, lin_pi), (p99, p99_ci, p99_pi) = got["usl"], got["linear"], got["p99"]
    row.update(
        law=law,
        factors=got["factors"],
        p99_fleets=got["p99_fleets"],
        p99_by=got["p99_by"],
        predicted_usl=usl_,
        predicted_usl_ci=usl_ci,
        predicted_usl_pi=usl_pi,
        predicted_linear=lin,
        predicted_linear_ci=lin_ci,
        predicted_linear_pi=lin_pi,
        predicted_p99_us=p99,
        predicted_p99_ci=p99_ci,
        predicted_p99_pi=p99_pi,
        error_usl_pct=_err(row["throughput"], usl_),
        error_linear_pct=_err(row["throughput"], lin),
        error_p99_pct=_err(row["p99_us"], p99 if p99 is not None and math.isfinite(p99) else None),
    )
    row.update(_covered(row))
    return row


def _known_bool(v) -> bool | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else bool(v)


def expected(m: dict, load: float, nodes: int, law: dict | None = None) -> dict:
    """What a fleet of ``nodes`` at ``load`` requests in flight a node should measure, by group
    ``m`` and ``law`` (``rig.analysis.capacity.law.fit``; default its prior: no fleet seen): its
    throughput by the chosen model and its p99 at that load, each with the estimate's interval and
    the interval for one run, as ``--check`` judges a fleet the plan did not see; ``factors``: what
    the law multiplied the sweep's figures by."""
    law = law if law is not None else law_.fit(m, [])
    got = law_.apply(m, law, nodes, raw(m, load), load)
    tp = "usl" if m["by"] == "usl" else "linear"
    return {
        "throughput": got[tp][0],
        "throughput_ci": got[tp][1],
        "throughput_pi": got[tp][2],
        "p99_us": got["p99"][0],
        "p99_ci": got["p99"][1],
        "p99_pi": got["p99"][2],
        "factors": got["factors"],
        "p99_fleets": got["p99_fleets"],
        "p99_by": got["p99_by"],
        "per_node": raw(m, load)[tp][0],
        "raw_p99_us": raw(m, load)["p99"][0],
        "law": law,
    }


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
        # an interval that spans more than WIDE covers too much to plan on: a fleet inside it is not
        # counted as covered (the plan asks for more measurement at the same size); the estimate's
        # holds the law's uncertainty, so a law fitted over few, scattered fleets widens it too
        **{f"{k}_run_span": span(v) for k, v in pis.items()},
        "throughput_ci_span": span(row[f"predicted_{tp}_ci"]),
        "p99_ci_span": span(row["predicted_p99_ci"]),
    }


# the error each figure's coverage averages: the chosen model's, for throughput
_ERROR = {
    "throughput": lambda c: "error_usl_pct" if c.get("by") == "usl" else "error_linear_pct",
    "p99": lambda c: "error_p99_pct",
}


def _counts(c: dict, fig: str, key: str) -> bool:
    """Whether fleet row ``c`` counts as covered by ``key`` for ``fig`` (inside an interval, the
    estimate's or one run's, that spans more than ``WIDE`` does not)."""
    span = {"inside_run": "run_span", "inside": "ci_span"}.get(key)
    if span and (c.get(f"{fig}_{span}") or 0) > WIDE:
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
            "wide": sum(
                any(bool(c.get(f"{fig}_{k}")) for k in ("inside", "inside_run"))
                and not any(_counts(c, fig, k) for k in keys)
                for c in judged
            ),
            "missed": [c["run_id"] for c in judged if not any(_counts(c, fig, k) for k in keys)],
            "mean_error": sum(errors) / len(errors) if errors else None,
        }
    return out


def node_law(checked: list[dict], m: dict, master: str = law_.AUTO) -> dict | None:
    """The law of ``m``'s nodes in a fleet (``rig.analysis.capacity.law.fit``) over every fleet run
    checked against ``m``: the law the plan states and expects by (σ, κ, the level, the master, p99's
    bias; ``efficiency``: {count: the median of its runs' measured over the nodes x one node's
    prediction at the run's load, the master counted}); None where no run matches. σ and κ cannot go
    below 0 (nodes that serve more together than alone): where fleets served more than the sweep's
    nodes, that is the level, and ``efficiency`` shows it."""
    runs = [c for c in checked if c.get("group") is m and c.get("per_node") and c.get("throughput")]
    return law_.fit(m, runs, master) if runs else None


# ---------------------------------------------------------------- as text
