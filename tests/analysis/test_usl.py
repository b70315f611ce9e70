"""The Universal Scalability Law and what is read from it (rig/analysis/usl.py): pure functions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rig.analysis import usl


def test_fit_recovers_the_law_from_exact_throughputs():
    n = np.array([1, 2, 4, 8, 16, 32], dtype=float)
    got = usl.fit(n, usl.throughput(n, 1000, 0.05, 0.002))
    assert got.lam == pytest.approx(1000, rel=1e-4)
    assert got.sigma == pytest.approx(0.05, abs=1e-4) and got.kappa == pytest.approx(0.002, abs=1e-5)
    assert got.rms_rel < 1e-6 and got.usable and (got.n_min, got.n_max, got.points) == (1, 32, 6)
    assert got.peak == pytest.approx(math.sqrt(0.95 / 0.002))


def test_fit_over_repeats_with_noise_lands_near_the_law():
    rng = np.random.default_rng(3)
    n = np.repeat([1, 2, 4, 8], 5).astype(float)
    x = usl.throughput(n, 3000, 0.1, 0.01) * rng.normal(1, 0.02, n.size)
    got = usl.fit(n, x)
    assert got.lam == pytest.approx(3000, rel=0.05) and got.sigma == pytest.approx(0.1, abs=0.05)
    assert got.rms_rel == pytest.approx(0.02, abs=0.01)


def test_a_law_that_bends_past_its_domain_is_fitted_within_it():
    # throughput that falls from the first load on: LM would leave σ <= 1; the bounded fit keeps it
    n = np.array([1, 2, 3, 4], dtype=float)
    got = usl.fit(n, np.array([1000, 600, 450, 350.0]))
    assert got is not None and 0 <= got.sigma <= 1 and got.kappa >= 0


def test_two_loads_fit_sigma_alone_and_fewer_fit_nothing():
    n = np.array([1, 1, 2, 2], dtype=float)
    got = usl.fit(n, usl.throughput(n, 500, 0.25, 0))
    assert got.kappa == 0 and got.sigma == pytest.approx(0.25, abs=1e-4) and not got.usable  # 2 loads
    assert usl.fit([4, 4, 4], [10, 11, 12]) is None
    assert usl.fit([], []) is None
    assert usl.fit([1, 2], [0, -1]) is None


def test_linear_is_the_throughput_per_unit_at_the_least_load():
    assert usl.linear([2, 2, 4], [100, 120, 150]) == pytest.approx(55)
    assert usl.linear([], []) is None


def _brute(target, per_node, headroom, sigma, kappa):
    for n in range(1, 100_000):
        if usl.throughput(n, per_node, sigma, kappa) * (1 - headroom) >= target - 1e-9:
            return n
    return None


@pytest.mark.parametrize("target, per_node, headroom, sigma, kappa", [
    (10_000, 10_000, 0.0, 0, 0), (10_000, 10_000, 0.3, 0, 0), (7_000, 10_000, 0.3, 0, 0),
    (95_000, 1_000, 0.2, 0, 0), (5_000, 1_000, 0.3, 0.05, 0), (30_000, 1_000, 0.1, 0.02, 0.0001),
    (1_000, 1_000, 0.0, 0.3, 0.01),
])
def test_nodes_for_is_the_fewest_nodes_that_serve_the_target(target, per_node, headroom, sigma, kappa):
    assert usl.nodes_for(target, per_node, headroom, sigma, kappa) == _brute(target, per_node, headroom, sigma, kappa)


def test_nodes_for_says_none_where_the_law_never_reaches_the_target():
    assert usl.nodes_for(30_000, 1_000, 0.0, 0.05, 0) is None           # Amdahl: at most 1,000 / 0.05
    assert usl.nodes_for(50_000, 1_000, 0.0, 0.02, 0.001) is None       # past the peak
    assert usl.nodes_for(1, None, 0.3) is None and usl.nodes_for(1, 100, 1.0) is None


def test_load_at_interpolates_p99_log_linearly_between_loads():
    n, p99 = [1, 2, 4, 8], [100, 200, 400, 3200]
    got, how = usl.load_at(800, n, p99)
    assert how == "within" and got == pytest.approx(4 + 4 / 3)  # 800 is a third of the way in log from 400 to 3200
    assert usl.load_at(200, n, p99) == (2.0, "within")
    assert usl.load_at(5000, n, p99) == (8.0, "not reached")     # never beyond the sweep
    assert usl.load_at(50, n, p99) == (None, "none")


def test_load_at_takes_a_failed_load_as_past_any_bound_and_p99_as_non_decreasing():
    assert usl.load_at(1000, [1, 2, 4], [100, 200, math.inf]) == (2.0, "within")
    # a lower p99 after a higher one is noise: the first crossing counts
    assert usl.load_at(300, [1, 2, 4], [100, 400, 250])[0] == pytest.approx(1 + math.log(3) / math.log(4))


def test_p99_at_is_the_same_interpolation_and_none_beyond_the_sweep():
    n, p99 = [1, 2, 4], [100, 200, 800]
    assert usl.p99_at(2, n, p99) == 200 and usl.p99_at(3, n, p99) == pytest.approx(400)
    assert usl.p99_at(0.5, n, p99) is None and usl.p99_at(5, n, p99) is None


def test_fit_nodes_reads_sigma_and_kappa_from_fleet_efficiencies():
    assert usl.fit_nodes([2], [1 / 1.1]) == pytest.approx((0.1, 0.0))
    assert usl.fit_nodes([2], [1.2]) == (0.0, 0.0)  # more than n nodes' worth: no contention, not negative
    n = np.array([2, 4, 8], dtype=float)
    e = 1 / (1 + 0.03 * (n - 1) + 0.001 * n * (n - 1))
    assert usl.fit_nodes(n, e) == pytest.approx((0.03, 0.001))
    assert usl.fit_nodes([1], [1.0]) is None


def test_interval_is_the_percentile_interval_of_what_is_finite():
    lo, hi = usl.interval(list(range(101)) + [None, math.nan, math.inf])
    assert (lo, hi) == pytest.approx((2.5, 97.5))
    assert usl.interval([None]) == (None, None)
