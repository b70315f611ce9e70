"""`rig bench` as a fair comparison with perf_analyzer (repeats in alternating order, every repeat
stored, perf_analyzer's own windows with real counts) and its --instances sweep, on the real core;
`rig capacity` over that store."""

from __future__ import annotations

import re

import pytest

from helpers import rig
from rig.parent import perf_analyzer as pa
from rig.cli import main
from rig.common.errors import RigError
from rig.store import Store


@pytest.fixture(scope="module")
def has_pa():
    try:
        pa.ensure_perf_analyzer(log=print)
        return True
    except RigError as e:
        print(f"perf_analyzer unavailable ({e}): the sweep runs without --compare")
        return False


@pytest.fixture(scope="module")
def bench(tmp_path_factory, has_pa):
    """One short sweep: concurrency 2, 2 repeats, 1 and 2 instances (with perf_analyzer when here)."""
    res = tmp_path_factory.mktemp("bench") / "r"
    p = rig("bench", "--concurrency", "2", "--windows", "2", "--window-seconds", "0.5", "--repeats", "2",
            "--instances", "1,2", *(["--compare", "perf-analyzer"] if has_pa else []),
            "--results", str(res), timeout=400)
    print(p.stdout[-4000:], p.stderr[-2000:])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return res, p.stdout, Store(res).read("windows")


@pytest.mark.slow
def test_every_repeat_of_the_rig_is_stored_per_instance_count(bench):
    res, out, w = bench
    rig_w = w[w.tool == "rig"]
    assert sorted(rig_w.instances.unique()) == [1, 2]
    for n, g in rig_w.groupby("instances"):
        assert g.cycle.nunique() == 2, f"{n} instance(s): one cycle per repeat"
        assert (g.groupby("cycle").window.count() == 2).all()
        assert (g.concurrency == 2).all() and (g.requests > 0).all()
    assert len(Store(res).read("cycles")) == 4
    (run_id,) = w.run_id.unique()
    config = (res / "_work" / run_id / "models-i2" / "numpy" / "config.pbtxt").read_text()
    assert re.search(r"count:\s*2\b", config), config
    assert re.search(r"^\s*inst\s+point", out, re.M), "the sweep's table is printed"
    (held,) = Store(res).read("runs").cpu_idle  # the default: CPUs held out of idle for every tool
    assert held in ("poll", "pm_qos") and "cpu idle: held awake for every tool" in out


@pytest.mark.slow
def test_perf_analyzer_rows_are_its_windows_with_real_counts(bench, has_pa):
    if not has_pa:
        pytest.skip("perf_analyzer unavailable here")
    res, out, w = bench
    pw = w[w.tool == "perf_analyzer"]
    rig_cycles = set(w[w.tool == "rig"].cycle)
    assert sorted(pw.instances.unique()) == [1, 2]
    assert set(pw.cycle) == rig_cycles, "a repeat's rig and perf_analyzer rows share its cycle"
    for cycle, g in pw.groupby("cycle"):
        assert len(g) >= 3, "perf_analyzer measures at least 3 windows"
        assert (g.requests > 0).all() and (g.length_s > 0).all()
        assert (g.throughput - g.requests / g.length_s).abs().max() < 1e-6
        assert g.histogram.notna().all() and (g.p50_us <= g.p99_us).all()
        assert (g.concurrency == 2).all()
    assert "PA infer/s" in out and "tput x" in out


@pytest.mark.slow
def test_repeats_alternate_the_order(bench, has_pa):
    if not has_pa:
        pytest.skip("perf_analyzer unavailable here")
    _, out, _ = bench
    order = re.findall(r"\[i(\d) c2 round (\d)/2\] (rig|perf_analyzer)", out)
    for n in ("1", "2"):
        seq = [(r, tool) for i, r, tool in order if i == n]
        assert seq == [("1", "rig"), ("1", "perf_analyzer"), ("2", "perf_analyzer"), ("2", "rig")], seq


@pytest.mark.slow
def test_capacity_over_the_bench_store(bench):
    res, _, _ = bench
    p = rig("capacity", str(res), "--target-throughput", "50000", "--p99-ms", "1000", "--headroom", "0.5")
    assert p.returncode == 0, p.stderr
    lines = [line.split() for line in p.stdout.splitlines() if re.match(r"\s+[12]\s+2\s", line)]
    assert [row[0] for row in lines] == ["1", "2"], p.stdout  # a row per instance count, point 2 met
    assert "headroom 50%" in p.stdout and "fewest nodes:" in p.stdout


# ---------------------------------------------------------------- refused before anything runs

