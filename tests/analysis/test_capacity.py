"""Capacity planning (analysis/capacity.py, `rig capacity`) over windows written through the store."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from rig.common import hdr
from rig.analysis.capacity import plan as capacity, fleet as capacity_fleet, sweep as capacity_sweep, tags as capacity_tags, text as capacity_text
from rig.cli import main
from rig.store import Store
from rig.contract.rows import RunRow, window_row


def _hist(latencies_us) -> str:
    h = hdr.new()
    for v in latencies_us:
        h.record_value(int(v))
    return hdr.encode(h)


def _window(run_id="b1", cycle=1, window=1, point=1, instances=1, requests=1000, length_s=1.0,
            latencies=None, p99=None, errors=0, tool="rig", engine="capi", model="numpy"):
    lat = latencies if latencies is not None else [100] * requests
    return window_row(run_id, engine, model, {
        "cycle": cycle, "window": window, "tool": tool, "mode": "closed", "concurrency": point,
        "requests": requests, "errors": errors, "length_s": length_s, "throughput": requests / length_s,
        "p99_us": p99 if p99 is not None else float(np.percentile(lat, 99)),
        "histogram": _hist(lat) if latencies is not False else None, "instances": instances})


def _run(run_id="b1", command="bench") -> RunRow:
    return RunRow(run_id=run_id, started_at="2026-01-01T00:00:00+00:00", command=command, host="h", cpu="c",
                  gpu=None, engine="capi", runtime="embedded-0.7.0", model="numpy", config="",
                  rig_version="0", python_version="3.11")


def _frame(rows, tmp_path, version="2.51.0"):
    store = Store(tmp_path)
    store.write("windows", rows, version, "w")
    return store.read("windows")


def test_measured_windows_are_the_last_three_of_each_cycle_rig_only(tmp_path):
    rows = [_window(cycle=1, window=i) for i in range(1, 6)]            # 5 windows: 2, 3, 4 count
    rows += [_window(cycle=2, window=i) for i in range(1, 4)]           # 3 windows: all count
    rows += [_window(cycle=3, window=i) for i in range(1, 3)]           # 2 windows: both count
    rows += [_window(cycle=2, window=i, tool="perf_analyzer") for i in range(1, 4)]
    w = capacity_sweep.measured_windows(_frame(rows, tmp_path))
    got = sorted(zip(w.cycle, w.window))
    assert got == [(1, 3), (1, 4), (1, 5), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2)]
    assert set(w.tool) == {"rig"}


def test_point_p99_is_that_of_all_latencies_merged_not_a_median_of_windows(tmp_path):
    fast, slow = [100] * 1000, [100] * 970 + [5000] * 30  # p99: 100 and 5000; together 3 % are slow
    rows = [_window(cycle=1, window=1, latencies=fast, requests=1000),
            _window(cycle=2, window=1, latencies=slow, requests=1000, length_s=2.0)]
    (pt,) = capacity.points(_frame(rows, tmp_path)).to_dict("records")
    assert pt["p99_from"] == "histograms"
    assert pt["p99_us"] == pytest.approx(5000, rel=0.01)  # 1.5 % of all are slow: p99 is slow
    assert pt["throughput"] == pytest.approx(2000 / 3.0)  # requests over seconds, both repeats
    assert pt["repeats"] == 2 and pt["requests"] == 2000 and pt["windows"] == 2


def test_point_p99_falls_back_to_the_median_of_windows_without_histograms(tmp_path):
    rows = [_window(cycle=c, latencies=False, p99=p) for c, p in ((1, 100.0), (2, 300.0), (3, 900.0))]
    (pt,) = capacity.points(_frame(rows, tmp_path)).to_dict("records")
    assert pt["p99_from"] == "median of windows" and pt["p99_us"] == 300.0


def _sweep(instances, figures, run_id="b1", cycle0=0):
    """One window per point: {point: (infer/s, latency us of every request)}."""
    rows = []
    for k, (point, (tput, lat)) in enumerate(figures.items()):
        rows.append(_window(run_id=run_id, cycle=cycle0 + k + 1, point=point, instances=instances,
                            requests=int(tput), latencies=[lat] * 200))
    return rows


def test_plan_best_point_under_bound_nodes_and_scaling(tmp_path):
    rows = _sweep(1, {1: (5000, 200), 2: (8000, 400), 4: (9000, 2000)})
    rows += _sweep(2, {1: (6000, 150), 2: (12000, 300), 4: (15000, 900)}, cycle0=10)
    plan = capacity.plan(_frame(rows, tmp_path), target=100_000, p99_ms=1.0, headroom=0.3)
    one = plan[plan.instances == 1].iloc[0]
    two = plan[plan.instances == 2].iloc[0]
    assert (one.point, one.throughput) == (2.0, pytest.approx(8000))      # 4 breaks the bound
    assert (two.point, two.throughput) == (4.0, pytest.approx(15000))
    assert one.nodes == math.ceil(100_000 / (8000 * 0.7)) == 18
    assert two.nodes == math.ceil(100_000 / (15000 * 0.7)) == 10
    assert two.per_instance == pytest.approx(7500)
    assert one.scaling == pytest.approx(1.0) and two.scaling == pytest.approx(15000 / 8000)
    assert (one.points, one.points_ok) == (3, 2)
    text = capacity.format_plan(plan, 100_000, 1.0, 0.3)
    assert "headroom 30%" in text and "fewest nodes: 10 with 2 instance(s)" in text


def test_a_point_with_errors_does_not_qualify_and_no_point_is_said_plainly(tmp_path):
    rows = [_window(cycle=1, point=1, latencies=[100] * 1000, errors=3),
            _window(cycle=2, point=2, latencies=[5000] * 1000)]
    plan = capacity.plan(_frame(rows, tmp_path), target=1000, p99_ms=1.0)
    (row,) = plan.to_dict("records")
    assert row["point"] is None and row["nodes"] is None and row["points_ok"] == 0
    assert "no point with 1 instance(s) kept p99 <= 1 ms" in capacity.format_plan(plan, 1000, 1.0, 0.3)


def test_groups_are_per_version_engine_and_model(tmp_path):
    store = Store(tmp_path)
    store.write("windows", _sweep(1, {1: (5000, 200)}), "2.51.0", "a")
    store.write("windows", _sweep(1, {1: (7000, 200)}, run_id="b2"), "2.52.0", "b")
    store.write("windows", [dataclasses.replace(r, model="other") for r in _sweep(1, {1: (3000, 200)}, "b3")],
                "2.51.0", "c")
    plan = capacity.plan(store.read("windows"), target=10_000, p99_ms=1.0)
    got = {(r.triton_version, r.model): r.throughput for r in plan.itertuples()}
    assert got == {("2.51.0", "numpy"): pytest.approx(5000), ("2.52.0", "numpy"): pytest.approx(7000),
                   ("2.51.0", "other"): pytest.approx(3000)}


def test_nodes_needed():
    assert capacity.nodes_needed(10_000, 10_000, 0.0) == 1
    assert capacity.nodes_needed(10_000, 10_000, 0.3) == 2
    assert capacity.nodes_needed(7_000, 10_000, 0.3) == 1
    assert capacity.nodes_needed(1, None) is None and capacity.nodes_needed(1, 100, 1.0) is None


# ---------------------------------------------------------------- the command

@pytest.fixture
def results(tmp_path):
    store = Store(tmp_path / "r")
    store.write("runs", [_run("b1")], "2.51.0", "run")
    store.write("runs", [_run("s1", command="soak")], "2.51.0", "run")
    store.write("windows", _sweep(1, {1: (5000, 200), 2: (8000, 400)}), "2.51.0", "c1")
    store.write("windows", _sweep(1, {1: (99999, 10)}, run_id="s1"), "2.51.0", "c1")  # a soak: not counted
    return tmp_path / "r"


def test_command_prints_the_plan(results, capsys):
    assert main(["capacity", str(results), "--target-throughput", "20000", "--p99-ms", "1"]) == 0
    out = capsys.readouterr().out
    assert "Triton 2.51.0, engine capi, model numpy" in out
    assert "fewest nodes: 4 with 1 instance(s), each at 5,600 of 8,000 infer/s" in out  # soak ignored


def test_command_no_point_met_is_exit_0_with_a_plain_statement(results, capsys):
    assert main(["capacity", str(results), "--target-throughput", "20000", "--p99-ms", "0.05"]) == 0
    assert "no point with 1 instance(s) kept p99 <= 0.05 ms" in capsys.readouterr().out


@pytest.mark.parametrize("folder, extra, says", [
    ("empty", [], "is empty: no runs stored there yet"),
    ("soak-only", [], "holds no windows of `rig bench` runs"),
    ("results", ["--where", "engine=tritonserver"], "matches no bench window"),
    ("results", ["--where", "colour=red"], "no such column"),
    ("results", ["--where", "engine"], "KEY=VALUE"),
    ("results", ["--headroom", "1"], "--headroom"),
    ("results", ["--target-throughput", "-5"], "--target-throughput must be a positive"),
    ("results", ["--p99-ms", "0"], "--p99-ms must be a positive"),
])
def test_bad_input_is_one_line_and_exit_2(results, tmp_path, capsys, folder, extra, says):
    where = {"results": results, "empty": tmp_path / "empty", "soak-only": tmp_path / "soak"}[folder]
    if folder == "empty":
        where.mkdir()
    if folder == "soak-only":
        Store(where).write("runs", [_run("s1", command="soak")], "2.51.0", "run")
        Store(where).write("windows", _sweep(1, {1: (5000, 10)}, run_id="s1"), "2.51.0", "c1")
    assert main(["capacity", str(where), "--target-throughput", "1000", "--p99-ms", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_missing_folder_is_exit_2(tmp_path, capsys):
    assert main(["capacity", str(tmp_path / "nope"), "--target-throughput", "1", "--p99-ms", "1"]) == 2
    assert "no results folder" in capsys.readouterr().err


# ---------------------------------------------------------------- the scaling model, shares, the check

from rig.common import cpushare  # noqa: E402
from rig.analysis import usl  # noqa: E402
from rig.contract.table_rows import FleetRow  # noqa: E402

LAW = (3000.0, 0.1, 0.01)  # λ, σ, κ of the sweeps below


def _usl_sweep(run_id="b1", loads=(1, 2, 4, 8), repeats=3, seed=1, law=LAW, noise=0.03, instances=1):
    """A sweep whose throughput follows ``law`` (with noise a repeat) and whose latencies follow
    Little's law (mean in flight / throughput), spread as a gamma distribution."""
    rng = np.random.default_rng(seed)
    rows, cycle = [], 0
    for n in loads:
        for _ in range(repeats):
            cycle += 1
            x = float(usl.throughput(n, *law)) * rng.normal(1, noise)
            lats = (rng.gamma(4, n / x * 1e6 / 4, 400) + 1).astype(int)
            rows.append(_window(run_id=run_id, cycle=cycle, point=n, instances=instances, requests=int(x),
                                latencies=list(lats)))
    return rows


