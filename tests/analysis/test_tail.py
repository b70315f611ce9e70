"""p99 at loads not measured (rig/analysis/tail.py): the closed-loop queue, and which method is kept."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rig.analysis import tail, usl


def test_a_closed_loop_over_one_server_waits_for_every_request_ahead():
    lat = tail.simulate(np.array([100.0]), np.array([1.0]), servers=1, load=4)
    assert np.allclose(lat, 400.0)  # each request waits for the 3 ahead, then its own 100 us
    lat = tail.simulate(np.array([100.0]), np.array([1.0]), servers=4, load=4)
    assert np.allclose(lat, 100.0)  # as many servers as requests in flight: nothing waits


def test_the_queue_p99_over_exponential_service_is_erlangs():
    """One server, exponential service: the latency at load N is the sum of N services (Erlang N);
    its p99 over its mean is Erlang's, and Little's law sets the level."""
    values = np.linspace(1, 2000, 4000)
    weights = np.exp(-values / 100.0)  # exponential, mean ~100 us
    q = tail.Queue(values, weights, throughput_at=lambda n: 1e4, peak=1e4)
    assert q.servers == 1
    for n in (2, 4, 8):
        want = stats.gamma.ppf(0.99, n) / n * (n / 1e4 * 1e6)
        assert q.p99(n) == pytest.approx(want, rel=0.06), n
    assert q.p99(3) is not None and q.p99(2) < q.p99(3) < q.p99(4)
    assert q.p99(0.5) is None


def _erlang_sweep(loads):
    """A sweep measured on a true one-server queue (exponential service of 100 us)."""
    rng = np.random.default_rng(4)
    values = np.arange(1, 3000, dtype=float)
    hists, p99 = [], []
    for n in loads:
        lat = rng.gamma(n, 100.0, 50_000)
        counts, _ = np.histogram(lat, bins=np.append(values, 3000.0 * n))
        hists.append((values, counts.astype(float)) if n == loads[0] else None)
        p99.append(float(np.percentile(lat, 99)))
    return np.array(loads, float), np.full(len(loads), 1e4), np.array(p99), hists


def test_assess_measures_both_methods_and_keeps_the_better_and_only_the_queue_goes_beyond():
    loads, x, p99, hists = _erlang_sweep([1, 2, 8, 16, 32])
    got = tail.assess(loads, x, p99, hists, lambda keep: usl.fit(loads[keep], x[keep]))
    assert got["compared"] == 3 and got["queue_error"] < 6
    assert got["interpolation_error"] > got["queue_error"] and got["chosen"] == "queue"
    assert abs(got["beyond_error"]) < 8
    at, how = tail.p99_at(got, 64, loads, p99)
    assert how.startswith("the queue") and at == pytest.approx(stats.gamma.ppf(0.99, 64) * 100, rel=0.08)
    assert tail.p99_at(got, 8, loads, p99) == (pytest.approx(p99[2]), "measured")
    mid, how = tail.p99_at(got, 4, loads, p99)
    assert how == "the queue" and mid == pytest.approx(stats.gamma.ppf(0.99, 4) * 100, rel=0.08)
    assert tail.p99_at(None, 64, loads, p99) == (None, "beyond the loads measured")
    assert tail.p99_at(None, 4, loads, p99)[1] == "interpolated"


def test_without_the_least_loads_histograms_there_is_no_queue():
    loads, x, p99, hists = _erlang_sweep([1, 2, 4])
    got = tail.assess(loads, x, p99, [None, None, None], lambda keep: None)
    assert got["queue"] is None and got["chosen"] == "interpolation" and got["compared"] == 0
    assert math.isclose(tail.p99_at(got, 3, loads, p99)[0], usl.p99_at(3, loads, p99))
