"""What a plan knows of a fleet beyond one node's sweep, fitted over the `rig fleet` runs it saw (its
prior where it saw none): how nodes add up (the node law: σ and κ over nodes, and a level where the
fleets' nodes served more than the sweep's), what the fleet's master costs the nodes and whether it
shares their CPUs, and how far a fleet's p99 lands from the sweep's (Little's law through the
throughput, the rest measured as a bias). ``fit`` fits them; ``apply`` turns them into what a fleet
of n nodes at a load should measure, with the estimate's interval and the interval for one run.

`rig capacity --check` judges each fleet by ``fit`` over the *other* fleets of its node (leave one
out), so that no fleet is judged by a law fitted to it; the plan's ``expect:`` line uses ``fit``
over every fleet it saw: the law it prints.

A fleet seen is a dict (``rig.analysis.capacity.fleet``'s rows): ``run_id``, ``nodes``, ``load``,
``throughput`` and ``p99_us`` (measured), ``per_node`` (one node's throughput at its load by the
sweep's chosen model), ``raw_p99_us`` (the sweep's p99 at that load), and the master's figures:
``master_cpu_s``, ``master_requests``, ``master_seconds``, ``master_shares``.
"""

from __future__ import annotations

import math

import numpy as np

from rig.analysis import usl

# The prior, where a plan saw no fleet of its node: nodes that share nothing (σ 0, κ 0, level 1), give
# or take the spread of 2-node fleets' throughput over their sweeps' that this project measured on one
# machine (docs/measurements/capacity.md and issue 64: 13 fleets of 3 models, -9 % to +11 %): a
# log-normal of 0.07 (their rms log ratio); a fleet's p99 by Little's law through that, give or take
# the spread of those fleets' p99 over their sweeps' (-25 % to +31 %): 0.19.
PRIOR_THROUGHPUT_SD = 0.07
PRIOR_P99_SD = 0.19
# The master's CPU a request where no fleet seen measured it: the rig's own Locust master, which
# handles no request (the nodes report once a round), measured over 21 two-node fleets on this
# project's VM (docs/measurements/capacity.md, issue 64): 0.2-1.1 us a request, 0.43 pooled; about
# 0.44 % of one CPU whatever the load (its cost goes with time more than with requests).
MASTER_PRIOR_CPU_PER_REQUEST = 0.43e-6
LAW_DRAWS = 2000  # draws of the law (and of p99's bias) for the intervals
NEAR_DEVIATIONS = 4  # one run's deviations are drawn from the sweep's loads nearest the fleet's: at least this many
AUTO, SHARES, ELSEWHERE = "auto", "shares", "elsewhere"  # rig capacity --master


def master_factor(cpu_per_request: float | None, per_node: float | None, share: float | None) -> float:
    """What a master on the nodes' CPUs leaves a node: serving ``per_node`` infer/s alone on ``share``
    CPUs, with the master taking ``cpu_per_request`` CPU seconds a request of the fleet's, spread over
    every node's CPUs, a node keeps ``1 / (1 + c x / share)`` of its throughput (its CPU time shrinks
    by the master's share of it, and its throughput with it). 1 without a cost."""
    if not cpu_per_request or not per_node or not share or share <= 0:
        return 1.0
    return 1.0 / (1.0 + cpu_per_request * per_node / share)


def efficiency(law: dict, n: float) -> float:
    """A node's part in a fleet of ``n`` by the law: level / (1 + σ(n - 1) + κn(n - 1))."""
    return law["level"] / (1 + law["sigma"] * (n - 1) + law["kappa"] * n * (n - 1))


def _share(m: dict) -> float:
    share = m.get("cpu_share")
    return float(share) if share is not None and not (isinstance(share, float) and math.isnan(share)) else 1.0


def _master(m: dict, seen: list[dict], master: str) -> dict:
    """Whether the plan counts the master on the nodes' CPUs, why, and its cost: {shares, why,
    cpu_per_request, cpus (the master's CPUs busy, where measured), measured (fleets measured)}."""
    cost = [f for f in seen if _known(f.get("master_cpu_s")) and f.get("master_requests")]
    cpu = sum(f["master_cpu_s"] for f in cost)
    per_request = cpu / sum(f["master_requests"] for f in cost) if cost else MASTER_PRIOR_CPU_PER_REQUEST
    seconds = sum(f.get("master_seconds") or 0 for f in cost)
    known = [bool(f["master_shares"]) for f in seen if _known(f.get("master_shares"))]
    if master == SHARES:
        shares, why = True, "--master shares"
    elif master == ELSEWHERE:
        shares, why = False, "--master elsewhere"
    elif known:
        shares = sum(known) * 2 > len(known)
        why = (
            "the fleets seen ran it on their nodes' host and CPUs"
            if shares
            else "the fleets seen ran it on another host or other CPUs"
        )
    else:
        shares, why = False, "assumed: no fleet seen recorded where its master ran; --master shares counts it"
    beside = str(m.get("neighbour") or "")
    return {
        "shares": shares,
        "why": why,
        "cpu_per_request": per_request,
        "cpus": cpu / seconds if cost and seconds > 0 else None,
        "measured": len(cost),
        # a sweep beside a neighbour already lost the CPU a master would take: not counted twice
        "in_neighbour": beside.startswith("burn:"),
    }


