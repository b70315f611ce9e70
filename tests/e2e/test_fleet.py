"""Locust's distributed mode: a `rig fleet` master and two nodes (`rig soak --locust-master`) on
loopback, each node hosting its own real Triton server; one node killed mid-run."""

from __future__ import annotations

import platform
import socket
import subprocess
import time

import psutil
import pytest

from helpers import rig, spawn

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in {path} within {timeout} s:\n{path.read_text()}")


def _kill_tree(proc: subprocess.Popen) -> list[int]:
    """SIGKILL a node as a machine dies: the rig, its worker and the stubs, all at once."""
    parent = psutil.Process(proc.pid)
    tree = [parent, *parent.children(recursive=True)]
    for p in tree:
        try:
            p.kill()
        except psutil.Error:
            pass
    return [p.pid for p in tree]


def test_two_nodes_one_killed_mid_run(tmp_path):
    from rig.store import Store

    results, port = tmp_path / "store", _free_port()
    out = tmp_path / "master.log"
    cycles = ("--cycles", "3")
    with open(out, "w") as log:
        master = spawn("fleet", "--nodes", "2", *cycles, "--users", "4", "--workload-seconds", "2",
                       "--port", str(port), "--join-timeout", "15", "--results", str(results),
                       stdout=log, stderr=subprocess.STDOUT)
    _wait_for(out, "listening on", 60)  # a node checks first that its master listens
    held = {"a": ("--cpu-idle", "hold"), "b": ()}  # a node may hold its CPUs awake, as a sweep does
    nodes = {name: spawn("soak", "--locust-master", f"127.0.0.1:{port}", "--node", name, *cycles, *held[name],
                         "--results", str(results), stdout=open(tmp_path / f"{name}.log", "w"),
                         stderr=subprocess.STDOUT) for name in ("a", "b")}
    try:
        _wait_for(out, "round 2/3: 2 node(s) joined", 120)
        time.sleep(1.0)
        killed = _kill_tree(nodes["b"])
        assert master.wait(180) == 1, out.read_text()  # a node was lost: FAIL, but the run ran out
        assert nodes["a"].wait(120) == 0, (tmp_path / "a.log").read_text()
    finally:
        for p in (master, *nodes.values()):
            if p.poll() is None:
                p.kill()
    text = out.read_text()
    print(text, f"killed {killed}")
    assert "Traceback" not in text
    assert "FAIL: round 2: node b lost: went silent" in text and "FAIL: round 3: node b absent" in text

    store = Store(results)
    fleet = store.read("fleet").sort_values(["round", "node"])
    got = {(r.round, r.node): r.outcome for r in fleet.itertuples()}
    assert got == {(1, "*"): "ok", (1, "a"): "ok", (1, "b"): "ok",
                   (2, "*"): "degraded", (2, "a"): "ok", (2, "b"): "lost",
                   (3, "*"): "degraded", (3, "a"): "ok", (3, "b"): "absent"}, fleet.to_string()
    assert fleet.run_id.nunique() == 1
    idle = {r.host: r.cpu_idle for r in store.read("runs").itertuples()}
    assert idle["a"] in ("pm_qos", "poll") and not isinstance(idle["b"], str), idle  # b: null, not asked
    assert "cpu idle: held awake for the whole run" in (tmp_path / "a.log").read_text()
    total = fleet[fleet.node == "*"].set_index("round")
    nodes_ok = fleet[(fleet.node != "*") & (fleet.outcome == "ok")]
    # the total is the sum of the nodes that reported; where all did, Locust's master counted the
    # same requests (a node killed mid-round may have sent Locust a report before it died)
    assert (total.requests == nodes_ok.groupby("round").requests.sum()).all()
    whole = total.outcome == "ok"
    assert (total.requests > 0).all() and whole.any(), total.to_string()
    assert (total.locust_requests[whole] == total.requests[whole]).all(), total.to_string()
    assert (total.locust_requests[~whole] >= total.requests[~whole]).all(), total.to_string()
    assert total.p99_us.notna().all() and total.histogram.notna().all()
    # the master's CPU over each round's load, its machine and CPUs; each node's machine (Locust's worker id)
    assert (total.master_cpu_s > 0).all() and set(total.host) == {platform.node()}, total.to_string()
    assert total.master_cpus.notna().all() and set(nodes_ok.host) == {platform.node()}

    # every node stored its own rows, tagged with its name
    windows, cycles_ = store.read("windows"), store.read("cycles")
    assert set(windows.host) == {"a", "b"} and set(cycles_.host) == {"a", "b"}
    assert (windows.groupby("host").requests.sum() > 0).all()
    a = cycles_[cycles_.host == "a"]
    assert sorted(a.cycle) == [1, 2, 3] and (a.outcome == "clean").all(), a.to_string()
    runs = store.read("runs")
    assert set(runs.host) == {"a", "b"}
    # the fleet's rows name each node's run and cycle
    ok_a = fleet[(fleet.node == "a")]
    assert set(ok_a.node_run_id) == set(runs[runs.host == "a"].run_id) and sorted(ok_a.node_cycle) == [1, 2, 3]


def test_a_node_without_a_master_and_bad_addresses_are_one_line(tmp_path):
    port = _free_port()  # nothing listens there
    p = rig("soak", "--locust-master", f"127.0.0.1:{port}", "--node", "x", "--results", str(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stdout + p.stderr
    assert f"no `rig fleet` master listens at 127.0.0.1:{port}" in p.stderr
    for bad in ("nowhere", "host:99999", "host:"):
        q = rig("soak", "--locust-master", bad, "--results", str(tmp_path / "bad"))
        assert q.returncode == 2 and q.stderr.count("\n") == 1 and "--locust-master takes HOST:PORT" in q.stderr
    q = rig("soak", "--locust-master", "127.0.0.1:5557", "--users", "3", "--results", str(tmp_path / "bad"))
    assert q.returncode == 2 and "--users come(s) from the `rig fleet` master" in q.stderr
    q = rig("fleet", "--nodes", "3", "--users", "2")
    assert q.returncode == 2 and "leaves a node without a user" in q.stderr