def test_model_fits_the_usl_with_intervals_over_the_repeats(tmp_path):
    (m,) = capacity.model(_frame(_usl_sweep(), tmp_path), p99_ms=2.0, n_boot=200)
    fit, ci = m["fit"], m["ci"]
    assert m["by"] == "usl" and "fits 4 loads" in m["why"]
    assert fit.lam == pytest.approx(LAW[0], rel=0.1) and ci["lam"][0] <= fit.lam <= ci["lam"][1]
    assert ci["sigma"][0] <= fit.sigma <= ci["sigma"][1] and ci["kappa"][0] <= fit.kappa <= ci["kappa"][1]
    assert len(m["boot"]) == 200 and m["n_repeats"] == 12 and m["min_repeats"] == 3
    # the load at the bound is read from the points' merged p99, the throughput there from the law
    assert m["how"] in ("within", "not reached") and 1 <= m["load"] <= 8
    assert m["cap_usl"] == pytest.approx(float(fit.at(m["load"])))
    assert ci["cap_usl"][0] <= m["cap_usl"] <= ci["cap_usl"][1]
    got = capacity.nodes(m, 100_000, 0.3)
    assert got["nodes"] == math.ceil(100_000 / (m["cap_usl"] * 0.7)) and got["low"] <= got["nodes"] <= got["high"]


def test_model_is_the_same_for_the_same_seed_and_falls_back_to_the_linear_baseline(tmp_path):
    w = _frame(_usl_sweep(), tmp_path)
    a, b = capacity.model(w, 2.0, n_boot=50, seed=7)[0], capacity.model(w, 2.0, n_boot=50, seed=7)[0]
    assert a["ci"] == b["ci"]
    (two,) = capacity.model(_frame(_usl_sweep(run_id="b2", loads=(1, 2)), tmp_path / "two"), 2.0, n_boot=20)
    assert two["by"] == "linear" and "fewer than 3 loads" in two["why"]
    assert capacity.capacity_of(two) == two["cap_linear"]


def test_model_without_repeats_has_no_interval_and_says_so(tmp_path):
    (m,) = capacity.model(_frame(_usl_sweep(repeats=1), tmp_path), 2.0, n_boot=100)
    assert m["boot"] == [] and m["ci"]["lam"] == (None, None)
    text = capacity_text.format_model(m, [10_000], 0.3, None)
    assert "no interval: one repeat a load" in text


def test_model_says_plainly_when_no_load_met_the_bound(tmp_path):
    (m,) = capacity.model(_frame(_usl_sweep(), tmp_path), p99_ms=0.01, n_boot=10)
    assert m["load"] is None and m["by"] is None and m["cap_usl"] is None
    assert capacity.nodes(m, 1000, 0.3)["nodes"] is None
    assert "no load measured met it" in capacity_text.format_model(m, [1000], 0.3, None)


