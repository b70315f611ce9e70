"""Fast tests of the analysis library: statistics against known answers, the tidy frames and
the verdicts over rows written through the real Store."""

from __future__ import annotations

import base64
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hdrh.histogram import HdrHistogram
from scipy import stats as sps

from rig.common import hdr
from rig.analysis import frames, stats, verdict
from rig.store import Store
from rig.contract.rows import CycleRow, window_row


# ================================================================ stats

def test_wilson_matches_the_formula_and_handles_no_trials():
    rate, low, high = stats.wilson(8, 10)
    z = sps.norm.ppf(0.975)
    centre = (0.8 + z * z / 20) / (1 + z * z / 10)
    half = z / (1 + z * z / 10) * math.sqrt(0.8 * 0.2 / 10 + z * z / 400)
    assert rate == 0.8 and low == pytest.approx(centre - half) and high == pytest.approx(centre + half)
    assert stats.wilson(3, 3)[2] == pytest.approx(1.0) and stats.wilson(0, 3)[1] == pytest.approx(0.0)
    assert stats.wilson(0, 0) == (None, None, None)


def test_bootstrap_ci_brackets_the_median_and_survives_degenerate_input():
    values = np.random.default_rng(1).normal(100, 10, 200)
    est, low, high = stats.bootstrap_ci(values)
    assert est == pytest.approx(np.median(values)) and low < est < high
    assert high - low < 6  # ~1.25 sigma/sqrt(n) * 2 * 1.96 = 3.5 for a normal sample
    again = stats.bootstrap_ci(values)
    assert again == (est, low, high)  # seeded
    mean_est, mlow, mhigh = stats.bootstrap_ci(values, statistic=np.mean, confidence=0.9)
    assert mean_est == pytest.approx(values.mean()) and mlow < mean_est < mhigh
    assert stats.bootstrap_ci([7.0]) == (7.0, 7.0, 7.0)
    assert stats.bootstrap_ci([2, 2, 2]) == (2.0, 2.0, 2.0)
    assert stats.bootstrap_ci([1.0, 2.0])[0] == 1.5
    assert all(math.isnan(v) for v in stats.bootstrap_ci([]))


def test_compare_is_scipys_mann_whitney():
    a, b = [1.0, 2.0, 3.0, 4.0], [3.5, 5.0, 6.0, 7.0, 8.0]
    r = stats.compare(a, b, alternative="less")
    assert r["p_value"] == pytest.approx(sps.mannwhitneyu(a, b, alternative="less").pvalue)
    assert (r["a_median"], r["b_median"], r["diff"]) == (2.5, 6.0, 3.5)
    assert r["rel_diff"] == pytest.approx(1.4) and "Mann-Whitney" in r["test"]
    assert stats.compare([1.0], [2.0, 3.0])["p_value"] is None
    assert stats.compare([2.0, 2.0], [2.0, 2.0])["p_value"] == 1.0
    assert stats.compare([], [1.0])["diff"] is None


def _encoded(values, old: bool = False) -> str:
    h = HdrHistogram(1, 60_000_000, 3)
    for v in values:
        h.record_value(int(v))
    return base64.b64encode(h.encode()).decode() if old else hdr.encode(h)


def test_merging_histograms_is_exact():
    """Of both stored forms: the standard encoding (schema 8) and base64 of it (before)."""
    rng = np.random.default_rng(2)
    a, b = rng.integers(50, 5_000, 3000), rng.integers(1_000, 900_000, 500)
    merged = hdr.merge([_encoded(a), None, _encoded(b, old=True), float("nan")])
    whole = HdrHistogram(1, 60_000_000, 3)
    for v in np.concatenate([a, b]):
        whole.record_value(int(v))
    got = stats.histogram_percentiles(merged, (50, 90, 99, 99.9))
    assert got == {"p50_us": whole.get_value_at_percentile(50), "p90_us": whole.get_value_at_percentile(90),
                   "p99_us": whole.get_value_at_percentile(99), "p999_us": whole.get_value_at_percentile(99.9),
                   "max_us": whole.get_max_value(), "count": 3500}
    assert hdr.merge([None]) is None
    assert stats.histogram_percentiles(None) == {"p50_us": None, "p90_us": None, "p99_us": None,
                                                 "p999_us": None, "max_us": None, "count": 0}


def test_ecdf():
    x, y = stats.ecdf([3.0, 1.0, None, 2.0, 2.0])
    assert list(x) == [1.0, 2.0, 2.0, 3.0] and list(y) == [0.25, 0.5, 0.75, 1.0]
    x, y = stats.ecdf([])
    assert x.size == 0 and y.size == 0


