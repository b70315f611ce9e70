"""The figure of ``rig capacity --plot``: per node (version, engine, model, share, instances), a
row of four panels. Against load: throughput (each repeat, the pooled point, the USL with its
bootstrap band, the linear model λN) and p99 (the points, the interpolation the load at the bound
is read from, the bound). Against nodes: the throughput at the bound predicted for 1..n nodes
(nodes adding up linearly, and as fitted over fleet runs where there are some) with its band,
the measured fleets and the targets; and the fleets' p99 beside the p99 predicted at their load.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rig.analysis import usl
from rig.analysis.capacity.plan import capacity_of
from rig.analysis.capacity.tags import node_title
from rig.analysis.plots import pyplot, save


def _band(m: dict, grid: np.ndarray):
    curves = [usl.throughput(grid, *b["params"]) for b in m["boot"] if b["params"]]
    if not curves:
        return None
    return np.percentile(np.array(curves), [2.5, 97.5], axis=0)


def figure(
    models: list[dict], checked: list[dict], laws: dict, targets: list[float], headroom: float, path: str | Path
) -> Path:
    plt = pyplot()
    rows = max(1, len(models))
    fig, axes = plt.subplots(rows, 4, figsize=(20, 4.2 * rows), squeeze=False)
    for row, m in zip(axes, models):
        a, b, c, d = row
        name = node_title(m["triton_version"], m["engine"], m["model"], m["cpu_share"], m["cpus"], m.get("neighbour"))
        if m["instances"] is not None:
            name += f", {m['instances']} inst."
        n, x = m["repeats"]
        grid = np.linspace(min(1.0, float(m["loads"][0])), float(m["loads"][-1]), 200)  # never beyond the sweep
        a.plot(n, x, "o", alpha=0.35, color="C0", label="each repeat")
        a.plot(m["loads"], m["throughput"], "s", color="C0", label="measured (repeats pooled)")
        if m["fit"] is not None:
            band = _band(m, grid)
            if band is not None:
                a.fill_between(grid, band[0], band[1], color="C1", alpha=0.2, label="USL 95 % band")
            a.plot(grid, m["fit"].at(grid), "-", color="C1", label="USL")
        lam = usl.linear(m["loads"], m["throughput"])
        if lam:
            top = max(float(np.nanmax(m["throughput"])), 1.0) * 1.3
            lin = lam * grid
            a.plot(grid[lin <= top], lin[lin <= top], "--", color="C2", label="linear λN")
        if m["load"] is not None:
            a.axvline(m["load"], color="C3", linestyle=":", label="load at the p99 bound")
        a.set(xlabel="load (requests in flight)", ylabel="infer/s")
        a.set_title(f"{name}\nThroughput against load", fontsize=9, loc="left")
        a.legend(fontsize=7)
        p99 = np.where(np.isfinite(m["p99_us"]), m["p99_us"], np.nan)
        b.plot(m["loads"], p99, "s-", color="C0", label="measured p99 (merged)")
        b.axhline(m["p99_ms"] * 1000, color="C3", linestyle=":", label="bound")
        if m["load"] is not None:
            b.axvline(m["load"], color="C3", linestyle=":")
        b.set(xlabel="load (requests in flight)", ylabel="p99 (µs)", title="p99 against load", yscale="log")
        b.legend(fontsize=7)
        cap = capacity_of(m)
        mine = [k for k in checked if k.get("group") is m]
        law = laws.get(id(m))
        top_n = max([4, *(k["nodes"] for k in mine)] + [usl.nodes_for(t, cap, headroom) or 0 for t in targets[:1]])
        ns = np.arange(1, min(top_n, 64) + 1)
        if cap:
            c.plot(ns, cap * ns, "--", color="C2", label="at the bound, nodes linear")
            boots = [b_[("cap_usl" if m["by"] == "usl" else "cap_linear")] for b_ in m["boot"]]
            boots = [v for v in boots if v]
            if boots:
                lo, hi = np.percentile(boots, [2.5, 97.5])
                c.fill_between(ns, lo * ns, hi * ns, color="C2", alpha=0.15)
            if law and not law.get("prior"):
                c.plot(
                    ns,
                    usl.throughput(ns, cap * law.get("level", 1.0), law["sigma"], law["kappa"]),
                    "-",
                    color="C1",
                    label="nodes as fitted over fleets",
                )
        for k in mine:
            c.plot(k["nodes"], k["throughput"], "o", color="C0")
            pred = k["predicted_usl"] or k["predicted_linear"]
            if pred:
                c.plot(k["nodes"], pred, "o", mfc="none", color="C1")
        if mine:
            c.plot([], [], "o", color="C0", label="fleet measured (at its load)")
            c.plot([], [], "o", mfc="none", color="C1", label="predicted at that load")
        shown = [t for t in targets if cap and t / (1 - headroom) <= cap * ns[-1] * 1.2]
        for t in shown:
            c.axhline(t / (1 - headroom), color="C3", linestyle=":", linewidth=0.8)
        if shown:
            c.plot([], [], ":", color="C3", label="target / (1 - headroom)")
        c.set(xlabel="nodes", ylabel="infer/s", title="Throughput against nodes")
        c.legend(fontsize=7)
        for k in mine:
            d.plot(k["nodes"], k["p99_us"], "o", color="C0")
            if k["predicted_p99_us"] is not None and math.isfinite(k["predicted_p99_us"]):
                d.plot(k["nodes"], k["predicted_p99_us"], "o", mfc="none", color="C1")
        d.axhline(m["p99_ms"] * 1000, color="C3", linestyle=":", label="bound")
        d.plot([], [], "o", color="C0", label="fleet measured")
        d.plot([], [], "o", mfc="none", color="C1", label="predicted at its load")
        d.set(xlabel="nodes", ylabel="p99 (µs)", title="p99 against nodes", xlim=(0.5, max(2.5, top_n + 0.5)))
        d.legend(fontsize=7)
    return save(fig, axes.ravel(), path)