def test_format_model_names_the_model_the_nodes_and_what_is_extrapolated(tmp_path):
    (m,) = capacity.model(_frame(_usl_sweep(), tmp_path), 2.0, n_boot=100)
    text = capacity_text.format_model(m, [5_000, 50_000, 5_000_000], 0.3, None)
    assert "USL: λ" in text and "σ" in text and "κ" in text
    assert "answer: the USL" in text and "nodes add up linearly (no fleet run of this node: assumed" in text
    assert "are extrapolations" in text and "rig fleet --nodes 2" in text
    five = capacity.nodes(m, 5_000_000, 0.3)
    assert f"{five['nodes']:,} ({five['low']:,}-{five['high']:,})" in text
    t = m["tail"]
    assert t["compared"] == 2 and t["chosen"] in ("queue", "interpolation")  # loads 2 and 4, each left out
    assert "p99 at loads not measured: between the loads measured" in text and "beyond them, the queue" in text


def _runs_row(run_id, command="bench", share=None, cpus=None, config="instances = 1\n\n[workload]\nin_flight = 1\n"):
    return dataclasses.replace(_run(run_id, command), config=config, cpu_share=share, cpus=cpus,
                               cpu_share_from=None if share is None else "--cpus")


def test_windows_carry_their_runs_share_and_groups_are_per_share(tmp_path):
    store = Store(tmp_path)
    store.write("runs", [_runs_row("b1", share=1.0, cpus="0"), _runs_row("b2", share=2.0, cpus="0,1")], "2.51.0", "r")
    store.write("windows", _sweep(1, {1: (5000, 200)}) + _sweep(1, {1: (9000, 200)}, run_id="b2"), "2.51.0", "w")
    w = capacity_tags.with_shares(store.read("windows"), store.read("runs"))
    plan = capacity.plan(w, target=10_000, p99_ms=1.0)
    assert sorted((r.cpu_share, round(r.throughput)) for r in plan.itertuples()) == [(1.0, 5000), (2.0, 9000)]
    text = capacity.format_plan(plan, 10_000, 1.0, 0.3)
    assert "node share 1 CPU, neighbour none:" in text and "node share 2 CPUs, neighbour none:" in text


def _fleet(store, run_id, nodes, users, rounds, per_node_tput, p99_lat, share=1.0, version="2.51.0", window_s=5.0,
           cpu_idle=None, master=None):
    """A measured fleet: each node a soak run (its runs row, its windows per round) and the
    master's fleet rows (``master``: (its host, its CPUs, CPU seconds a round, the nodes' host))."""
    host, cpus, cpu_s, node_host = master or (None, None, None, None)
    rows, runs, windows = [], [], []
    for k in range(nodes):
        node = "ab"[k]
        rid = f"{run_id}-{node}"
        runs.append(dataclasses.replace(_runs_row(rid, command="soak", share=share, cpus=str(k)), cpu_idle=cpu_idle))
        for r in range(1, rounds + 1):
            for i in range(1, 4):
                windows.append(_window(run_id=rid, cycle=r, window=i, point=None, instances=None,
                                       requests=int(per_node_tput * window_s), length_s=window_s,
                                       latencies=[p99_lat] * 300))
    for r in range(1, rounds + 1):
        base = dict(run_id=run_id, round=r, started_at="2026-01-01T00:00:00+00:00", seconds=15.0,
                    locust_requests=None, p50_us=None, max_us=None, detail=None)
        for k in range(nodes):
            node = "ab"[k]
            rows.append(FleetRow(**base, node=node, outcome="ok", users=None, node_run_id=f"{run_id}-{node}",
                                 node_cycle=r, requests=int(per_node_tput * 15), errors=0, throughput=per_node_tput,
                                 p99_us=float(p99_lat), histogram=None, host=node_host))
        rows.append(FleetRow(**base, node="*", outcome="ok", users=users, node_run_id=None, node_cycle=None,
                             requests=int(per_node_tput * 15 * nodes), errors=0, throughput=per_node_tput * nodes,
                             p99_us=float(p99_lat), histogram=_hist([p99_lat] * 100), host=host, master_cpus=cpus,
                             master_cpu_s=cpu_s))
    store.write("runs", runs, version, f"fr-{run_id}")
    store.write("windows", windows, version, f"fw-{run_id}")
    store.write("fleet", rows, version, f"f-{run_id}")


@pytest.fixture
def fleet_store(tmp_path):
    store = Store(tmp_path / "f")
    store.write("runs", [_runs_row("b1", share=1.0, cpus="0")], "2.51.0", "run")
    store.write("windows", _usl_sweep(), "2.51.0", "sweep")
    _fleet(store, "F1", nodes=2, users=4, rounds=2, per_node_tput=4500.0, p99_lat=900)
    return store


def test_fleet_runs_are_measured_from_the_nodes_windows(fleet_store):
    f = capacity_fleet.fleet_runs(fleet_store.read("fleet"), fleet_store.read("runs"), fleet_store.read("windows"))
    (row,) = f.to_dict("records")
    assert (row["nodes"], row["users"], row["load"], row["rounds"]) == (2, 4, 2.0, 2)
    assert (row["triton_version"], row["model"], row["cpu_share"], row["instances"]) == ("2.51.0", "numpy", 1.0, 1)
    assert row["cpus"] == "a:0, b:1" and row["measured_from"] == "node windows"
    assert row["throughput"] == pytest.approx(9000) and row["p99_us"] == pytest.approx(900, rel=0.01)


def test_check_compares_each_fleet_with_the_prediction_at_its_load(fleet_store):
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    w = capacity_tags.with_shares(windows[windows["run_id"] == "b1"], runs)
    (m,) = capacity.model(w, 2.0, n_boot=100)
    (c,) = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    per_node = float(m["fit"].at(2.0))
    assert c["group"] is m and c["predicted_usl"] == pytest.approx(2 * per_node)
    assert c["error_usl_pct"] == pytest.approx((9000 - 2 * per_node) / (2 * per_node) * 100)
    assert c["predicted_linear"] == pytest.approx(2 * m["throughput"][1])        # load 2 was measured
    assert c["predicted_p99_us"] == pytest.approx(m["p99_us"][1])
    assert c["predicted_usl_ci"][0] <= c["predicted_usl"] <= c["predicted_usl_ci"][1]
    assert c["within_bound"] and not c["extrapolated"]
    law = capacity_fleet.node_law([c], m)
    assert law["nodes"] == [2] and law["kappa"] == 0
    assert law["sigma"] == pytest.approx(max(0.0, c["predicted_usl"] / 9000 - 1), abs=1e-9)
    text = capacity_text.format_check([c], 2.0)
    assert "fleet F1: 2 node(s) (a:0, b:1)" in text and "node share 1 CPU" in text and "error" in text


