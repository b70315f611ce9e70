"""What a plan knows of a fleet beyond one node's sweep (rig.analysis.capacity.law): the prior, the node
law fitted over the fleets seen, the master's cost and p99's bias, applied to a fleet of n nodes. Pure
functions over made-up figures; the check over a store that uses them: tests/analysis/test_capacity.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rig.analysis.capacity import law

X, P99 = 10_000.0, 1_000.0  # one node at the fleet's load, by the sweep: infer/s, p99 us


def _m(devs=0.02, neighbour="none", by="linear") -> dict:
    d = np.array([-devs, -devs / 2, 0.0, devs / 2, devs])
    return {"by": by, "cpu_share": 1.0, "neighbour": neighbour, "deviations": {"throughput": d, "p99": d}}


def _raw() -> dict:
    rng = np.random.default_rng(3)
    return {
        "usl": (None, []),
        "linear": (X, (X * np.exp(rng.normal(0, 0.01, 200))).tolist()),
        "p99": (P99, (P99 * np.exp(rng.normal(0, 0.01, 200))).tolist()),
    }


def _fleet(run_id, eff, p99_ratio=1.0, nodes=2, **master) -> dict:
    return {"run_id": run_id, "nodes": nodes, "load": 4.0, "throughput": nodes * X * eff, "p99_us": P99 * p99_ratio,
            "per_node": X, "raw_p99_us": P99, **master}


def test_without_a_fleet_the_law_is_the_prior_and_says_so():
    got = law.fit(_m(), [])
    assert got["prior"] and got["seen"] == [] and (got["level"], got["sigma"], got["kappa"]) == (1.0, 0.0, 0.0)
    assert not got["master"]["shares"] and "assumed" in got["master"]["why"]
    e = law.apply(_m(), got, 2, _raw())
    (est, ci, pi), (p99, p99_ci, p99_pi) = e["linear"], e["p99"]
    assert est == pytest.approx(2 * X) and p99 == pytest.approx(P99) and e["p99_fleets"] == []
    # the prior's spread widens both: nodes that share nothing give or take PRIOR_THROUGHPUT_SD, p99 PRIOR_P99_SD
    assert ci[0] < 2 * X * math.exp(-1.5 * law.PRIOR_THROUGHPUT_SD) and ci[1] > 2 * X * math.exp(1.5 * law.PRIOR_THROUGHPUT_SD)
    assert p99_pi[0] < P99 * math.exp(-1.5 * law.PRIOR_P99_SD) and p99_pi[1] > P99 * math.exp(1.5 * law.PRIOR_P99_SD)


def test_fleets_that_served_less_than_their_nodes_alone_fit_sigma_and_the_expectation_uses_it():
    seen = [_fleet("F1", 0.92), _fleet("F2", 0.93)]
    got = law.fit(_m(), seen)
    assert not got["prior"] and got["seen"] == ["F1", "F2"] and got["nodes"] == [2] and got["level"] == 1.0
    assert law.efficiency(got, 2) == pytest.approx(0.925, abs=0.002)
    lo, hi = got["ci"]["sigma"]
    assert lo < got["sigma"] < hi
    est, ci, pi = law.apply(_m(), got, 2, _raw())["linear"]
    assert est == pytest.approx(2 * X * law.efficiency(got, 2))  # 2 x one node x the law it states
    assert pi[0] < ci[0] < est < ci[1] < pi[1]
    assert pi[1] < 2 * X  # two nodes sharing nothing are outside where one run may land


def test_fleets_that_served_more_than_the_sweep_set_a_level_not_a_negative_sigma():
    got = law.fit(_m(), [_fleet("F1", 1.05), _fleet("F2", 1.06)])
    assert (got["sigma"], got["kappa"]) == (0.0, 0.0) and got["level"] == pytest.approx(1.055, abs=0.002)
    assert law.apply(_m(), got, 2, _raw())["linear"][0] == pytest.approx(2 * X * got["level"])


def test_p99s_bias_is_measured_after_littles_law_and_moves_the_interval():
    """Fleets whose nodes served 0.93 of the sweep's with p99 25 % over it: Little's law explains 1 / 0.93 of
    it, the bias the rest; a fleet they did not include is expected at 1.25 x, the interval moved there."""
    seen = [_fleet("F1", 0.93, 1.25), _fleet("F2", 0.93, 1.25)]
    got = law.fit(_m(), seen)
    e = law.apply(_m(), got, 2, _raw())
    p99, ci, pi = e["p99"]
    assert e["factors"]["little"] == pytest.approx(1 / 0.93, rel=1e-3)
    assert e["factors"]["bias"] == pytest.approx(1.25 * 0.93, rel=1e-3) and e["p99_fleets"] == ["F1", "F2"]
    assert p99 == pytest.approx(1.25 * P99, rel=1e-3)
    assert pi[0] < 1.25 * P99 < pi[1] and pi[0] > 1.1 * P99  # the sweep's own p99 is no longer inside
    # fleets of another node count say less: the bias of those of the same count is taken where there are some
    other = law.fit(_m(), seen + [_fleet("F4", 0.93, 2.0, nodes=4)])
    assert law.apply(_m(), other, 2, _raw())["p99_fleets"] == ["F1", "F2"]


def test_the_masters_cost_is_counted_where_it_shares_the_nodes_cpus():
    assert law.master_factor(1e-6, 10_000, 1.0) == pytest.approx(1 / 1.01)
    assert law.master_factor(None, 10_000, 1.0) == 1.0 == law.master_factor(1e-6, None, 1.0)
    on = dict(master_cpu_s=0.6, master_requests=60_000, master_seconds=12.0, master_shares=True)  # 10 us a request
    seen = [_fleet("F1", 0.9, **on), _fleet("F2", 0.9, **on)]
    got = law.fit(_m(), seen)
    mst = got["master"]
    assert mst["shares"] and mst["cpu_per_request"] == pytest.approx(1e-5) and mst["cpus"] == pytest.approx(0.05)
    f = law.master_factor(1e-5, X, 1.0)
    # the law is fitted to what the fleets served beyond the master's cost, and the master counted again
    assert law.efficiency(got, 2) == pytest.approx(0.9 / f, rel=1e-3)
    e = law.apply(_m(), got, 2, _raw())
    assert e["factors"]["master"] == pytest.approx(f) and e["linear"][0] == pytest.approx(2 * X * 0.9, rel=1e-3)
    # a plan for a cluster (--master elsewhere) leaves it out: the nodes keep what the master took here
    away = law.fit(_m(), seen, law.ELSEWHERE)
    assert not away["master"]["shares"] and law.apply(_m(), away, 2, _raw())["linear"][0] == pytest.approx(2 * X * 0.9 / f, rel=1e-3)
    # a sweep beside a neighbour already lost that CPU: not counted twice
    burnt = law.fit(_m(neighbour="burn:1"), seen)
    assert burnt["master"]["in_neighbour"] and law.counted(burnt) is None
    # no fleet measured it: the rig's master as measured here, and only where told it shares
    assert law.fit(_m(), [], law.SHARES)["master"]["cpu_per_request"] == law.MASTER_PRIOR_CPU_PER_REQUEST


def test_the_spread_of_the_fleets_about_the_law_widens_the_interval_for_one_run():
    tight = law.fit(_m(), [_fleet("F1", 0.92), _fleet("F2", 0.92), _fleet("F3", 0.92)])
    loose = law.fit(_m(), [_fleet("F1", 0.80), _fleet("F2", 0.92), _fleet("F3", 1.0)])
    width = {k: (lambda pi: pi[1] / pi[0])(law.apply(_m(), g, 2, _raw())["linear"][2]) for k, g in
             (("tight", tight), ("loose", loose))}
    assert width["loose"] > width["tight"] * 1.1