def _known(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def counted(law: dict, shares: bool | None = None) -> float | None:
    """The master's CPU a request the expectation counts (None: not counted): where it shares the
    nodes' CPUs (``shares``: a fleet's own record; default the law's) and the sweep's neighbour does
    not already stand for it."""
    mst = law["master"]
    on = mst["shares"] if shares is None else shares
    return mst["cpu_per_request"] if on and not mst["in_neighbour"] else None


def _fit_nodes(ns: np.ndarray, es: np.ndarray) -> tuple[float, float, float]:
    """(level, σ, κ) from fleets of ``ns`` nodes at efficiencies ``es``: a level from 1-node fleets
    where there are some (the fleet against the sweep, before any other node); σ and κ by
    ``usl.fit_nodes`` over the rest, relative to it; where they read 0 (nodes served as much together
    as the sweep's alone, or more), the level is what the fleets served over the sweep (at least 1)."""
    ones = ns == 1
    level = float(np.exp(np.mean(np.log(es[ones])))) if ones.any() else 1.0
    got = usl.fit_nodes(ns, es / level)
    sigma, kappa = got if got is not None else (0.0, 0.0)
    if not ones.any() and sigma == 0 and kappa == 0:
        level = max(1.0, float(np.exp(np.mean(np.log(es)))))
    return level, sigma, kappa


def _fit_draws(ns: np.ndarray, es: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_fit_nodes`` over each row of ``es`` (draws x fleets): (levels, σs, κs). Fleets of one node
    count above 1 (the usual check: 2-node fleets) in closed form, as ``usl.fit_nodes`` has it; else
    one fit a draw."""
    if np.unique(ns).size == 1 and ns[0] > 1:
        sigma = np.maximum(0.0, np.mean(1 / es - 1, axis=1) / (ns[0] - 1))
        level = np.where(sigma == 0, np.maximum(1.0, np.exp(np.mean(np.log(es), axis=1))), 1.0)
        return level, sigma, np.zeros_like(sigma)
    lv, sg, kp = zip(*(_fit_nodes(ns, row) for row in es))
    return np.array(lv, dtype=float), np.array(sg, dtype=float), np.array(kp, dtype=float)


def _pool(devs, residuals: list[float]) -> np.ndarray:
    """One run's deviations to draw from: the sweep's (``Sweep.deviations``) and, from two fleets
    on, the fleets' own about the law (scaled by sqrt(k / (k - 1)), as one more run strays further)."""
    out = [float(d) for d in (devs if devs is not None else [])]
    k = len(residuals)
    if k >= 2:
        mean = sum(residuals) / k
        out += [(r - mean) * math.sqrt(k / (k - 1)) for r in residuals]
    return np.asarray(out, dtype=float)


def near(devs: dict | None, figure: str, load) -> np.ndarray:
    """One run's deviations of ``figure`` (``Sweep.deviations``) at the sweep's loads nearest ``load``
    (by their log ratio), the nearest first, until ``NEAR_DEVIATIONS`` are taken: how far one
    measurement strays depends on the load (a light load's p99 is a rare stall's, a heavy load's
    the queue's). All of them where the loads are not recorded or ``load`` is None."""
    d = np.asarray((devs or {}).get(figure, []), dtype=float)
    at = (devs or {}).get(f"{figure}_load")
    if not load or load <= 0 or at is None or len(at) != d.size or not d.size:
        return d
    at = np.asarray(at, dtype=float)
    keep: list[float] = []
    for v in sorted({float(x) for x in at if x > 0}, key=lambda v: abs(math.log(v / load))):
        keep.append(v)
        if np.isin(at, keep).sum() >= NEAR_DEVIATIONS:
            break
    return d[np.isin(at, keep)]


def _draw(rng, pool: np.ndarray, size, sd: float) -> np.ndarray:
    """Deviations drawn from ``pool``; from a log-normal of ``sd`` where the pool is empty."""
    return rng.choice(pool, size) if pool.size else rng.normal(0.0, sd, size)


def fit(m: dict, seen: list[dict], master: str = AUTO) -> dict:
    """The law of group ``m``'s nodes in a fleet from the fleets ``seen`` (its prior without one):
    {prior, seen (run ids), nodes (counts seen), efficiency ({count: median}), level, sigma, kappa,
    ci ({sigma, kappa, level: (lo, hi)}), draws (level, σ, κ arrays of ``LAW_DRAWS``: each fleet's
    efficiency perturbed by one run's deviation, refitted; the prior's spread without a fleet),
    master (``_master``), p99 (``_p99_bias``), resid (the fleets' log efficiency about the law),
    sweep_devs (the sweep's deviations, ``Sweep.deviations``)}."""
    rng = np.random.default_rng(1)
    mst = _master(m, seen, master)
    devs = m.get("deviations") or {}
    use = [f for f in seen if f.get("per_node") and f.get("throughput")]
    ns = np.array([f["nodes"] for f in use], dtype=float)
    es = np.array([_efficiency(f, m, mst) for f in use], dtype=float)
    law = {"prior": not use, "seen": [f["run_id"] for f in use], "master": mst}
    if use:
        level, sigma, kappa = _fit_nodes(ns, es)
        law.update(level=level, sigma=sigma, kappa=kappa)
        resid = [float(np.log(e / efficiency(law, n))) for n, e in zip(ns, es)]
        pool = _pool(near(devs, "throughput", float(np.median([f["load"] or 0 for f in use]))), resid)
        lv, sg, kp = _fit_draws(ns, es * np.exp(_draw(rng, pool, (LAW_DRAWS, len(es)), PRIOR_THROUGHPUT_SD)))
        counts = sorted({int(n) for n in ns})
        eff = {n: float(np.median(es[ns == n])) for n in counts}
    else:
        law.update(level=1.0, sigma=0.0, kappa=0.0)
        resid = []
        lv = np.exp(rng.normal(0.0, PRIOR_THROUGHPUT_SD, LAW_DRAWS))
        sg, kp, counts, eff = np.zeros(LAW_DRAWS), np.zeros(LAW_DRAWS), [], {}
    law.update(
        nodes=counts,
        efficiency=eff,
        draws=(lv, sg, kp),
        ci={"sigma": usl.interval(sg.tolist()), "kappa": usl.interval(kp.tolist()), "level": usl.interval(lv.tolist())},
        resid=resid,
        sweep_devs=devs,
        p99=_p99_bias(use, m),
    )
    return law


def _efficiency(f: dict, m: dict, mst: dict) -> float:
    """A fleet's throughput over what its nodes would serve sharing nothing, its master counted where
    it shared the nodes' CPUs (its own record: a fact of that fleet, whatever the plan assumes of the
    next; the plan's assumption where it has none) at its own measured cost (the plan's where it
    measured none)."""
    shares = bool(f["master_shares"]) if _known(f.get("master_shares")) else mst["shares"]
    cost = None
    if shares and not mst["in_neighbour"]:
        own = _known(f.get("master_cpu_s")) and f.get("master_requests")
        cost = f["master_cpu_s"] / f["master_requests"] if own else mst["cpu_per_request"]
    return f["throughput"] / (f["nodes"] * f["per_node"] * master_factor(cost, f["per_node"], _share(m)))


def _p99_bias(use: list[dict], m: dict) -> dict:
    """p99 in the fleets seen against the sweep's at their loads: per fleet, ``total`` (log of measured
    over the sweep's p99) and ``left`` (that less what Little's law explains: a closed loop whose nodes
    serve e of the sweep's waits 1 / e as long, so less log(1 / e), e measured); {total, left, nodes
    (each fleet's count)}."""
    ok = [f for f in use if f.get("p99_us") and f.get("raw_p99_us") and math.isfinite(f["raw_p99_us"])]
    total = {f["run_id"]: math.log(f["p99_us"] / f["raw_p99_us"]) for f in ok}
    left = {k: t + math.log(f["throughput"] / (f["nodes"] * f["per_node"])) for (k, t), f in zip(total.items(), ok)}
    return {"total": total, "left": left, "nodes": {f["run_id"]: f["nodes"] for f in use}}


def p99_bias(law: dict, n: int, rng, devs: np.ndarray) -> tuple[float, np.ndarray, list[str], str]:
    """p99's bias for a fleet of ``n`` nodes, as a log ratio to the sweep's p99, its ``LAW_DRAWS``
    draws (one run's p99 deviation, from ``devs`` and the fleets' own about their mean, over
    sqrt(k) for k fleets), the fleets it is over and how (``by``): ``measured`` where fleets of ``n``
    nodes were seen (their mean total ratio: Little's law is in it); ``little`` where only other
    node counts were (their mean ratio left after Little's law, which the caller applies at ``n``);
    ``prior`` without any (0, a log-normal of ``PRIOR_P99_SD``, Little's law applied by the caller)."""
    nodes = law["p99"]["nodes"]
    same = [k for k in law["p99"]["total"] if nodes.get(k) == n]
    vals, by = (
        ([law["p99"]["total"][k] for k in same], "measured") if same else (list(law["p99"]["left"].values()), "little")
    )
    over = same or list(law["p99"]["left"])
    if not vals:
        return 0.0, rng.normal(0.0, PRIOR_P99_SD, LAW_DRAWS), [], "prior"
    k = len(vals)
    pool = _pool(devs, vals)
    mean = sum(vals) / k
    spread = np.mean([_draw(rng, pool, LAW_DRAWS, PRIOR_P99_SD) for _ in range(k)], axis=0)
    return mean, mean + spread, over, by


def apply(m: dict, law: dict, n: int, raw: dict, load: float | None = None, shares: bool | None = None) -> dict:
    """What a fleet of ``n`` nodes should measure by the law: ``raw`` (``fleet.raw``: one node's
    throughput by the USL and the linear baseline, each with its resamples, and the sweep's p99 with
    its resamples, at the fleet's load) times the master's factor, the law's efficiency at ``n``
    (and, for p99, Little's law and the bias): {usl, linear: (estimate, ci, pi), p99: (estimate, ci,
    pi), factors: {efficiency, master, little, bias}, p99_fleets}. One run's deviations are the
    sweep's at the loads nearest ``load`` (``near``). ``shares``: the fleet's own record of where
    its master ran, where known."""
    rng = np.random.default_rng(0)
    pools = {
        "throughput": _pool(near(law["sweep_devs"], "throughput", load), law["resid"]),
        "p99": near(law["sweep_devs"], "p99", load),
    }
    lv, sg, kp = law["draws"]
    e_draws = lv / (1 + sg * (n - 1) + kp * n * (n - 1))
    e = efficiency(law, n)
    cost, share = counted(law, shares), _share(m)
    out: dict = {}
    for which in ("usl", "linear"):
        x, boot = raw[which]
        if x is None:
            out[which] = (None, (None, None), (None, None))
            continue
        base = np.asarray([b for b in boot if b is not None and math.isfinite(b)] or [x], dtype=float)
        pick = rng.choice(base, LAW_DRAWS)
        draws = n * pick / (1.0 + (cost or 0.0) * pick / share) * e_draws  # master_factor, over every draw
        ci = usl.interval(draws.tolist()) if len(boot) else (None, None)
        out[which] = (n * x * master_factor(cost, x, share) * e, ci, _one_run(draws, pools["throughput"], rng))
    chosen = "usl" if m.get("by") == "usl" else "linear"
    x = raw[chosen][0]
    f = master_factor(cost, x, share) if x else 1.0
    bias, bias_draws, over, by = p99_bias(law, n, rng, pools["p99"])
    p99, boot = raw["p99"]
    little = 1.0 / (f * e)
    # fleets of n nodes seen: their ratio to the sweep holds Little's law already (their own efficiency)
    ratio, ratio_draws = (1.0, 1.0) if by == "measured" else (little, 1.0 / (f * e_draws))
    if p99 is None or not math.isfinite(p99):
        out["p99"] = (p99, (None, None), (None, None))
    else:
        base = np.asarray([b for b in boot if b is not None and math.isfinite(b)] or [p99], dtype=float)
        draws = rng.choice(base, LAW_DRAWS) * ratio_draws * np.exp(bias_draws)
        ci = usl.interval(draws.tolist()) if len(boot) else (None, None)
        out["p99"] = (p99 * ratio * math.exp(bias), ci, _one_run(draws, pools["p99"], rng))
    # shown as Little's law at n times the rest, whichever way it was measured
    out["factors"] = {"efficiency": e, "master": f, "little": little, "bias": ratio * math.exp(bias) / little}
    out["p99_fleets"] = over
    out["p99_by"] = by
    return out


def _one_run(draws: np.ndarray, pool: np.ndarray, rng) -> tuple:
    """The 95 % interval for one fleet run: the estimate's draws, each times one run's deviation
    drawn from ``pool`` (the sweep's repeats' from their pools, and the fleets' about the law:
    ``_pool``); (None, None) where there is none to draw (one repeat a load in one run)."""
    if not pool.size:
        return (None, None)
    return usl.interval((draws * np.exp(rng.choice(pool, draws.size))).tolist())
