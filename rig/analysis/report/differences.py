"""The differences section of `rig report`: each value of the compared tag against the baseline's,
the other tags held equal, metric by metric (finalize success by Fisher's exact test; stop and start
latency, throughput and p99 at each point by Mann-Whitney U over independent units), adjusted by
Benjamini-Hochberg and named only from a material size up."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rig.analysis import frames, plots, stats
from rig.analysis.report.html import Figure, Section, Table, cell
from rig.analysis.report.parts import finalized, groups, label, pct

ALPHA = 0.05
MIN_EFFECT_PCT = 5.0  # a significant change smaller than this (in %) is not named: noise of a busy machine
# Throughput, latency and start latency of one run against one run: the cycles of a run share its
# machine's state, so a test over them tells two runs apart, not two configurations. Two runs of one
# configuration, back to back beside a busy process on a 2-core VM, differed by -32 % in throughput
# and +95 % in p99 latency (docs/measurements/store-and-analysis.md); on a CI machine, five cycles
# against five were wholly apart (p = 0.008). With a single run a side, such a change is never
# called significant: from this size up it is named as unconfirmed, with what would confirm it.
MIN_EFFECT_ONE_RUN_PCT = 30.0


def _unit(df: pd.DataFrame, col: str) -> dict:
    """``col`` at each independent unit (``frames.unit_levels``)."""
    return frames.unit_levels(df, col)


def _measures(c: pd.DataFrame, pts: dict, gs: list[int]) -> dict:
    """One side's values per independent unit, by metric name: stop and start latency over its
    cycles ``c`` (``_unit``), throughput and p99 latency at each of its points ``gs``."""
    out = {}
    if len(c):
        for col, name in (("stop_latency_s", "stop latency"), ("start_latency_s", "start latency")):
            out[name] = (_unit(c, col), "s")
    for g in gs:  # in (tool, mode, point) order
        tool, mode, point = pts["names"][g][-3:]
        where = f" @ {mode} {point:g}" + ("" if tool == "rig" else f" ({tool})")
        out["throughput" + where] = (pts["units"][g]["throughput"], "infer/s")
        out["p99 latency" + where] = (pts["units"][g]["p99_us"], "µs")
    return out


def _test_rows(b: pd.DataFrame, o: pd.DataFrame, bm: dict, om: dict) -> list[dict]:
    """The baseline's cycles ``b`` and measures ``bm`` against another's (``o``, ``om``)."""
    rows = []
    if len(b) and len(o):
        be, bok = finalized(b)
        oe, ook = finalized(o)
        if be.sum() and oe.sum():
            rb, ro = bok.sum() / be.sum(), ook.sum() / oe.sum()
            rows.append(
                {
                    "metric": "finalize success",
                    "baseline": pct(rb),
                    "other": pct(ro),
                    "change": f"{100 * (ro - rb):+.0f} points",
                    "estimate": 100 * (ro - rb),
                    "lo": np.nan,
                    "hi": np.nan,
                    "p": stats.fisher(
                        int(ook.sum()), int(oe.sum()), int(bok.sum()), int(be.sum()), alternative="two-sided"
                    ),
                    "sign": np.sign(ro - rb),
                }
            )
    for name, (a, unit) in bm.items():
        if name in om and (unit != "s" or (len(b) and len(o))):
            rows.append(_num_row(name, *frames.paired_units(a, om[name][0])[:2], unit))
    return [r for r in rows if r is not None]


def _num_row(name, a, b, unit):
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not a.size or not b.size:
        return None
    cmp = stats.compare(a, b)
    est, lo, hi = stats.ratio_ci(a, b)
    return {
        "metric": name,
        "baseline": f"{cell(cmp['a_median'])} {unit}",
        "other": f"{cell(cmp['b_median'])} {unit}",
        "change": "-" if pd.isna(est) else f"{100 * est:+.1f} %",
        "estimate": 100 * est,
        "lo": 100 * lo,
        "hi": 100 * hi,
        "p": cmp["p_value"],
        "sign": np.sign(cmp["diff"] or 0),
    }


def _judged(t: pd.DataFrame, axis, base, n_tested: int) -> list[str]:
    """Marks each row of ``t`` significant: yes, no, or unconfirmed (a throughput, latency or start
    latency change with one run a side, never called significant); returns the headlines: the
    significant changes (or that there is none), then the unconfirmed ones."""
    # start latency too: a run's starts share its machine's state (a cold page cache made the
    # first of two identical runs start 26 % slower on a fresh CI machine, p = 0.008)
    perf = t.metric.str.startswith(("throughput", "p99 latency", "start latency"))
    one_run = perf & t["_runs"].le(1)
    floor = np.where(one_run, MIN_EFFECT_ONE_RUN_PCT, MIN_EFFECT_PCT)
    material = t.estimate.abs().ge(floor) | t.metric.eq("finalize success")
    apart = t["p adj"].lt(ALPHA) & material
    t["significant"] = np.where(apart & one_run, "unconfirmed", np.where(apart, "yes", "no"))
    t["direction"] = np.where(t.sign > 0, "higher", np.where(t.sign < 0, "lower", "same"))

    def said(r: dict) -> str:
        return (
            f"{axis}={r[axis]}{' (' + r['scope'] + ')' if r['scope'] else ''} vs {base}: {r['metric']} "
            f"{r['direction']} ({r['baseline']} → {r['other']}, {r['change']}, p={r['p']:.2g})"
        )

    heads = [said(r) for r in t[t.significant.eq("yes")].to_dict("records")]
    if not heads:
        heads = [
            (
                f"No significant difference from {axis}={base} ({n_tested} tests, "
                f"Benjamini-Hochberg at {ALPHA:.0%}, changes of {MIN_EFFECT_PCT:g} % or more)."
            )
        ]
    heads += [
        said(r) + ": unconfirmed, one run a side (its cycles share one machine state); run each side again to test it"
        for r in t[t.significant.eq("unconfirmed")].to_dict("records")
    ]
    return heads


def differences_section(cycles, pts: dict, keys, axis, base) -> Section:
    from scipy.stats import false_discovery_control

    rest = [k for k in keys if k != axis]
    by_side: dict = {}  # (axis value, rest values) -> the points of that side (keys are [axis, *rest])
    for g, name in enumerate(pts["names"]):
        if pd.notna(name[-1]) and pd.notna(name[0]):
            by_side.setdefault((str(name[0]), tuple(name[1 : len(keys)])), []).append(g)
    c_all = cycles.assign(_axis=cycles[axis].astype("string"))
    rows = []
    for rk, c_rest in groups(c_all, rest):
        rt = rk if isinstance(rk, tuple) else (rk,)
        mine = {a: gs for (a, r), gs in by_side.items() if len(r) == len(rest) and all(x == y for x, y in zip(r, rt))}
        c_by = dict(tuple(c_rest.groupby("_axis", sort=False)))
        vals = sorted(set(c_by) | set(mine))
        bc = c_by.get(base, c_rest.iloc[:0])
        bm = _measures(bc, pts, mine.get(base, []))
        for other in (v for v in vals if v != base):
            oc = c_by.get(other, c_rest.iloc[:0])
            runs = min(bc["run_id"].nunique() if len(bc) else 0, oc["run_id"].nunique() if len(oc) else 0)
            for r in _test_rows(bc, oc, bm, _measures(oc, pts, mine.get(other, []))):
                r.update({"scope": label(rest, rk) if rest else "", axis: other, "_runs": runs})
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
    heads = _judged(t, axis, base, int(tested.sum()))
    sec.headlines = heads
    cols = (
        [axis]
        + (["scope"] if rest else [])
        + ["metric", "baseline", "other", "change", "direction", "p", "p adj", "significant"]
    )
    sec.add(
        *heads,
        Table(
            t[cols],
            f"Each {axis} against {axis}={base} (medians and Mann-Whitney U over cycles, "
            f"over runs' medians where both sides have over {frames.MAX_UNITS:,} cycles, over windows for a "
            f"point measured in under 3 cycles; Fisher's exact test for finalize; BH-adjusted p; "
            f"significant: p adj < {ALPHA:g} and a change of {MIN_EFFECT_PCT:g} % or more; "
            f"throughput, latency and start latency with one run a side are never significant, since the "
            f"cycles of one run share its machine's state: a change of {MIN_EFFECT_ONE_RUN_PCT:g} % or more "
            f"with p adj < {ALPHA:g} is unconfirmed)",
        ),
    )
    fig_rows = (
        t[t.estimate.notna()]
        .head(30)
        .assign(label=lambda d: d[axis] + " " + d.metric, significant=lambda d: d.significant.eq("yes"))
    )
    if len(fig_rows):
        sec.add(
            Figure(
                plots.render("comparison_figure", fig_rows, f"Change from {axis}={base} (95 % interval)"),
                "Differences from the baseline with intervals; significant in red",
            )
        )
    return sec
