"""The one place where results are judged: a soak against its thresholds (``soak``) and a
candidate against a baseline (``gate``). Pure functions over cycle rows (``CycleRow``s, dicts
or a cycles frame) and window frames; each returns the reasons it fails, empty when it passes.

The gate fails a regression only when it is both larger than its threshold and statistically
significant (p <= ``alpha``, one-sided, in the direction of the regression), so two runs of one
configuration pass however their noise falls, and a tiny but certain change passes too:

- finalize success (cycles whose every finalize ran before stop returned, among cycles that
  expected one): a drop above ``max_finalize_drop`` (absolute), significant by Fisher's exact
  test or by Wilson intervals that do not overlap;
- stop latency: p95 of the candidate over p95 of the baseline above ``max_stop_regression``,
  significant by Mann-Whitney U over the cycles' stop latencies;
- throughput, per point (mode, concurrency or rate, tool) both sides measured: a drop of the
  median above ``max_throughput_drop`` (relative; at least ``ONE_RUN_DROP`` when a side holds one
  run only, whose cycles share one machine state), significant by Mann-Whitney U, both over
  independent units, the same on both sides (``frames.paired_units`` of the measured windows,
  warm-up left out: each cycle's median; each run's where both sides have over 1,000 cycles;
  the windows themselves where a side has fewer than 3 cycles);
- any lifecycle outcome but ``clean``, load outcome but ``ok``, or growth outcome but ``ok`` (a
  process ``leaking``, a load ``slowing``: ``verdicts.GROWTH_OUTCOMES``) that the candidate has and
  the baseline never had (each verdict judged apart; ``not_measured``, and a cycle stored before
  the growth verdict, are never held against the candidate);
- where a bound is given (``max_first_response_p99_us``): a streaming model's time to the first
  response, p99 of the candidate's merged HDR histograms at each point, above the bound (an
  absolute bound of the candidate alone: no test, no baseline).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

from rig.analysis import stats
from rig.contract import verdicts

ALPHA = 0.05
MAX_FINALIZE_DROP = 0.05  # absolute: 100 % -> 94 % fails (when significant)
MAX_STOP_REGRESSION = 1.5  # candidate stop p95 / baseline stop p95
MAX_THROUGHPUT_DROP = 0.10  # relative: 10 % fewer inferences per second at a point


def records(cycles) -> list[dict]:
    """Cycle rows as dicts (from ``CycleRow``s, dicts or a frame), NaN read as None."""
    if hasattr(cycles, "to_dict"):
        cycles = cycles.astype(object).where(cycles.notna(), None).to_dict("records")
    out = []
    for r in cycles:
        d = dataclasses.asdict(r) if dataclasses.is_dataclass(r) else dict(r)
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()})
    return out


def _sum(rows: list[dict], key: str) -> int:
    return sum(int(r.get(key) or 0) for r in rows)


from rig.contract.verdicts import finalize_success  # noqa: E402


def soak(
    cycles,
    allowed: Iterable[str],
    max_stop_latency_s: float | None = None,
    min_finalize_success: float | None = None,
    allow_leaks: bool = False,
    run_trend: dict | None = None,
    max_slowdown: float | None = None,
) -> list[str]:
    """Reasons a soak fails its thresholds (empty: it passes): outcomes not ``allowed`` (the
    lifecycle's, the load's, the growth's: ``leaking`` and ``slowing`` fail unless named), the
    longest stop above ``max_stop_latency_s``, finalize success (over finalizes) below
    ``min_finalize_success``, stubs the rig killed or shared memory left unless ``allow_leaks``,
    and a run whose cycles slowed across it (``run_trend``: ``rig.common.trends.run_trend``) by more
    than ``max_slowdown`` % over the whole interval. A threshold left None is not checked; a
    figure no cycle has is not judged."""
    rows = records(cycles)
    allowed = tuple(allowed)
    reasons = []
    # Two verdicts, judged apart: the lifecycle's (``outcome``) and the load's (``load_outcome``;
    # a row without one, or whose load was not measured, is judged on its lifecycle alone).
    for key, label, skip in (
        ("outcome", "outcomes", ()),
        ("load_outcome", "load outcomes", (None, verdicts.NOT_MEASURED)),
        ("growth_outcome", "growth outcomes", (None, verdicts.NOT_MEASURED, "ok")),
    ):
        counts: dict[str, int] = {}
        for r in rows:
            if r.get(key) not in skip:
                counts[r[key]] = counts.get(r[key], 0) + 1
        bad = {k: v for k, v in counts.items() if k not in allowed}
        if bad:
            reasons.append(f"{label} not allowed: " + ", ".join(f"{k}={v}" for k, v in sorted(bad.items())))
    lat = [r["stop_latency_s"] for r in rows if r.get("stop_latency_s") is not None]
    if max_stop_latency_s is not None and lat and max(lat) > max_stop_latency_s:
        reasons.append(f"max stop latency {max(lat):.3f} s > {max_stop_latency_s} s")
    fs = finalize_success(rows)
    if min_finalize_success is not None and fs is not None and fs < min_finalize_success:
        reasons.append(f"finalize success {fs:.1%} < {min_finalize_success:.1%}")
    stubs, shm = _sum(rows, "stubs_killed"), _sum(rows, "shm_regions_leaked")
    if not allow_leaks and (stubs or shm):
        reasons.append(f"leaks: {stubs} stub(s) killed by the rig, {shm} shared-memory region(s) left")
    low = (run_trend or {}).get("slowdown_low_pct")
    if max_slowdown is not None and low is not None and low > max_slowdown and "slowing" not in allowed:
        reasons.append(
            f"slowing across the run: {run_trend['slowdown_pct']:.0f} % slower at its last cycles than its "
            f"first (at least {low:.0f} % > {max_slowdown:g} %)"
        )
    return reasons


def significant(p: float | None, alpha: float = ALPHA) -> bool:
    """p <= alpha, allowing for rounding (Fisher's 3/3 against 0/3 is 0.05000000000000001)."""
    return p is not None and p <= alpha * (1 + 1e-9)


def _p(p: float | None) -> str:
    return "p=n/a" if p is None else f"p={p:.2g}"


def _secs(v: float) -> str:
    return f"{v:.1f} s" if v >= 1 else f"{v:.3f} s"


def _finalize(base, cand, max_drop: float, alpha: float) -> list[str]:
    from rig.analysis import frames

    (kb, nb), (kc, nc) = frames.finalize_counts(base), frames.finalize_counts(cand)
    if not nb or not nc:
        return []
    rb, lb, _ = stats.wilson(kb, nb)
    rc, _, hc = stats.wilson(kc, nc)
    if rb - rc <= max_drop:
        return []
    p = stats.fisher(kb, nb, kc, nc, alternative="greater")
    if significant(p, alpha) or hc < lb:
        return [f"finalize success {rb * 100:.1f} % -> {rc * 100:.1f} % ({kb}/{nb} -> {kc}/{nc}, {_p(p)})"]
    return []


def _stop(base, cand, max_ratio: float, alpha: float) -> list[str]:
    lb = stats.finite(base["stop_latency_s"])
    lc = stats.finite(cand["stop_latency_s"])
    if not lb.size or not lc.size:
        return []
    pb, pc = float(np.percentile(lb, 95)), float(np.percentile(lc, 95))
    if pb <= 0 or pc / pb <= max_ratio:
        return []
    p = stats.compare(lb, lc, alternative="less")["p_value"]
    if significant(p, alpha):
        return [f"stop p95 {_secs(pb)} -> {_secs(pc)} (x{pc / pb:.1f}, {_p(p)})"]
    return []


ONE_RUN_DROP = 0.30  # the least throughput drop a one-run-a-side comparison fails on


def _throughput(base_windows, cand_windows, max_drop: float, alpha: float) -> list[str]:
    from rig.analysis import frames

    if base_windows is None or cand_windows is None or not len(base_windows) or not len(cand_windows):
        return []
    wb, wc = frames.measured_windows(base_windows), frames.measured_windows(cand_windows)
    if min(wb["run_id"].nunique(), wc["run_id"].nunique()) <= 1:
        # One run a side: its cycles share one machine state, so a test over them cannot tell the
        # configuration from the night (runs minutes apart differed by up to 27 %
        # on a shared 2-core VM). Such a comparison fails only on a drop past ONE_RUN_DROP.
        max_drop = max(max_drop, ONE_RUN_DROP)
    keys = ["tool", *frames.POINT]
    reasons = []
    for key, gb in wb.groupby(keys, dropna=False, sort=True):
        gc = wc
        for k, v in zip(keys, key):
            gc = gc[gc[k].isna()] if v is None or (isinstance(v, float) and math.isnan(v)) else gc[gc[k] == v]
        tb, tc, _ = frames.paired_units(frames.unit_levels(gb, "throughput"), frames.unit_levels(gc, "throughput"))
        if not len(tb) or not len(tc) or np.median(tb) <= 0:
            continue
        rel, low, high = stats.ratio_ci(tb, tc)
        if -rel <= max_drop:
            continue
        p = stats.compare(tb, tc, alternative="greater")["p_value"]
        if not significant(p, alpha):
            continue
        tool, mode, conc, rate = key
        where = frames.point_label(mode, conc, rate) + ("" if tool == "rig" else f" ({tool})")
        half = (high - low) / 2 * 100
        reasons.append(f"throughput at {where}: {rel * 100:+.0f} % (+-{half:.0f} %), {_p(p)}")
    return reasons


def _new_outcomes(base, cand) -> list[str]:
    """Verdicts the candidate has and the baseline never had, each kind apart (the lifecycle's
    ``outcome`` other than clean; the load's ``load_outcome`` other than ok; the growth's
    ``growth_outcome`` other than ok: leaking, slowing)."""
    reasons = []
    fine_load = (*verdicts.GOOD, verdicts.NOT_MEASURED)
    for key, label, fine in (
        ("outcome", "outcome", verdicts.GOOD),
        ("load_outcome", "load outcome", fine_load),
        ("growth_outcome", "growth outcome", fine_load),
    ):
        if key not in cand:
            continue
        seen = set(base[key].dropna()) if key in base else set()
        counts = cand[key].dropna().value_counts()
        new = {k: int(v) for k, v in counts.items() if k not in seen and k not in fine}
        if new:
            had = ", ".join(sorted(seen)) or "no cycles"
            reasons.append(
                f"new {label}(s): "
                + ", ".join(f"{k} in {v}/{len(cand)} cycles" for k, v in sorted(new.items()))
                + f" (baseline had only {had})"
            )
    return reasons


def first_response(streaming, max_p99_us: float | None) -> list[str]:
    """Points (rows of ``frames.streaming``) whose first-response p99 exceeds ``max_p99_us``."""
    if max_p99_us is None or streaming is None or not len(streaming):
        return []
    reasons = []
    for r in streaming.to_dict("records"):
        p99 = r.get("first_p99_us")
        if p99 is None or p99 != p99 or p99 <= max_p99_us:
            continue
        where = r["point"] + ("" if r.get("tool") in (None, "rig") else f" ({r['tool']})")
        reasons.append(
            f"first response p99 at {where}: {p99:,.0f} us > {max_p99_us:,.0f} us ({r.get('first_from', '-')})"
        )
    return reasons


JUDGED = ("outcome", "load_outcome", "growth_outcome", "finalize_expected", "finalize_before_stop", "stop_latency_s")


def _judged(cycles):
    """Cycle rows (``CycleRow``s, dicts or a frame) as a frame of the columns the gate reads."""
    import pandas as pd

    if not hasattr(cycles, "columns"):
        cycles = pd.DataFrame(records(cycles))
    return cycles.reindex(columns=list(JUDGED))


def gate(
    baseline_cycles,
    baseline_windows,
    candidate_cycles,
    candidate_windows,
    max_finalize_drop: float = MAX_FINALIZE_DROP,
    max_stop_regression: float = MAX_STOP_REGRESSION,
    max_throughput_drop: float = MAX_THROUGHPUT_DROP,
    alpha: float = ALPHA,
    max_first_response_p99_us: float | None = None,
    candidate_streaming=None,
) -> list[str]:
    """Reasons the candidate regressed from the baseline (empty: it passes); see the module's
    docstring for the rules. ``candidate_streaming``: ``frames.streaming`` of the candidate's
    windows (with their histograms), for ``max_first_response_p99_us``."""
    base, cand = _judged(baseline_cycles), _judged(candidate_cycles)
    return (
        _new_outcomes(base, cand)
        + _finalize(base, cand, max_finalize_drop, alpha)
        + _stop(base, cand, max_stop_regression, alpha)
        + _throughput(baseline_windows, candidate_windows, max_throughput_drop, alpha)
        + first_response(candidate_streaming, max_first_response_p99_us)
    )
