"""Fast tests of the analysis library: statistics against known answers, the tidy frames and
the verdicts over rows written through the real Store."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from scipy import stats as sps

from rig.analysis import stats


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


def _encoded(values) -> str:
    h = HdrHistogram(1, 60_000_000, 3)
    for v in values:
        h.record_value(int(v))
    return base64.b64encode(h.encode()).decode()


def test_merging_histograms_is_exact():
    rng = np.random.default_rng(2)
    a, b = rng.integers(50, 5_000, 3000), rng.integers(1_000, 900_000, 500)
    merged = stats.merge_histograms([_encoded(a), None, _encoded(b), float("nan")])
    whole = HdrHistogram(1, 60_000_000, 3)
    for v in np.concatenate([a, b]):
        whole.record_value(int(v))
    got = stats.histogram_percentiles(merged, (50, 90, 99, 99.9))
    assert got == {"p50_us": whole.get_value_at_percentile(50), "p90_us": whole.get_value_at_percentile(90),
                   "p99_us": whole.get_value_at_percentile(99), "p999_us": whole.get_value_at_percentile(99.9),
                   "max_us": whole.get_max_value(), "count": 3500}
    assert stats.merge_histograms([None]) is None
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