def test_slope_ci_is_linregress_with_its_t_interval():
    x = np.arange(1, 21)
    y = 1000 + 50.0 * x + np.random.default_rng(3).normal(0, 20, 20)
    slope, low, high = stats.slope_ci(x, y)
    r = sps.linregress(x, y)
    half = sps.t.ppf(0.975, 18) * r.stderr
    assert slope == pytest.approx(r.slope) and low == pytest.approx(r.slope - half)
    assert high == pytest.approx(r.slope + half) and low < 50 < high
    assert stats.slope_ci([1, 2], [1, 2]) is None and stats.slope_ci([1, 1, 1], [1, 2, 3]) is None


def test_change_points_none_on_noise_one_at_a_step():
    rng = np.random.default_rng(4)
    assert stats.change_points(rng.normal(100, 5, 60)) == []
    step = np.concatenate([rng.normal(100, 5, 30), rng.normal(130, 5, 30)])
    assert stats.change_points(step) == [30]
    assert stats.change_points([1.0, 1.0, 1.0, 5.0, 5.0, 5.0]) == [3]
    assert stats.change_points([2.0] * 10) == [] and stats.change_points([1.0, 9.0]) == []


def test_fisher_and_ratio_ci():
    assert stats.fisher(3, 3, 0, 3) == pytest.approx(0.05)
    assert stats.fisher(3, 3, 3, 3) == pytest.approx(1.0) and stats.fisher(1, 0, 1, 1) is None
    est, low, high = stats.ratio_ci([100.0, 102, 98, 101, 99], [80.0, 82, 79, 81, 80])
    assert est == pytest.approx(-0.2) and low <= est <= high and high < 0


# ================================================================ frames and verdicts over a Store

def _cycle(run_id, cycle, **kw) -> CycleRow:
    base = {f.name: None for f in dataclasses.fields(CycleRow)}
    base.pop("schema_version")
    base.update(run_id=run_id, cycle=cycle, engine="capi", model="numpy", retain="none", outcome="clean",
                restart="fresh-process", stop_strategy="stop", started_at=f"2026-01-01T00:{cycle:02d}:00+00:00",
                finalize_expected=1, finalize_before_stop=1, stop_latency_s=2.0, start_latency_s=0.1,
                stubs_killed=0, shm_regions_leaked=0)
    base.update(kw)
    return CycleRow(**base)


def _window(run_id, cycle, window, latencies, concurrency=4, **kw):
    msg = dict(cycle=cycle, window=window, start_s=float(window), length_s=1.0, mode="closed",
               concurrency=concurrency, requests=len(latencies), errors=0, throughput=float(len(latencies)),
               histogram=_encoded(latencies), mean_us=float(np.mean(latencies)))
    msg.update(kw)
    return window_row(run_id, "capi", "numpy", msg)


def _store(tmp_path, runs: dict) -> Store:
    """runs: run_id -> (triton_version, [CycleRow], [WindowRow])"""
    s = Store(tmp_path)
    for run_id, (version, rows, windows) in runs.items():
        for r in rows:
            mine = [w for w in windows if w.cycle == r.cycle]
            if mine:
                s.write("windows", mine, version, f"w{r.cycle:06d}")
            s.write("cycles", [r], version, f"c{r.cycle:06d}")
    return s


def test_lifecycle_per_version(tmp_path):
    old = [_cycle("old", k, stop_latency_s=2.0 + k / 10) for k in range(1, 5)]
    new = [_cycle("new", k, outcome="exit_timeout", finalize_before_stop=0, stop_latency_s=30.0,
                  stubs_killed=1 if k == 1 else 0) for k in range(1, 4)]
    s = _store(tmp_path, {"old": ("2.48.0", old, []), "new": ("2.51.0", new, [])})
    lc = frames.lifecycle(s.read("cycles")).set_index("triton_version")
    assert list(lc.index) == ["2.48.0", "2.51.0"]
    a, b = lc.loc["2.48.0"], lc.loc["2.51.0"]
    assert (a.cycles, a.outcome_clean, a.outcome_exit_timeout, b.outcome_exit_timeout) == (4, 4, 0, 3)
    assert (a.finalize_ok, a.finalize_cycles, a.finalize_rate) == (4, 4, 1.0)
    assert (b.finalize_rate, b.finalize_low, b.finalize_high) == pytest.approx(stats.wilson(0, 3))
    assert a.stop_p95_s == pytest.approx(np.percentile([2.1, 2.2, 2.3, 2.4], 95)) and a.stop_max_s == 2.4
    assert b.stubs_killed_per_cycle == pytest.approx(1 / 3) and a.worker_rss_slope is None  # fresh process