@pytest.mark.parametrize("args, says", [
    (["--workload", "ramp"], "--workload ramp changes the users"),
    (["--instances", "1,1"], "lists a count twice"),
    (["--instances", "1,x"], "--instances takes whole numbers"),
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--all-models", "--compare", "perf-analyzer"], "perf_analyzer measures one"),
    (["--all-models", "--target-model", "numpy"], "drop one"),
])
def test_bench_refuses_in_one_line(tmp_path, capsys, args, says):
    assert main(["bench", "--concurrency", "1", "--results", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r" / "runs").exists(), "nothing ran"


@pytest.mark.slow
def test_bench_refuses_a_locustfile_with_a_shape(tmp_path, capsys, repo_root):
    code = main(["bench", "--concurrency", "1", "--workload", str(repo_root / "workloads" / "spike.py"),
                 "--results", str(tmp_path / "r")])
    assert code == 2 and "LoadTestShape SpikeShape" in capsys.readouterr().err


def _slow_requests(w, at_least_us=19_000) -> int:
    """Requests of these windows that took ``at_least_us`` or more (from their HDR histograms)."""
    from hdrh.histogram import HdrHistogram

    n = 0
    for b64 in w.histogram.dropna():
        h = HdrHistogram.decode(b64)  # the standard encoding, as it is
        n += sum(i.count_added_in_this_iter_step for i in h.get_recorded_iterator()
                 if i.value_iterated_to >= at_least_us)
    return n


@pytest.mark.slow
def test_a_repository_of_two_models_is_benched_on_one(tmp_path):
    """The load goes to the target model only: ``a`` sleeps 20 ms per request, ``b`` does not;
    four users on ``b`` see almost no request of 20 ms (a stall of the machine may make a few),
    where spread over both (the control, --all-models) two users wait on ``a`` all along: its one
    instance, busy with them, answers one request per 20 ms (and no more)."""
    from rig.parent import repository

    repo = tmp_path / "repo"
    repository.render(repository.ModelSpec(name="a", execute_delay_ms=20), repo)
    repository.render(repository.ModelSpec(name="b"), repo)
    common = ["--model-repository", str(repo), "--concurrency", "4", "--windows", "2", "--window-seconds",
              "0.5", "--repeats", "1"]
    p = rig("bench", *common, "--target-model", "b", "--results", str(tmp_path / "b"))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    w = Store(tmp_path / "b").read("windows")
    assert set(w.model) == {"b"} and w.instances.isna().all() and (w.requests > 0).all()
    on_b = _slow_requests(w)
    p = rig("bench", *common, "--all-models", "--results", str(tmp_path / "all"))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    w = Store(tmp_path / "all").read("windows")
    spread = _slow_requests(w)
    assert set(w.model) == {"a,b"}
    at_most = w.length_s.sum() / 0.020  # what `a` can answer in the time measured
    print("requests of 20 ms or more: on b", on_b, "spread", spread, "a's most", at_most)
    assert at_most / 4 <= spread <= at_most + len(w), "a busy `a` (a generous quarter of its most, at least)"
    assert on_b < spread / 4, "stalls of the machine, not a model that sleeps"


@pytest.mark.slow
def test_bench_windows_last_five_seconds_unless_told(tmp_path):
    """Without --window-seconds (and no config file setting it), a bench window is perf_analyzer's
    5 s measurement interval, not a soak's 1 s: the header says so and the stored window lasted it."""
    p = rig("bench", "--concurrency", "1", "--windows", "1", "--repeats", "1", "--results", str(tmp_path / "r"),
            timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "1 windows of 5.0 s per point" in p.stdout
    w = Store(tmp_path / "r").read("windows")
    assert len(w) == 1 and w.length_s.iloc[0] >= 4.5 and w.requests.iloc[0] > 0


@pytest.mark.slow
def test_where_the_time_goes_for_both_tools_side_by_side(bench, has_pa):
    """Issue 42: every window holds Triton's statistics, the rig's read through its engine,
    perf_analyzer's from its own server summary; the table shows both at each point."""
    from rig.contract import server_stats

    _, out, w = bench
    rig_w = w[w.tool == "rig"]
    assert rig_w.server_success.notna().all() and (rig_w.server_success > 0).all()
    assert "where the time goes" in out and re.search(r"^\s+1\s+2 rig\s+\d", out, re.M)
    if not has_pa:
        return
    for cycle, g in w[w.tool == "perf_analyzer"].groupby("cycle"):
        t = server_stats.over_windows(g.to_dict("records"))
        assert t and t["request_us"] > 0 and t["compute_infer_us"] > 0, f"repeat {cycle}: no server figures"
        assert t["success"] == pytest.approx(g.requests.sum(), abs=len(g))  # its counts, shared by requests
    assert re.search(r"^\s+1\s+2 perf_analyzer\s+\d", out, re.M), out