def test_each_fleet_is_judged_by_a_plan_that_did_not_see_it(fleet_store):
    """Two fleets: each judged by the law fitted over the other (leave one out), never over itself; with
    one fleet alone it is the prior, and the check says so."""
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    (m,) = capacity.model(capacity_tags.with_shares(windows[windows["run_id"] == "b1"], runs), 2.0, n_boot=100)
    (alone,) = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    assert alone["law"]["prior"] and alone["predicted_usl"] == pytest.approx(alone["raw_usl"])
    text = capacity_text.format_check([alone], 2.0)
    assert "judged by a plan that did not see it: the prior (no other fleet of this node" in text
    assert "judged by the prior (no other fleet of their node to fit the law on): F1" in text
    _fleet(fleet_store, "F2", nodes=2, users=4, rounds=2, per_node_tput=4000.0, p99_lat=1200)
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    f1, f2 = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    assert (f1["law"]["seen"], f2["law"]["seen"]) == (["F2"], ["F1"])
    # F1 is expected as F2 served (the law over F2), so off by what F1 served over F2: +12.5 %
    assert f1["predicted_usl"] == pytest.approx(8000, rel=1e-3) and f1["error_usl_pct"] == pytest.approx(12.5, abs=0.1)
    assert f2["predicted_usl"] == pytest.approx(9000, rel=1e-3)
    assert f1["predicted_p99_us"] == pytest.approx(f1["raw_p99_us"] * 1200 / f2["raw_p99_us"], rel=0.01)
    assert f1["raw_error_usl_pct"] == alone["error_usl_pct"]  # the sweep alone, beside
    text = capacity_text.format_check([f1, f2], 2.0)
    assert "judged by a plan that did not see it: the law over the other fleet(s) of this node, F2: nodes add up" in text
    assert "judged by the prior" not in text


def test_the_fleets_record_where_their_master_ran_and_what_it_cost(fleet_store):
    """A master on the nodes' host and CPUs shares them (its CPU a request then counted); one on another
    host, or on other CPUs, does not; older rows say nothing (None)."""
    _fleet(fleet_store, "F2", nodes=2, users=4, rounds=2, per_node_tput=4500.0, p99_lat=900,
           master=("vm", "0-1", 0.09, "vm"))
    _fleet(fleet_store, "F3", nodes=2, users=4, rounds=1, per_node_tput=4500.0, p99_lat=900,
           master=("head", "0-7", 0.09, "vm"))
    _fleet(fleet_store, "F4", nodes=2, users=4, rounds=1, per_node_tput=4500.0, p99_lat=900,
           master=("vm", "5", 0.09, "vm"))
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    f = capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows).set_index("run_id")
    assert f.loc["F1", "master_shares"] is None and pd.isna(f.loc["F1", "master_cpu_s"])
    assert f.loc["F2", "master_shares"] is True and f.loc["F2", "master_host"] == "vm"
    assert f.loc["F2", "master_cpu_s"] == pytest.approx(0.18) and f.loc["F2", "master_requests"] == 2 * 2 * 67500
    assert f.loc["F2", "master_seconds"] == pytest.approx(30.0)
    assert (f.loc["F3", "master_shares"], f.loc["F4", "master_shares"]) == (False, False)
    (m,) = capacity.model(capacity_tags.with_shares(windows[windows["run_id"] == "b1"], runs), 2.0, n_boot=0)
    checked = capacity_fleet.check([m], f.reset_index())
    law = capacity_fleet.node_law(checked, m)
    assert law["master"]["cpu_per_request"] == pytest.approx(0.09 * 4 / (4500 * 15 * 2 * 4))
    assert not law["master"]["shares"]  # 1 of the 3 fleets that recorded it shared: most ran it elsewhere
    text = capacity_text.format_model(m, [10_000], 0.3, law)
    assert "master: elsewhere, not counted (the fleets seen ran it on another host or other CPUs)" in text


