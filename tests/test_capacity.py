"""Capacity planning (analysis/capacity.py, `rig capacity`) over windows written through the store."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rig import hdr
from rig.analysis import capacity
from rig.cli import main
from rig.store import Store
from rig.protocol import RunRow, window_row


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
    w = capacity.measured_windows(_frame(rows, tmp_path))
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
