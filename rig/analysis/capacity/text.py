"""`rig capacity`'s text: a fitted model's answer per target (nodes with an interval, the model
that gave them) and a fleet check's predicted-against-measured lines (``rig.analysis.capacity.plan``
computes them)."""

from __future__ import annotations

import math

from rig.analysis.capacity.plan import capacity_of, nodes
from rig.analysis.capacity.tags import HELD_TEXT, share_text


def _f(v, fmt="{:,.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def _ci(v, ci, fmt="{:,.0f}") -> str:
    lo, hi = ci if ci else (None, None)
    return _f(v, fmt) + (f" ({_f(lo, fmt)}-{_f(hi, fmt)})" if lo is not None else "")


def _ci_pi(v, ci, pi, fmt="{:,.0f}") -> str:
    """An estimate with its interval, and where one fleet run may land (its prediction interval)."""
    lo, hi = pi if pi else (None, None)
    return (
        _ci(v, ci, fmt)[:-1] + f"; one run {_f(lo, fmt)}-{_f(hi, fmt)})"
        if lo is not None and ci and ci[0] is not None
        else (_ci(v, ci, fmt) + (f" (one run {_f(lo, fmt)}-{_f(hi, fmt)})" if lo is not None else ""))
    )


def _param(v) -> str:
    return "-" if v is None else (f"{v:.3g}" if v else "0")


def _pct(v) -> str:
    return "-" if v is None else f"{v:+.1f} %"


def format_model(m: dict, targets: list[float], headroom: float, law: dict | None) -> str:
    """One node's model as text: the law with its intervals, the load and throughput at the
    bound, the nodes for each target (by the USL and by the linear baseline; nodes adding up
    linearly, or as fitted over fleet runs), which model answers and how far it is measured."""
    loads = ", ".join(f"{v:g}" for v in m["loads"])
    inst = "" if m["instances"] is None else f" ({m['instances']} instance(s))"
    runs = m["spread"]["runs"]
    if not m["boot"]:
        boot = "no interval: one repeat a load (bench --repeats 3 gives them)"
    elif runs > 1:
        boot = f"95 % intervals over {len(m['boot']):,} resamples of the {runs} runs, then of their repeats"
    else:
        boot = f"95 % intervals over {len(m['boot']):,} resamples of one run's repeats"
    out = [
        f"  model of one node{inst}: {m['n_repeats']} repeat(s) over loads {loads}; {boot}",
        _spread_line(m["spread"]),
        _law_line(m["fit"], m["ci"]),
        _bound_line(m),
        *_tail_line(m.get("tail")),
    ]
    if law is None:
        from rig.analysis.capacity.law import fit

        law = fit(m, [])  # the prior: no fleet of this node seen
    sigma, kappa, level = law["sigma"], law["kappa"], law["level"]
    measured_nodes = max(law["nodes"]) if law["nodes"] else 1
    far, beyond = _node_table(m, targets, headroom, law, out)
    answer = {"usl": "the USL", "linear": "the linear baseline", None: "none"}[m["by"]]
    out.append(f"    answer: {answer} ({m['why']}); {_law_text(law)}")
    out.extend(_efficiency_lines(law, m.get("neighbour")))
    out.append(_master_line(law, m))
    if beyond:
        top = math.sqrt((1 - sigma) / kappa) if kappa > 0 else math.inf  # nodes where the fitted law peaks
        most = (
            (capacity_of(m) or 0)
            * level
            * (top / (1 + sigma * (top - 1) + kappa * top * (top - 1)) if kappa > 0 else 1 / sigma)
        )
        out.append(
            f"    unreachable: nodes that add up as fitted never serve more than {_f(most)} infer/s together "
            f"(at {1 - headroom:.0%}: {_f(most * (1 - headroom) if most else None)}), whatever their number; "
            "fitted over few node counts, so measure more before trusting it"
        )
    if far:
        out.append(
            f"    trust: loads {m['loads'][0]:g}-{m['loads'][-1]:g} measured, {measured_nodes} node(s) at most; "
            f"{min(far):,} node(s) and more are extrapolations (they assume nodes that share nothing: the "
            "balancer, network and store scaling with them)"
        )
    if m["load"] is not None and m["load"] >= 1:
        whole = math.floor(m["load"] + 1e-9)
        held = " --cpu-idle hold" if HELD_TEXT in (m.get("neighbour") or "") else ""
        out.append(
            f"    to check it: a fleet at {whole} request(s) in flight a node, e.g. rig fleet --nodes 2 --users "
            f"{2 * whole} (nodes: rig soak --locust-master HOST:PORT --cpus ... --in-flight 1{held}), then "
            "rig capacity --check"
        )
        out.extend(_expect_lines(m, whole, 2, law))
    return "\n".join(out)


def _law_text(law: dict) -> str:
    """How the plan's nodes add up: the node law fitted over the fleets it saw, with its interval, or
    the prior."""
    from rig.analysis.capacity.law import PRIOR_THROUGHPUT_SD

    if law["prior"]:
        return (
            "nodes add up linearly (no fleet run of this node: assumed, not measured; the prior: σ 0, κ 0, "
            f"give or take {math.expm1(1.96 * PRIOR_THROUGHPUT_SD):.0%} at 95 %, the spread of 2-node fleets over "
            "their sweeps measured on one machine)"
        )
    lo, hi = law["ci"]["sigma"]
    counts = ", ".join(map(str, law["nodes"]))
    llo, lhi = law["ci"]["level"]
    level = (
        f"; each node served {law['level']:.3g}x ({_param(llo)}-{_param(lhi)}) the sweep's node (a level over "
        "every node count: σ and κ cannot go below 0)"
        if law["level"] != 1
        else ""
    )
    return (
        f"nodes add up as fitted over fleet runs of {counts} node(s): σ {_param(law['sigma'])} "
        f"({_param(lo)}-{_param(hi)}), κ {_param(law['kappa'])}{level} ({len(law['seen'])} fleet(s))"
    )


def _master_line(law: dict, m: dict) -> str:
    """Where the plan puts the fleet's master (Locust's, ``rig fleet``), what it costs, and whether the
    expectation counts it."""
    mst = law["master"]
    cost = mst["cpu_per_request"] * 1e6
    source = f"measured over {mst['measured']} fleet(s)" if mst["measured"] else "the rig's master as measured here"
    busy = f", {mst['cpus']:.3g} CPU while they ran" if mst["cpus"] is not None else ""
    if not mst["shares"]:
        return (
            f"    master: elsewhere, not counted ({mst['why']}); on the nodes' CPUs it would take {cost:.2g} us "
            f"of CPU a request ({source}{busy})"
        )
    if mst["in_neighbour"]:
        return (
            f"    master: on the nodes' CPUs ({mst['why']}), {cost:.2g} us of CPU a request ({source}{busy}); "
            f"this sweep ran beside {m.get('neighbour')}, which stands for it: not counted again"
        )
    from rig.analysis.capacity.law import master_factor

    x = capacity_of(m)
    share = m.get("cpu_share") or 1.0
    keeps = master_factor(mst["cpu_per_request"], x, share)
    pct = max(1, math.ceil(100 * mst["cpu_per_request"] * (x or 0) / share))
    return (
        f"    master: on the nodes' CPUs, counted ({mst['why']}): {cost:.2g} us of CPU a request ({source}{busy}); "
        f"a node at the bound keeps {keeps:.3f} of its throughput; to sweep beside a master-sized neighbour: "
        f"rig bench ... --neighbour burn:{pct}"
    )


def _expect_lines(m: dict, load: int, nodes: int, law: dict) -> list[str]:
    """What such a fleet should measure, by the law the plan states: the estimate with its interval,
    and where one run may land (the interval ``--check`` covers a fleet with), for throughput and p99;
    then what the sweep's figures were multiplied by."""
    from rig.analysis.capacity.fleet import WIDE, expected

    e = expected(m, load, nodes, law)
    over = [
        f"{name} ({hi / lo:.1f}x)"
        for name, (lo, hi) in (
            ("throughput's estimate", e["throughput_ci"]),
            ("throughput's one run", e["throughput_pi"]),
            ("p99's estimate", e["p99_ci"]),
            ("p99's one run", e["p99_pi"]),
        )
        if lo and hi and hi / lo > WIDE
    ]
    wide = (
        f"; too wide to plan on, spanning more than {WIDE:g}x: {', '.join(over)}: the sweep's repeats (or the "
        "fleets the law is fitted over) disagree, measure more of them"
        if over
        else ""
    )
    expect = (
        f"    expect: {nodes} such nodes measure {_ci_pi(e['throughput'], e['throughput_ci'], e['throughput_pi'])} "
        f"infer/s together and p99 {_ci_pi(e['p99_us'], e['p99_ci'], e['p99_pi'])} us (95 %: the estimate's "
        f"interval; one run: where a single fleet run may land, which the run-to-run spread above sets){wide}"
    )
    return [
        expect,
        "      = "
        + _factors_text(nodes, e["per_node"], e["raw_p99_us"], e["factors"], law, e["p99_fleets"], e["p99_by"]),
    ]


def _factors_text(nodes: int, per_node, raw_p99, fx: dict, law: dict, p99_fleets=None, p99_by="prior") -> str:
    """The sweep's figures and what the law multiplied them by: the node law's efficiency, the
    master's factor, Little's law and p99's bias (measured over which fleets: of as many nodes, or of
    other counts with Little's law carrying it across; or the prior's)."""
    from rig.analysis.capacity.law import PRIOR_P99_SD

    node = (
        f"the prior at {nodes} nodes: nodes that share nothing"
        if law["prior"]
        else f"the node law above at {nodes} nodes"
    )
    master = f" x {fx['master']:.3f} (the master on the nodes' CPUs)" if fx["master"] != 1 else ""
    if p99_fleets:
        which = f"of {nodes} nodes" if p99_by == "measured" else "of other node counts, carried by Little's law"
        names = ", ".join(p99_fleets)
        bias = f"{fx['bias']:.3g} (the bias left, measured over {len(p99_fleets)} fleet(s) {which}: {names})"
    else:
        bias = f"1 (no fleet seen: the prior's bias, none, give or take {math.expm1(1.96 * PRIOR_P99_SD):.0%} at 95 %)"
    return (
        f"{nodes} x {_f(per_node)} infer/s a node x {fx['efficiency']:.3g} ({node}){master}; "
        f"p99: the sweep's {_f(raw_p99)} us x {fx['little']:.3g} (Little's law: the nodes serve "
        f"{1 / fx['little']:.3g} of the sweep's) x {bias}"
    )


def _efficiency_lines(law: dict | None, neighbour: str | None) -> list[str]:
    """The fleets' efficiency (measured over the nodes' predicted sum) per node count, and what it
    says where it rises with nodes: the node law cannot go above linear, so it shows only here."""
    eff = (law or {}).get("efficiency") or {}
    if not eff:
        return []
    counts = sorted(eff)
    out = [
        "    fleets measured over predicted (nodes sharing nothing would read 1): "
        + ", ".join(f"{eff[n]:.2f} at {n} node(s)" for n in counts)
    ]
    from rig.analysis.capacity.fleet import NEAR

    first, last = eff[counts[0]], eff[counts[-1]]
    if len(counts) > 1 and last > first * (1 + NEAR):
        held = HELD_TEXT in (neighbour or "")
        hint = (
            "this sweep held its CPUs awake, as a full host keeps them"
            if held
            else "a host the other nodes keep busy wakes a node's threads sooner than an idle one; a sweep "
            "with the CPUs held awake (rig bench --cpu-idle hold, the default) measures a node on a full host"
        )
        out.append(
            f"    nodes served more together than alone (+{last / first - 1:.0%} a node from {counts[0]} to "
            f"{counts[-1]} nodes), which the node law, at most linear, leaves out: {hint}"
        )
    return out


def _spread_line(spread: dict) -> str:
    """How far the sweep's own measurements moved: between runs, and between one run's repeats."""
    within = spread["within_runs"]
    rounds = (
        f"a run's repeats of a load within {within:.0%} of their median (its largest range)"
        if within is not None
        else "one repeat a load in each run"
    )
    if spread["between_runs"] is None:
        return (
            f"    spread seen: {rounds}; one run, so the interval leaves out what moves between runs (another "
            "rig bench at another time, into the same results, brings that in)"
        )
    return (
        f"    spread seen: {spread['runs']} runs' throughput at a load within {spread['between_runs']:.0%} of their "
        f"median (the largest range); {rounds}"
    )


def _tail_line(t: dict | None) -> list[str]:
    """Which p99 model is kept (rig.analysis.tail), with each one's error measured on this sweep."""
    if not t or t["queue"] is None:
        return []
    if t["compared"]:
        kept = (
            f"between the loads measured, {'the queue' if t['chosen'] == 'queue' else 'interpolation'} (each inner "
            f"load predicted from the others: the queue {_f(t['queue_error'], '{:.1f}')} %, interpolation "
            f"{_f(t['interpolation_error'], '{:.1f}')} % mean error over {t['compared']} load(s))"
        )
    else:
        kept = "between the loads measured, interpolation (no inner load to compare the two on)"
    beyond = (
        f"; beyond them, the queue ({t['queue'].servers} server(s); the largest load predicted from the others: "
        f"{_pct(t['beyond_error'])})"
    )
    return [f"    p99 at loads not measured: {kept}{beyond}"]


def _law_line(fit, ci: dict) -> str:
    """The fitted USL with its intervals and where throughput peaks."""
    if fit is None:
        return "    USL: not fitted (fewer than 2 loads measured)"
    peak = fit.peak
    if peak <= 1:
        where = "; throughput is highest at one request in flight (σ near 1: more in flight only queues)"
    elif math.isfinite(peak):
        where = f"; throughput peaks at load {peak:.3g} ({_f(float(fit.at(peak)))} infer/s)"
    else:
        where = f"; no peak (κ 0): throughput tends to {_f(fit.lam / fit.sigma) if fit.sigma else 'infinity'}"
    return (
        f"    USL: λ {_ci(fit.lam, ci['lam'])} infer/s, σ {_param(fit.sigma)} "
        f"({_param(ci['sigma'][0])}-{_param(ci['sigma'][1])}), κ {_param(fit.kappa)} "
        f"({_param(ci['kappa'][0])}-{_param(ci['kappa'][1])}); fits within {fit.rms_rel:.1%} (rms){where}"
    )


def _bound_line(m: dict) -> str:
    """The load and a node's throughput at the latency bound."""
    ci, bound = m["ci"], f"p99 <= {m['p99_ms']:g} ms"
    if m["load"] is None:
        return (
            f"    at {bound}: no load measured met it (the least, {m['loads'][0]:g}, had p99 "
            f"{_f(m['p99_us'][0])} us or errors)"
        )
    how = {
        "within": "interpolated between the loads measured",
        "not reached": "the bound was not reached: the largest load measured, never beyond",
    }[m["how"]]
    lin = (
        f"; the linear baseline (best point measured, {m['point_linear']:g}): "
        f"{_ci(m['cap_linear'], ci['cap_linear'])} infer/s"
        if m["cap_linear"] is not None
        else ""
    )
    return (
        f"    at {bound}: load {_ci(m['load'], ci['load'], '{:.3g}')} ({how}); a node serves "
        f"{_ci(m['cap_usl'], ci['cap_usl'])} infer/s by the USL{lin}"
    )


def _node_table(m: dict, targets: list[float], headroom: float, law: dict, out: list[str]) -> tuple:
    """The nodes each target needs, appended to ``out``; returns (node counts beyond those
    measured, whether a target is unreachable for nodes that add up as fitted)."""
    sigma, kappa, level = law["sigma"], law["kappa"], law["level"]
    measured_nodes = max(law["nodes"]) if law["nodes"] else 1
    fitted = not law["prior"]
    columns = [("usl", (sigma, kappa), level), ("linear", (sigma, kappa), level)] + (
        [("usl", (0.0, 0.0), 1.0)] if fitted else []
    )
    if targets:
        out.append(
            f"    nodes, each at {1 - headroom:.0%} of that:  {'target infer/s':>15}  {'USL':>16}  "
            f"{'linear baseline':>16}" + (f"  {'USL, nodes linear':>17}" if fitted else "")
        )
    far, beyond, unsure, wide = [], False, 0.0, []
    for t in targets:
        cells = []
        for which, adds, lv in columns:
            got = nodes(m, t, headroom, adds, which, level=lv)
            if m["cap_usl" if which == "usl" else "cap_linear"] is None:
                cells.append("-")
            elif got["unreachable"]:
                cells.append("unreachable")
                beyond = beyond or adds != (0.0, 0.0)
            else:
                lo, hi = got["low"], got["high"]
                if lo is not None and hi is not None and hi > 2 * max(lo, 1):
                    wide.append(t)
                star = "*" if got["unreachable_share"] else ""
                unsure = max(unsure, got["unreachable_share"])
                cells.append(f"{got['nodes']:,}" + (f" ({lo:,}-{hi:,}{star})" if lo is not None else ""))
                if got["nodes"] and got["nodes"] > measured_nodes:
                    far.append(got["nodes"])
        out.append(f"    {'':>36}{_f(t):>15}  {cells[0]:>16}  {cells[1]:>16}" + (f"  {cells[2]:>17}" if fitted else ""))
    if unsure:
        out.append(
            f"    * no node count served it in up to {unsure:.0%} of the resamples: the interval is over the others"
        )
    if wide:
        out.append(_more_needed(m, sorted(set(wide)), law))
    return far, beyond


def _more_needed(m: dict, wide: list[float], law: dict | None) -> str:
    """What to measure where a target's interval spans more than a factor of two."""
    asks = []
    if m["spread"]["runs"] < 2:
        asks.append("another rig bench run at another time (the interval then covers run-to-run drift)")
    if m["min_repeats"] < 3:
        asks.append("--repeats 3 or more")
    if law is None or not law["nodes"] or max(law["nodes"]) < 3:
        asks.append("rig fleet at 3 and 4 nodes (which node law holds decides large node counts)")
    if m["how"] != "within":
        asks.append("loads past the bound (--concurrency up to where p99 crosses it)")
    targets = ", ".join(_f(t) for t in wide)
    return (
        f"    how sure: the interval spans more than a factor of two for {targets} infer/s: measure more before "
        f"planning on it: {'; '.join(asks) or 'more runs, at other times'}"
    )


def format_check(checked: list[dict], p99_ms: float) -> str:
    """The fleet runs beside their predictions, with the errors in % of the prediction: each fleet
    against every bench sweep of its node, whatever ran beside that sweep (each labelled with its
    neighbour)."""
    out = [f"checked against measured fleets (p99 <= {p99_ms:g} ms; error = (measured - predicted) / predicted):"]
    shown = None
    for c in checked:
        share = share_text(c["cpu_share"])
        cpus = f" ({c['cpus']})" if c["cpus"] else ""
        if c["run_id"] != shown:
            shown = c["run_id"]
            out.append(
                f"  fleet {c['run_id']}: {c['nodes']} node(s){cpus}, Triton "
                f"{c['triton_version']}, engine {c['engine']}, model {c['model']}, node share {share}, "
                f"{HELD_TEXT + ', ' if c.get('held') else ''}{c['users']} user(s) = load "
                f"{_f(c['load'], '{:g}')} a node, {c['rounds']} round(s)"
            )
        if c["group"] is None:
            out.append(f"    not checked: {c['why']}")
            continue
        mark = ""
        if c["at_bound"]:
            mark = (
                " [the load the model puts at the bound]"
                if c["group"]["how"] == "within"
                else " [the largest load swept: the sweep never reached the bound]"
            )
        if c.get("neighbour") is None:
            out[-1] += mark
        else:
            out.append(f"    predicted by the bench sweep with neighbour {c['neighbour']}{mark}:")
        out.extend(_judged_lines(c))
        out.append(_fleet_throughput(c))
        out.append(
            f"    p99: measured {_f(c['p99_us'])} us; predicted "
            f"{_ci_pi(c['predicted_p99_us'], c['predicted_p99_ci'], c.get('predicted_p99_pi'))} us "
            f"at that load ({c['predicted_p99_how']}; error {_pct(c['error_p99_pct'])})"
            f"{inside(c['p99_inside'], c.get('p99_inside_run'), c.get('p99_run_span'), c.get('p99_ci_span'))}; "
            "the bound "
            f"{'met' if c['within_bound'] else 'NOT met'}"
        )
    neighbours = list(dict.fromkeys(c.get("neighbour") for c in checked if c["group"] is not None))
    for nb in neighbours or [None]:
        out.extend(_coverage_lines([c for c in checked if c.get("neighbour") == nb], nb))
    return "\n".join(out)


def _judged_lines(c: dict) -> list[str]:
    """Which plan judged a fleet (one that did not see it: the law over the other fleets of its node,
    or the prior), what that law multiplied the sweep's figures by, and the sweep's figures alone."""
    law = c["law"]
    if law["prior"]:
        by = "the prior (no other fleet of this node to fit on: the node law is assumed)"
    else:
        by = f"the law over the other fleet(s) of this node, {', '.join(law['seen'])}: {_law_text(law)}"
    tp = "usl" if c["by"] == "usl" else "linear"
    alone = (
        f"    the sweep alone (nodes that share nothing, no master): {_f(c[f'raw_{tp}'])} infer/s (error "
        f"{_pct(c[f'raw_error_{tp}_pct'])}), p99 {_f(c['raw_p99_us'])} us (error {_pct(c['raw_error_p99_pct'])})"
    )
    return [
        f"    judged by a plan that did not see it: {by}",
        "      = "
        + _factors_text(c["nodes"], c["per_node"], c["raw_p99_us"], c["factors"], law, c["p99_fleets"], c["p99_by"]),
        alone,
    ]


def inside(v, run=None, span=None, ci_span=None) -> str:
    """Where a measured figure fell: the estimate's interval (``v``; ``ci_span``: its high end over its
    low end), the interval for one run (``run``; ``span``: the same), each named where it is too wide
    to plan on."""
    from rig.analysis.capacity.fleet import WIDE

    got = [] if v is None else ["inside the estimate's interval" if v else "OUTSIDE the estimate's interval"]
    if v and ci_span and ci_span > WIDE:
        got[-1] += f", which spans {ci_span:.1f}x (too wide to plan on: not covered)"
    if run is not None:
        got.append("inside the interval for one run" if run else "OUTSIDE the interval for one run")
        if span and span > WIDE:
            got[-1] += f", which spans {span:.1f}x (too wide to plan on: not covered)"
    return "".join(f"; {x}" for x in got)


def _fleet_throughput(c: dict) -> str:
    x = f"    throughput: measured {_f(c['throughput'])} infer/s ({c['measured_from']}); predicted "
    if c["predicted_usl"] is not None:
        x += (
            f"{_ci_pi(c['predicted_usl'], c['predicted_usl_ci'], c.get('predicted_usl_pi'))} by the USL "
            f"(error {_pct(c['error_usl_pct'])}"
            f"{', extrapolated' if c['extrapolated'] else ''}), "
        )
    x += (
        f"{_ci_pi(c['predicted_linear'], c['predicted_linear_ci'], c.get('predicted_linear_pi'))} "
        "by the linear baseline "
        f"(error {_pct(c['error_linear_pct'])})"
    )
    got = inside(
        c["throughput_inside"],
        c.get("throughput_inside_run"),
        c.get("throughput_run_span"),
        c.get("throughput_ci_span"),
    )
    return x + (got + f" ({'USL' if c['by'] == 'usl' else 'linear baseline'}'s)" if got else "")


def _coverage_lines(checked: list[dict], neighbour: str | None = None) -> list[str]:
    """How many fleets the predictions (of the sweeps with ``neighbour``) covered: inside the 95 %
    interval, or within 10 %; and their mean error, unsigned."""
    from rig.analysis.capacity.fleet import NEAR, WIDE, coverage

    got = coverage(checked)
    if not got["throughput"]["checked"] and not got["p99"]["checked"]:
        return []
    by = "" if neighbour is None else f" of the bench sweeps with neighbour {neighbour}"
    judged = [c for c in checked if c.get("group") is not None]
    prior = sorted({c["run_id"] for c in judged if c["law"]["prior"]})
    head = (
        f"  coverage{by}, each fleet judged by a plan that did not see it (the law fitted over the other fleets "
        "of its node: leave one out) (95 % intervals: the estimate's, over the sweep's resamples and the law's "
        "uncertainty; one run's, those times one run's deviation, since a fleet run is one measurement; "
        f"a fleet is covered inside either or within {NEAR:.0%} of the prediction):"
    )
    out = [head]
    if prior:
        out.append(
            f"    judged by the prior (no other fleet of their node to fit the law on): {', '.join(prior)}; "
            "a second fleet of the node lets each be judged by the other"
        )
    for fig, name in (("throughput", "throughput"), ("p99", "p99")):
        g = got[fig]
        missed = f"; not covered: {', '.join(g['missed'])}" if g["missed"] else ""
        mean = f"; mean |error| {g['mean_error']:.1f} %" if g.get("mean_error") is not None else ""
        n = g["checked"]
        wide = f" ({g['wide']} inside one spanning more than {WIDE:g}x only: not counted)" if g.get("wide") else ""
        out.append(
            f"    {name}: {g['inside']} of {n} fleet(s) inside the estimate's interval, {g['inside_run']} of {n} "
            f"inside the interval for one run{wide}, {g['near']} of {n} within {NEAR:.0%}{mean}{missed}"
        )
    return out


def format_instance_law(law: dict) -> str:
    fit, ci = law["fit"], law["ci"]
    counts = ", ".join(map(str, law["instances"]))
    if fit is None:
        return f"  instances {counts}: the USL over instances could not be fitted"
    peak = f"; peaks at {fit.peak:.3g} instances" if math.isfinite(fit.peak) else ""
    return (
        f"  USL over instances {counts} (each at the bound): λ {_ci(fit.lam, ci['lam'])} infer/s an instance, "
        f"σ {_param(fit.sigma)} ({_param(ci['sigma'][0])}-{_param(ci['sigma'][1])}), κ {_param(fit.kappa)} "
        f"({_param(ci['kappa'][0])}-{_param(ci['kappa'][1])}); fits within {fit.rms_rel:.1%} (rms){peak}"
    )


# ---------------------------------------------------------------- checked against measured fleets