def test_a_fleet_of_another_share_is_not_checked_and_says_why(fleet_store, tmp_path):
    _fleet(fleet_store, "F2", nodes=2, users=4, rounds=1, per_node_tput=4000.0, p99_lat=900, share=2.0)
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    models = capacity.model(capacity_tags.with_shares(windows[windows["run_id"] == "b1"], runs), 2.0, n_boot=0)
    checked = capacity_fleet.check(models, capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    other = next(c for c in checked if c["run_id"] == "F2")
    assert other["group"] is None and "node share" in other["why"]
    assert "not checked: no bench sweep of the same" in capacity_text.format_check(checked, 2.0)


@pytest.mark.slow  # a process of its own: the end-to-end tier
def test_command_check_prints_predictions_errors_and_a_plot(fleet_store, capsys, tmp_path):
    png = tmp_path / "cap.png"
    code = main(["capacity", str(fleet_store.root), "--target-throughput", "9000,90000", "--p99-ms", "2",
                 "--check", "--bootstrap", "50", "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "node share 1 CPU (0)" in out and "USL: λ" in out and "target infer/s" in out
    assert "checked against measured fleets" in out and "fleet F1" in out
    assert "nodes add up as fitted over fleet runs of 2 node(s)" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_command_check_alone_needs_no_target(fleet_store, capsys):
    assert main(["capacity", str(fleet_store.root), "--p99-ms", "2", "--check", "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "checked against measured fleets" in out and "target infer/s" not in out


def test_the_plan_says_where_it_puts_the_master(fleet_store, capsys):
    """``--master elsewhere`` (a cluster) and ``shares`` (one machine) are said on the plan's master line;
    the fleets here recorded nothing of their master, so by default the plan assumes it elsewhere."""
    root = str(fleet_store.root)
    assert main(["capacity", root, "--p99-ms", "2", "--check", "--bootstrap", "0"]) == 0
    assert "master: elsewhere, not counted (assumed: no fleet seen recorded where its master ran" in capsys.readouterr().out
    assert main(["capacity", root, "--p99-ms", "2", "--target-throughput", "9000", "--bootstrap", "0", "--master", "shares"]) == 0
    out = capsys.readouterr().out
    assert "master: on the nodes' CPUs, counted (--master shares)" in out and "--neighbour burn:1" in out
    assert "(the master on the nodes' CPUs)" in next(x for x in out.splitlines() if x.strip().startswith("= 2 x"))


@pytest.mark.parametrize("extra, says", [
    (["--check"], "holds no `rig fleet` runs to check against"),
    (["--target-throughput", "5,x"], "--target-throughput must be a positive number"),
    (["--bootstrap", "-1"], "--bootstrap"),
    (["--plot", "out.svg"], "give a .png file"),
])
def test_check_and_model_bad_input_is_one_line_and_exit_2(results, capsys, extra, says):
    argv = ["capacity", str(results), "--p99-ms", "1", *extra]
    if "--target-throughput" not in extra:
        argv += ["--target-throughput", "1000"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_the_target_is_required_without_check(results, capsys):
    assert main(["capacity", str(results), "--p99-ms", "1"]) == 2
    assert "--target-throughput must be a positive number" in capsys.readouterr().err


# ---------------------------------------------------------------- a node's share of the machine (rig.common.cpushare)

@pytest.mark.parametrize("text, want", [("0", [0]), ("0,1", [0, 1]), ("1-3", [1, 2, 3]), ("0,2-3", [0, 2, 3]),
                                        ("count:2", [0, 1]), (" 3 ", [3])])
def test_cpus_parse_lists_and_counts(text, want):
    assert cpushare.parse(text, {0, 1, 2, 3}) == want


@pytest.mark.parametrize("text, says", [
    ("4", "CPU 4 is not one this process may use, a share larger than the machine"),
    ("0-7", "CPU 4-7 is not one this process may use"),
    ("count:5", "a share larger than the machine (this process may use 4 CPU(s): 0-3)"),
    ("count:0", "count:N takes a whole number"), ("a", "give CPUs as a list"), ("3-1", "give CPUs as a list"),
    ("", "give CPUs as a list"), ("1,1", "names a CPU twice"),
])
def test_cpus_bad_input_is_one_line(text, says):
    with pytest.raises(cpushare.RigError) as e:
        cpushare.parse(text, {0, 1, 2, 3})
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_share_recorded_is_the_affinity_or_a_smaller_cgroup_quota():
    assert cpushare.share({0, 1}, None, 2, None) == {"cpu_share": 2.0, "cpus": "0-1", "cpu_share_from": "machine"}
    assert cpushare.share({1}, None, 2, None)["cpu_share_from"] == "affinity"
    assert cpushare.share({1}, None, 2, [1]) == {"cpu_share": 1.0, "cpus": "1", "cpu_share_from": "--cpus"}
    assert cpushare.share({0, 1, 2, 3}, "150000/100000", 4, None) == {"cpu_share": 1.5, "cpus": "0-3",
                                                                      "cpu_share_from": "cgroup"}
    assert cpushare.share({0}, "400000/100000", 4, None)["cpu_share"] == 1.0  # the quota allows more than one CPU
    assert cpushare.cpu_list([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"


def test_a_held_process_and_what_it_starts_keep_the_share():
    """Real affinity: a child held with ``hold`` starts a grandchild (as the worker starts the
    stubs), which reports the same CPUs."""
    import os
    import subprocess
    import sys

    cpu = min(os.sched_getaffinity(0))
    code = ("import os, subprocess, sys; from rig.common import cpushare; cpushare.hold(sys.argv[1]); "
            "print(cpushare.current()); print(subprocess.run([sys.executable, '-c', "
            "'import os; print(sorted(os.sched_getaffinity(0)))'], capture_output=True, text=True).stdout)")
    out = subprocess.run([sys.executable, "-c", code, str(cpu)], capture_output=True, text=True, check=True).stdout
    assert f"'cpus': '{cpu}'" in out and "'cpu_share_from': '--cpus'" in out and f"[{cpu}]" in out


def test_a_share_larger_than_the_machine_is_refused_before_anything_runs(tmp_path, capsys):
    import os

    beyond = max(os.sched_getaffinity(0)) + 1
    for cpus in (str(beyond), f"count:{len(os.sched_getaffinity(0)) + 1}"):
        assert main(["bench", "--cpus", cpus, "--results", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert "a share larger than the machine" in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_bench_held_to_one_cpu_records_its_share_and_its_stubs_keep_it(tmp_path):
    """A real sweep on the first CPU this process may use: every process of the run (the rig, its
    worker, the backend stubs the core spawns) is held to it while it runs, the run's row records
    the share, and the capacity model reads it as a group of its own."""
    import os
    import subprocess
    import sys
    import time

    import psutil

    from helpers import ROOT
    from rig.common.probes import STUB_NAME

    cpu = min(os.sched_getaffinity(0))
    res = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "rig", "bench", "--cpus", str(cpu), "--concurrency", "1,2",
                             "--windows", "2", "--window-seconds", "1", "--repeats", "1", "--cpu-idle", "os",
                             "--results", str(res)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, text=True)
    seen: dict[str, set] = {}
    while proc.poll() is None:
        try:
            for child in psutil.Process(proc.pid).children(recursive=True):
                kind = "stub" if child.name().startswith(STUB_NAME[:15]) else "other"
                seen.setdefault(kind, set()).add(tuple(child.cpu_affinity()))
        except psutil.Error:
            pass
        time.sleep(0.2)
    out = proc.stdout.read()
    assert proc.returncode == 0, out[-2000:]
    assert seen.get("stub") == {(cpu,)} and seen.get("other") == {(cpu,)}, seen
    assert f"node share: 1 CPU(s) ({cpu}; --cpus)" in out
    (row,) = Store(res).read("runs").to_dict("records")
    assert (row["cpu_share"], row["cpus"], row["cpu_share_from"]) == (1.0, str(cpu), "--cpus")
    assert main(["capacity", str(res), "--target-throughput", "1000", "--p99-ms", "1000", "--bootstrap", "0"]) == 0


def test_the_usl_over_instances_is_fitted_from_each_counts_capacity(tmp_path):
    rows = []
    for k, inst in enumerate((1, 2, 4)):
        law = (3000.0 * usl.throughput(inst, 1, 0.2, 0.0), 0.1, 0.01)  # each count's λ: instances under Amdahl
        rows += _usl_sweep(run_id=f"i{inst}", instances=inst, law=law, seed=k)
    models = capacity.model(_frame(rows, tmp_path), 2.0, n_boot=60)
    (law,) = capacity.instance_laws(models)
    assert law["instances"] == [1, 2, 4] and law["fit"].points == 3
    caps = [capacity.capacity_of(m) for m in models]
    assert law["fit"].at(4) == pytest.approx(caps[2], rel=0.05)
    assert law["ci"]["sigma"][0] is not None
    assert "USL over instances 1, 2, 4" in capacity_text.format_instance_law(law)


# ---------------------------------------------------------------- intervals over runs, coverage, how sure


def test_runs_taken_at_different_times_widen_the_interval_and_their_spread_is_stated(tmp_path):
    """Two runs of one sweep, the second 20 % slower (a machine that drifted between them): the
    resamples draw whole runs first, so the interval covers both runs' levels, where one run's
    repeats alone give a narrow one; the plan states the spread it saw."""
    one = _usl_sweep(run_id="b1", noise=0.01)
    slow = (LAW[0] * 0.8, LAW[1], LAW[2])
    two = one + _usl_sweep(run_id="b2", law=slow, seed=2, noise=0.01)
    (m1,) = capacity.model(_frame(one, tmp_path / "one"), p99_ms=2.0, n_boot=300)
    (m2,) = capacity.model(_frame(two, tmp_path / "two"), p99_ms=2.0, n_boot=300)
    width = {k: (m["ci"]["lam"][1] - m["ci"]["lam"][0]) / m["fit"].lam for k, m in (("one", m1), ("two", m2))}
    assert width["two"] > 4 * width["one"], width
    assert m2["ci"]["lam"][0] < LAW[0] * 0.85 and m2["ci"]["lam"][1] > LAW[0] * 0.95  # both levels inside
    assert m1["spread"] == {"runs": 1, "between_runs": None, "within_runs": pytest.approx(m1["spread"]["within_runs"])}
    assert m2["spread"]["runs"] == 2 and m2["spread"]["between_runs"] == pytest.approx(0.22, abs=0.06)
    text1 = capacity_text.format_model(m1, [10_000], 0.3, None)
    assert "resamples of one run's repeats" in text1 and "one run, so the interval leaves out" in text1
    text2 = capacity_text.format_model(m2, [10_000], 0.3, None)
    assert "resamples of the 2 runs, then of their repeats" in text2 and "2 runs' throughput at a load within" in text2


def test_a_resample_of_runs_keeps_a_load_only_some_runs_measured():
    """A load one run measured and the other did not still gets repeats in every resample."""
    import pandas as pd

    rows = [dict(point=n, run_id=r, cycle=c, requests=1000.0, seconds=1.0, errors=0, p99_us=100.0,
                 throughput=1000.0, counts=None, hist=None)
            for r, loads in (("a", (1, 2, 4)), ("b", (1, 2))) for c, n in enumerate(loads * 2)]
    sw = capacity_sweep.Sweep(pd.DataFrame(rows))
    rng = np.random.default_rng(0)
    for _ in range(50):
        pick = sw.resample(rng)
        assert len(pick) == 3 and all(p.size for p in pick)
        assert set(sw.run[pick[2]]) == {"a"}


def test_check_reports_whether_each_fleet_fell_inside_and_the_coverage(fleet_store):
    _fleet(fleet_store, "F9", nodes=2, users=4, rounds=2, per_node_tput=2000.0, p99_lat=5000)  # far off
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    (m,) = capacity.model(capacity_tags.with_shares(windows[windows["run_id"] == "b1"], runs), 2.0, n_boot=100)
    checked = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    far = next(c for c in checked if c["run_id"] == "F9")
    assert far["throughput_inside"] is False and far["throughput_near"] is False
    assert far["p99_inside"] is False and far["p99_near"] is False
    lo, hi = far["predicted_p99_ci"]
    assert lo <= far["predicted_p99_us"] <= hi
    got = capacity_fleet.coverage(checked)
    assert got["throughput"]["checked"] == 2 and "F9" in got["throughput"]["missed"]
    assert got["p99"]["checked"] == 2 and "F9" in got["p99"]["missed"]
    text = capacity_text.format_check(checked, 2.0)
    assert "OUTSIDE the estimate's interval; OUTSIDE the interval for one run" in text
    assert "coverage of the bench sweeps with neighbour none, each fleet judged by a plan that did not see it" in text
    assert "throughput: " in text and "not covered: " in text and "F9" in text.split("coverage")[1]


def test_one_repeats_deviation_from_its_pool_is_scaled_to_a_new_measurements():
    """Two repeats of a load at 900 and 1,100 infer/s (pooled 1,000): each deviates by its log ratio,
    times sqrt(2 / 1), as a new measurement strays further from a pool than the pool's own members."""
    import pandas as pd

    rows = [dict(point=1, run_id="a", cycle=c, requests=x, seconds=1.0, errors=0, p99_us=p, throughput=x,
                 counts=None, hist=None) for c, (x, p) in enumerate(((900.0, 200.0), (1100.0, 300.0)))]
    rows.append(dict(point=2, run_id="a", cycle=9, requests=1.0, seconds=1.0, errors=0, p99_us=1.0, throughput=1.0,
                     counts=None, hist=None))  # one repeat: no deviation to read
    d = capacity_sweep.Sweep(pd.DataFrame(rows)).deviations()
    assert d["throughput"] == pytest.approx(np.sqrt(2) * np.log([0.9, 1.1]))
    assert d["p99"] == pytest.approx(np.sqrt(2) * np.log([200 / 250, 300 / 250]))  # the pool's p99: their median


def test_a_fleet_run_is_judged_against_the_interval_for_one_run_as_well(fleet_store):
    """A fleet run is one measurement: where it lands outside the estimate's interval but inside the
    interval for one run (the estimate's draws, each times one run's deviation), it is covered and
    says both; the coverage counts each. F7 is judged by the law over F1, the fleet the plan saw."""
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    (m,) = capacity.model(capacity_tags.with_shares(windows[windows["run_id"] == "b1"], runs), 2.0, n_boot=300)
    (c,) = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    (clo, chi), (plo, phi) = c["predicted_usl_ci"], c["predicted_usl_pi"]
    assert c["law"]["prior"] and plo < clo <= c["predicted_usl"] <= chi < phi  # the only fleet: the prior judges it
    want = capacity_fleet.expected(m, 2.0, 2, capacity_fleet.node_law([c], m))  # the plan that saw F1
    (clo, chi), (plo, phi) = want["throughput_ci"], want["throughput_pi"]
    between = (chi + phi) / 2 / 2  # a node's share of a fleet between the two upper ends
    _fleet(fleet_store, "F7", nodes=2, users=4, rounds=2, per_node_tput=between, p99_lat=900)
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    checked = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    f7 = next(x for x in checked if x["run_id"] == "F7")
    assert f7["law"]["seen"] == ["F1"] and f7["predicted_usl_pi"] == pytest.approx((plo, phi))
    assert f7["throughput_inside"] is False and f7["throughput_inside_run"] is True
    assert f7["throughput_run_span"] < capacity_fleet.WIDE
    got = capacity_fleet.coverage([f7])["throughput"]
    assert (got["inside"], got["inside_run"], got["wide"], got["missed"]) == (0, 1, 0, [])
    text = capacity_text.format_check([f7], 2.0)
    assert "OUTSIDE the estimate's interval; inside the interval for one run (USL's)" in text
    assert "0 of 1 fleet(s) inside the estimate's interval, 1 of 1 inside the interval for one run" in text


def test_an_interval_for_one_run_wider_than_a_factor_of_two_covers_nothing():
    row = {"group": {}, "run_id": "X", "by": "usl", "error_usl_pct": 40.0, "error_p99_pct": 5.0,
           "throughput_inside": False, "throughput_inside_run": True, "throughput_run_span": 3.0,
           "throughput_near": False, "p99_inside": None, "p99_inside_run": True, "p99_run_span": 1.5,
           "p99_near": True}
    got = capacity_fleet.coverage([row])
    assert (got["throughput"]["inside_run"], got["throughput"]["wide"], got["throughput"]["missed"]) == (0, 1, ["X"])
    assert (got["p99"]["inside_run"], got["p99"]["wide"], got["p99"]["missed"]) == (1, 0, [])
    assert "which spans 3.0x (too wide to plan on: not covered)" in capacity_text.inside(False, True, 3.0)


def test_a_target_whose_interval_spans_more_than_a_factor_of_two_asks_for_more_measurement(tmp_path):
    rows = _usl_sweep(run_id="b1", noise=0.01) + _usl_sweep(run_id="b2", law=(LAW[0] * 0.35, LAW[1], LAW[2]), seed=3)
    (m,) = capacity.model(_frame(rows, tmp_path), p99_ms=50.0, n_boot=200)
    text = capacity_text.format_model(m, [200_000], 0.3, None)
    assert "how sure: the interval spans more than a factor of two for 200,000 infer/s" in text, text
    assert "rig fleet at 3 and 4 nodes" in text


# ---------------------------------------------------------------- a node under a neighbour (runs.neighbour, schema 18)


def test_sweeps_under_different_neighbours_are_groups_apart_and_say_which(tmp_path):
    """A node alone and the same node beside a burner are two groups, each title naming its
    neighbour; a run stored before schema 18 (no neighbour recorded) ran none."""
    store = Store(tmp_path)
    old = _runs_row("b0", share=1.0, cpus="0")
    burn = dataclasses.replace(_runs_row("b2", share=1.0, cpus="0"), neighbour="burn:30")
    store.write("runs", [old, burn], "2.51.0", "r")
    store.write("windows", _sweep(1, {1: (5000, 200)}, run_id="b0") + _sweep(1, {1: (3500, 300)}, run_id="b2"),
                "2.51.0", "w")
    w = capacity_tags.with_shares(store.read("windows"), store.read("runs"))
    assert set(w["neighbour"]) == {"none", "burn:30"}
    plan = capacity.plan(w, target=10_000, p99_ms=1.0)
    assert sorted((r.neighbour, round(r.throughput)) for r in plan.itertuples()) == [("burn:30", 3500), ("none", 5000)]
    text = capacity.format_plan(plan, 10_000, 1.0, 0.3)
    assert "node share 1 CPU, neighbour none:" in text and "node share 1 CPU, neighbour burn:30:" in text
    models = capacity.model(w, 1.0, n_boot=0)
    assert sorted(m["neighbour"] for m in models) == ["burn:30", "none"]


def test_check_puts_each_fleet_beside_every_neighbours_sweep_labelled(fleet_store):
    """One fleet, two sweeps of its node (alone, and beside burn:30, 30 % slower): the fleet is checked
    against both, each row and coverage line labelled with its neighbour, none first."""
    fleet_store.write("runs", [dataclasses.replace(_runs_row("b3", share=1.0, cpus="0"), neighbour="burn:30")],
                      "2.51.0", "run-b3")
    fleet_store.write("windows", _usl_sweep(run_id="b3", law=(LAW[0] * 0.7, LAW[1], LAW[2]), seed=5), "2.51.0", "b3")
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    bench = windows[windows["run_id"].isin(["b1", "b3"])]
    models = capacity.model(capacity_tags.with_shares(bench, runs), 2.0, n_boot=50)
    checked = capacity_fleet.check(models, capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    assert [(c["run_id"], c["neighbour"]) for c in checked] == [("F1", "none"), ("F1", "burn:30")]
    alone, burnt = checked
    assert alone["group"]["neighbour"] == "none" and burnt["group"]["neighbour"] == "burn:30"
    assert burnt["predicted_linear"] < alone["predicted_linear"]
    text = capacity_text.format_check(checked, 2.0)
    assert text.count("fleet F1:") == 1
    assert "predicted by the bench sweep with neighbour none" in text
    assert "predicted by the bench sweep with neighbour burn:30" in text
    assert "coverage of the bench sweeps with neighbour none" in text and "of the bench sweeps with neighbour burn:30" in text
    assert "mean |error|" in text
    for m in models:  # each neighbour's node law from its own rows only
        assert capacity_fleet.node_law(checked, m)["nodes"] == [2]


def test_the_plan_states_what_its_check_fleet_should_measure_as_check_will_judge_it(fleet_store):
    """The plan names the fleet to check it with and what that fleet should measure by the node law it
    prints (fitted over the fleet it saw, F1): the estimate, its interval and the interval for one run,
    the very figures ``--check`` then judges a new fleet by (one the plan did not see)."""
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    (m,) = capacity.model(capacity_tags.with_shares(windows[windows["run_id"] == "b1"], runs), 2.0, n_boot=300)
    seen = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    law = capacity_fleet.node_law(seen, m)
    assert law["seen"] == ["F1"] and law["sigma"] > 0  # F1 served less than two nodes sharing nothing
    whole = math.floor(m["load"] + 1e-9)
    want = capacity_fleet.expected(m, whole, 2, law)
    (tlo, thi), (plo, phi) = want["throughput_pi"], want["p99_pi"]
    assert tlo < want["throughput"] < thi and plo < want["p99_us"] < phi
    node = want["per_node"]
    assert want["throughput"] == pytest.approx(2 * node / (1 + law["sigma"]))  # 2 x one node x the printed law
    text = capacity_text.format_model(m, [10_000], 0.3, law)
    assert f"nodes add up as fitted over fleet runs of 2 node(s): σ {law['sigma']:.3g}" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("expect:"))
    assert f"{want['throughput']:,.0f} (" in line and f"one run {tlo:,.0f}-{thi:,.0f})" in line
    assert f"one run {plo:,.0f}-{phi:,.0f})" in line
    how = text.splitlines()[text.splitlines().index(line) + 1]
    assert f"2 x {node:,.0f} infer/s a node x {1 / (1 + law['sigma']):.3g} (the node law above at 2 nodes)" in how
    # a fleet of 2 at that load, which the plan did not see, is judged against the same figures
    _fleet(fleet_store, "F9", nodes=2, users=2 * whole, rounds=2, per_node_tput=want["throughput"] / 2, p99_lat=900)
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    checked = capacity_fleet.check([m], capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    f9 = next(x for x in checked if x["run_id"] == "F9")
    assert f9["law"]["seen"] == ["F1"]
    key = "usl" if m["by"] == "usl" else "linear"
    assert f9[f"predicted_{key}"] == pytest.approx(want["throughput"])
    assert f9[f"predicted_{key}_pi"] == pytest.approx(want["throughput_pi"])
    assert f9["predicted_p99_pi"] == pytest.approx(want["p99_pi"])
    assert f9["throughput_near"] and f9[f"error_{key}_pct"] == pytest.approx(0, abs=1.0)


def test_a_sweep_with_the_cpus_held_awake_is_a_group_apart_and_a_fleet_is_checked_against_both(fleet_store):
    """A node swept with its CPUs left to halt (``cpu_idle`` os) and again held awake (pm_qos, half as
    fast again here) is two groups, never pooled: the held one labelled so, and a fleet (whose nodes
    never hold) checked against each, the CPUs-left-to-idle sweep first."""
    fleet_store.write("runs", [dataclasses.replace(_runs_row("b4", share=1.0, cpus="0"), cpu_idle="pm_qos")],
                      "2.51.0", "run-b4")
    fleet_store.write("windows", _usl_sweep(run_id="b4", law=(LAW[0] * 1.5, LAW[1], LAW[2]), seed=6), "2.51.0", "b4")
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    w = capacity_tags.with_shares(windows[windows["run_id"].isin(["b1", "b4"])], runs)
    assert set(w["neighbour"]) == {"none", "none, CPUs held awake"} and "cpu_idle" not in w
    models = capacity.model(w, 2.0, n_boot=50)
    assert sorted(m["neighbour"] for m in models) == ["none", "none, CPUs held awake"]
    checked = capacity_fleet.check(models, capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows))
    assert [(c["run_id"], c["neighbour"]) for c in checked] == [("F1", "none"), ("F1", "none, CPUs held awake")]
    assert checked[1]["predicted_linear"] > checked[0]["predicted_linear"]
    text = capacity.format_plan(capacity.plan(w, target=10_000, p99_ms=2.0), 10_000, 2.0, 0.3)
    assert "neighbour none:" in text and "neighbour none, CPUs held awake:" in text
    # the held sweep's plan asks for a fleet whose nodes hold theirs too, and such a fleet says so
    idle, held = sorted(models, key=lambda m: m["neighbour"])
    assert "--in-flight 1 --cpu-idle hold)" in capacity_text.format_model(held, [10_000], 0.3, None)
    assert "--cpu-idle hold" not in capacity_text.format_model(idle, [10_000], 0.3, None)
    assert "CPUs held awake" not in capacity_text.format_check(checked, 2.0).splitlines()[1]
    _fleet(fleet_store, "F8", nodes=2, users=4, rounds=2, per_node_tput=4500.0, p99_lat=900, cpu_idle="poll")
    runs, windows = fleet_store.read("runs"), fleet_store.read("windows")
    f = capacity_fleet.fleet_runs(fleet_store.read("fleet"), runs, windows).set_index("run_id")
    assert (bool(f.loc["F1", "held"]), bool(f.loc["F8", "held"])) == (False, True)
    text = capacity_text.format_check(capacity_fleet.check(models, f.reset_index()), 2.0)
    assert "fleet F8: 2 node(s) (a:0, b:1), Triton 2.51.0, engine capi, model numpy, node share 1 CPU, CPUs held awake, 4 user(s)" in text


def test_the_kept_idle_store_tells_which_sweep_predicts_which_fleet(capsys):
    """The measured store of docs/measurements/capacity.md ("Which sweep predicts a fleet"): quota
    nodes swept with their CPUs left to idle and held awake, fleets of 1 and 4 nodes. The sweeps stay
    two groups; the four-node fleets fall within 10 % of the held sweep's prediction and the one-node
    fleets within 16 % of the idle one's (the chosen model, the linear baseline); the plan says that
    nodes served more together than alone."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "capacity-idle-store"
    store = Store(root)
    runs, every = store.read("runs"), store.read("windows")
    bench = every[every["run_id"].isin(set(runs[runs["command"] == "bench"]["run_id"])) & (every["tool"] == "rig")]
    models = capacity.model(capacity_tags.with_shares(bench, runs), 5.0, n_boot=50)
    assert sorted(m["neighbour"] for m in models) == ["none", "none, CPUs held awake"]
    checked = capacity_fleet.check(models, capacity_fleet.fleet_runs(store.read("fleet"), runs, every))
    err = {(c["nodes"], c["neighbour"]): [] for c in checked}
    for c in checked:
        assert c["by"] == "linear"
        err[(c["nodes"], c["neighbour"])].append(c["raw_error_linear_pct"])  # the sweep alone
    assert all(abs(e) <= 10 for e in err[(4, "none, CPUs held awake")]) and all(e > 15 for e in err[(4, "none")])
    assert all(abs(e) <= 16 for e in err[(1, "none")]) and all(e < -20 for e in err[(1, "none, CPUs held awake")])
    assert main(["capacity", str(root), "--p99-ms", "5", "--check", "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert out.count("nodes served more together than alone") == 2


def test_the_kept_bound_store_covers_its_fleets_at_the_bound():
    """docs/measurements/capacity.md, "At the bound on whole CPUs": two idle sweeps and three 2-node
    fleets at the load the plan put at p99 1 ms. By the idle sweeps' prediction, every fleet's
    throughput is within 10 % and its p99 inside the interval for one run."""
    from pathlib import Path

    store = Store(Path(__file__).resolve().parents[2] / "docs" / "measurements" / "capacity-bound-store")
    runs, every = store.read("runs"), store.read("windows")
    bench = every[every["run_id"].isin(set(runs[runs["command"] == "bench"]["run_id"])) & (every["tool"] == "rig")]
    models = capacity.model(capacity_tags.with_shares(bench, runs), 1.0, n_boot=200)
    checked = capacity_fleet.check(models, capacity_fleet.fleet_runs(store.read("fleet"), runs, every))
    idle = [c for c in checked if c["neighbour"] == "none"]
    assert len(idle) == 3 and all(c["at_bound"] for c in idle)
    got = capacity_fleet.coverage(idle)
    assert got["throughput"]["near"] == 3 and got["p99"]["inside_run"] == 3, got


def test_the_kept_loo_store_judges_each_fleet_by_a_plan_that_did_not_see_it():
    """docs/measurements/capacity.md, "Judged by a plan that did not see the fleet": Triton's add_sub
    (python_backend's example) and tests/corpus/memo_bounded, 3 sweeps and 3 two-node fleets each, on
    a busy 2-vCPU VM. No fleet is judged by a law fitted to it; the sweep alone missed add_sub's fleets
    by 29-34 % in throughput, the law over the other two fleets by under 10 %; the plan's expect line
    is 2 x one node x the law it prints."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "capacity-loo-store"
    store = Store(root)
    runs, every = store.read("runs"), store.read("windows")
    bench = every[every["run_id"].isin(set(runs[runs["command"] == "bench"]["run_id"])) & (every["tool"] == "rig")]
    models = capacity.model(capacity_tags.with_shares(bench, runs), 5.0, n_boot=200)
    checked = capacity_fleet.check(models, capacity_fleet.fleet_runs(store.read("fleet"), runs, every))
    assert {c["model"] for c in checked} == {"add_sub", "memo_bounded"} and len(checked) == 6
    for c in checked:
        assert c["run_id"] not in c["law"]["seen"] and len(c["law"]["seen"]) == 2
        assert c["master_shares"] is True and 0 < c["master_cpu_s"] < 1
    add_sub = [c for c in checked if c["model"] == "add_sub"]
    assert all(-35 < c["raw_error_linear_pct"] < -25 for c in add_sub)
    assert all(abs(c["error_linear_pct"]) < 10 for c in add_sub), [c["error_linear_pct"] for c in add_sub]
    (m,) = [m for m in models if m["model"] == "add_sub"]
    law = capacity_fleet.node_law(checked, m)
    want = capacity_fleet.expected(m, math.floor(m["load"] + 1e-9), 2, law)
    assert want["throughput"] == pytest.approx(2 * want["per_node"] * want["factors"]["master"] / (1 + law["sigma"]))
    line = next(x for x in capacity_text.format_model(m, [20_000], 0.3, law).splitlines() if "expect:" in x)
    assert f"{want['throughput']:,.0f} (" in line