def test_rss_slope_of_same_process_runs_pools_runs_at_their_own_level(tmp_path):
    rows = [_cycle(run, k, restart="same-process", worker_rss_bytes=base + k * 1_000_000 + (k % 2) * 10_000,
                   stub_rss_bytes=base) for run, base in (("r1", 10**8), ("r2", 3 * 10**8)) for k in range(1, 9)]
    s = _store(tmp_path, {"r1": ("2.51.0", rows[:8], []), "r2": ("2.51.0", rows[8:], [])})
    lc = frames.lifecycle(s.read("cycles"))
    slope, low, high = lc.loc[0, ["worker_rss_slope", "worker_rss_slope_low", "worker_rss_slope_high"]]
    assert low < 1_000_000 < high and slope == pytest.approx(1_000_000, rel=0.01)
    assert lc.loc[0, "stub_rss_slope"] == pytest.approx(0)


def test_performance_merges_histograms_and_skips_the_warm_up_window(tmp_path):
    rng = np.random.default_rng(5)
    lat = [rng.integers(100, 200, 50 + 10 * k) for k in range(5)]
    lat[0] = np.full(10, 50_000)  # a slow warm-up window, left out
    windows = [_window("r1", 1, k, lat[k]) for k in range(5)]
    s = _store(tmp_path, {"r1": ("2.51.0", [_cycle("r1", 1)], windows)})
    perf = frames.performance(s.read("windows"))
    assert len(perf) == 1
    p = perf.iloc[0]
    kept = np.concatenate(lat[1:])
    whole = hdr.merge([_encoded(kept)])
    assert (p.point, p.windows, p.requests, p.latencies) == ("concurrency 4", 4, kept.size, kept.size)
    assert p.p99_us == whole.get_value_at_percentile(99) and p.max_us == whole.get_max_value()
    assert p.throughput == np.median([len(x) for x in lat[1:]]) and p.throughput_low <= p.throughput <= p.throughput_high
    assert p.mean_us == pytest.approx(kept.mean())
    assert "retain" in frames.performance(s.read("windows"), cycles=s.read("cycles"), by=["retain"]).columns


def test_nightly_flags_the_night_finalize_broke(tmp_path):
    runs = {}
    for night in range(8):
        run = f"n{night}"
        broken = night >= 5
        rows = [_cycle(run, k, started_at=f"2026-01-{night + 1:02d}T00:0{k}:00+00:00",
                       finalize_before_stop=0 if broken else 1, stop_latency_s=2.0 + 0.01 * ((night * k) % 3))
                for k in range(1, 4)]
        runs[run] = ("2.51.0", rows, [])
    s = _store(tmp_path, runs)
    n = frames.nightly(s.read("cycles"), s.read("windows"), "finalize_success")
    assert list(n.run_id) == [f"n{k}" for k in range(8)] and list(n.value) == [1.0] * 5 + [0.0] * 3
    assert list(n.index[n.change]) == [5]
    assert not frames.nightly(s.read("cycles"), None, "stop_p95").change.any()
    with pytest.raises(ValueError):
        frames.nightly(s.read("cycles"), None, "colour")


def test_soak_verdict_reads_rows_and_frames_alike(tmp_path):
    rows = [_cycle("r", 1, stop_latency_s=0.2, finalize_expected=2, finalize_before_stop=2),
            _cycle("r", 2, outcome="exit_timeout", finalize_expected=2, finalize_before_stop=0,
                   stop_latency_s=6.0, stubs_killed=2)]
    expected = ["outcomes not allowed: exit_timeout=1", "max stop latency 6.000 s > 5 s",
                "finalize success 50.0% < 90.0%",
                "leaks: 2 stub(s) killed by the rig, 0 shared-memory region(s) left"]
    assert verdict.soak(rows, ("clean",), 5, 0.9) == expected
    s = _store(tmp_path, {"r": ("2.51.0", rows, [])})
    assert verdict.soak(s.read("cycles"), ("clean",), 5, 0.9) == expected
    assert verdict.soak(rows, ("clean", "exit_timeout"), allow_leaks=True) == []


def _side(run, n, version="2.51.0", tput=1000, stop=2.0, finalize=1, outcome="clean", windows=6, runs=2):
    """``n`` cycles over ``runs`` runs (``run``-0, ``run``-1, ...)."""
    rng = np.random.default_rng(len(run))
    rid = [f"{run}-{k % runs}" for k in range(1, n + 1)]
    rows = [_cycle(rid[k - 1], k, stop_latency_s=stop * (1 + 0.01 * rng.random()), finalize_before_stop=finalize,
                   outcome=outcome) for k in range(1, n + 1)]
    ws = [_window(rid[k - 1], k, w, np.full(5, 100), throughput=tput * (1 + 0.02 * rng.standard_normal()))
          for k in range(1, n + 1) for w in range(windows)]
    return rows, ws


def _frames(side):
    rows, ws = side
    return rows, pd.DataFrame(ws)


def test_gate_fails_significant_regressions_only():
    base_c, base_w = _side("base", 8)
    same_c, same_w = _side("same", 8, tput=1010)
    assert verdict.gate(base_c, pd.DataFrame(base_w), same_c, pd.DataFrame(same_w)) == []
    bad_c, bad_w = _side("bad", 8, tput=850, stop=30.0, finalize=0, outcome="exit_timeout")
    reasons = verdict.gate(base_c, pd.DataFrame(base_w), bad_c, pd.DataFrame(bad_w))
    assert reasons[0] == "new outcome(s): exit_timeout in 8/8 cycles (baseline had only clean)"
    assert reasons[1] == "finalize success 100.0 % -> 0.0 % (8/8 -> 0/8, p=7.8e-05)"
    assert reasons[2].startswith("stop p95 2.0 s -> 30.") and "(x15.0, p=" in reasons[2]
    assert reasons[3].startswith("throughput at concurrency 4: -15 % (+-") and len(reasons) == 4
    # the same drops, too few to tell from noise: a single cycle each side
    one_c, one_w = _side("one", 1, tput=850, stop=30.0, finalize=0, windows=1)
    assert verdict.gate(base_c[:1], pd.DataFrame(base_w[:1]), one_c, pd.DataFrame(one_w)) == []
    # one run a side: its cycles share one machine state, so only a drop past ONE_RUN_DROP fails
    lone_c, lone_w = _side("lone", 8, runs=1)
    assert verdict.gate(lone_c, pd.DataFrame(lone_w), *_frames(_side("lone15", 8, tput=850, runs=1))) == []
    worse = verdict.gate(lone_c, pd.DataFrame(lone_w), *_frames(_side("lone40", 8, tput=600, runs=1)))
    assert len(worse) == 1 and worse[0].startswith("throughput at concurrency 4: -40 %")
    # significant but under the thresholds
    assert verdict.gate(base_c, pd.DataFrame(base_w), bad_c, pd.DataFrame(bad_w), max_finalize_drop=1.0,
                        max_stop_regression=20, max_throughput_drop=0.2) == reasons[:1]


def test_gate_fails_a_growth_verdict_the_baseline_never_had():
    """The third verdict, apart from the other two: leaking or slowing new in the candidate fails
    the gate; one the baseline had too, not_measured, or none (an older store) does not."""
    base_c, base_w = _side("base", 8)
    cand_c, cand_w = _side("same", 8, tput=1010)
    grown = [dataclasses.replace(r, growth_outcome="leaking" if r.cycle <= 3 else "ok") for r in cand_c]
    reasons = verdict.gate(base_c, pd.DataFrame(base_w), grown, pd.DataFrame(cand_w))
    assert reasons == ["new growth outcome(s): leaking in 3/8 cycles (baseline had only no cycles)"]
    had = [dataclasses.replace(r, growth_outcome="leaking" if r.cycle == 1 else "ok") for r in base_c]
    assert verdict.gate(had, pd.DataFrame(base_w), grown, pd.DataFrame(cand_w)) == []
    slow = [dataclasses.replace(r, growth_outcome="slowing") for r in cand_c]
    assert verdict.gate(had, pd.DataFrame(base_w), slow, pd.DataFrame(cand_w)) == [
        "new growth outcome(s): slowing in 8/8 cycles (baseline had only leaking, ok)"]
    unmeasured = [dataclasses.replace(r, growth_outcome="not_measured") for r in cand_c]
    assert verdict.gate(base_c, pd.DataFrame(base_w), unmeasured, pd.DataFrame(cand_w)) == []
    # frames without the column at all (a store before schema 11) read as no growth verdict
    old = pd.DataFrame([dataclasses.asdict(r) for r in base_c]).drop(columns="growth_outcome")
    assert verdict.gate(old, pd.DataFrame(base_w), old, pd.DataFrame(base_w)) == []


def test_rig_gate_prints_the_growth_verdicts_and_fails_a_new_one(tmp_path, capsys):
    from rig.cli import main

    base = [_cycle("base", k, growth_outcome="ok") for k in range(1, 4)]
    cand = [_cycle("cand", k, growth_outcome="leaking" if k == 2 else "ok") for k in range(1, 4)]
    _store(tmp_path, {"base": ("2.50.0", base, []), "cand": ("2.51.0", cand, [])})
    rc = main(["gate", str(tmp_path), "--baseline", "2.50.0", "--candidate", "2.51.0"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert any(line.startswith("growth") and "ok=3" in line and "leaking=1, ok=2" in line for line in out.splitlines())
    assert "FAIL: new growth outcome(s): leaking in 1/3 cycles (baseline had only ok)" in out
