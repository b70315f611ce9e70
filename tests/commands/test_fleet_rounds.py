"""`rig fleet`'s rounds (rig.workflows.fleet) and what the command prints of them, with a stand-in for
Locust's master: no Locust, no Triton (the real thing, two nodes on loopback: tests/e2e/test_fleet.py)."""

from __future__ import annotations

import argparse
import types
from typing import ClassVar

from rig.commands import fleet as fleet_command
from rig.common import hdr
from rig.common.errors import Exit
from rig.store import Store
from rig.workflows import fleet


def _hist(*latencies_us: int) -> str:
    h = hdr.new()
    for v in latencies_us:
        h.record_value(v)
    return hdr.encode(h)


def _args(tmp_path, **kw) -> argparse.Namespace:
    base = dict(
        nodes=2,
        cycles=2,
        users=None,
        workload_seconds=2.0,
        window_seconds=1.0,
        join_timeout=5.0,
        port=5557,
        bind="127.0.0.1",
        results=str(tmp_path / "store"),
        allow_node_loss=False,
    )
    return argparse.Namespace(**{**base, **kw})


def _report(requests: int, *latencies: int) -> dict:
    return {
        "run_id": "n-run",
        "cycle": 1,
        "requests": requests,
        "errors": 0,
        "throughput": requests / 2.0,
        "histograms": [_hist(*latencies)],
    }


def _hello(version="2.51.0") -> tuple:
    return (None, {"run_id": "n-run", "cycle": 1, "triton_version": version})


class FakeMaster:
    """Plays the scripted rounds: each ``(joined names, reports by name, missing_at, refused)``."""

    script: ClassVar[list] = []

    def __init__(self, a, log):
        self.a, self.log = a, log
        self.rounds = list(self.script)
        self.refused: dict[str, str] = {}
        self.late: list[str] = []
        self.env = types.SimpleNamespace(stats=types.SimpleNamespace(total=types.SimpleNamespace(num_requests=0)))
        self.closed = False
        self.expected: list = []

    def play(self, r, expect):
        self.expected.append(expect)
        names, reports, missing_at, refused = self.rounds.pop(0)
        self.refused.update(refused)
        self.env.stats.total.num_requests = sum(x["requests"] for x in reports.values())
        return {n: _hello() for n in names}, reports, missing_at

    def close(self):
        self.closed = True


def test_a_rounds_rows_one_per_node_and_the_total():
    a = argparse.Namespace(workload_seconds=2.0)
    joined = {"a": _hello(), "b": _hello(), "c": _hello()}
    reports = {"a": _report(100, 100, 200), "b": _report(50, 300)}
    rows = fleet.rows("f1", 1, "t0", a, joined, reports, {"c": 1.25}, {"d": "refused: old rig", "e": "late"}, 5)
    by = {r.node: r for r in rows}
    assert [r.node for r in rows] == ["a", "b", "c", "d", "e", "*"]
    assert by["a"].outcome == "ok" and by["a"].requests == 100 and by["a"].p99_us is not None
    assert by["c"].outcome == "lost" and "went silent 1.2 s into the round" in by["c"].detail
    assert (by["d"].outcome, by["e"].outcome) == ("refused", "absent")
    total = by["*"]
    assert total.outcome == "degraded" and total.users == 5 and total.requests == 150 and total.throughput == 75.0
    assert total.max_us is not None and total.max_us >= 300  # the nodes' histograms merged
    assert total.detail.startswith("c lost: went silent")


def test_a_node_that_never_reported_and_no_histogram():
    a = argparse.Namespace(workload_seconds=1.0)
    rows = fleet.rows("f1", 2, "t0", a, {"a": _hello()}, {}, {}, {}, 1)
    assert rows[0].detail == "never reported its figures"
    assert rows[-1].outcome == "degraded" and rows[-1].p99_us is None and rows[-1].requests == 0


def test_the_rounds_stored_and_judged_a_lost_node_leaves_the_next_round(tmp_path):
    FakeMaster.script = [
        (["a", "b"], {"a": _report(100, 100), "b": _report(80, 200)}, {}, {}),
        (["a"], {"a": _report(90, 100)}, {}, {}),
    ]
    logged: list[str] = []
    masters: list[FakeMaster] = []

    class Master(FakeMaster):
        def __init__(self, a, log):
            super().__init__(a, log)
            masters.append(self)

    a = _args(tmp_path, users=2)
    out = fleet.run(a, Master, logged.append)
    (master,) = masters
    assert master.closed and master.expected == [None, {"a", "b"}]
    assert [(t.round, ok, n) for t, ok, n in out.table] == [(1, 2, 2), (2, 1, 2)]
    assert out.fails == ["round 2: node b absent: did not join round 2 within 5 s"]
    assert logged[0].startswith(f"fleet {out.fleet_id}: listening on 127.0.0.1:5557 for 2 node(s)")
    assert logged[1].startswith("round 1/2: 2/2 node(s) reported, 180 requests")
    stored = Store(a.results).read("fleet")
    assert len(stored) == 6 and set(stored["run_id"]) == {out.fleet_id}
    total = stored[(stored["node"] == "*") & (stored["round"] == 1)].iloc[0]
    assert total["locust_requests"] == 180 and total["outcome"] == "ok"


def test_no_node_left_ends_the_rounds(tmp_path):
    FakeMaster.script = [([], {}, {}, {})]
    out = fleet.run(_args(tmp_path, nodes=1, users=1, cycles=3), FakeMaster, lambda _: None)
    assert out.table == []
    assert out.fails == [
        "round 1: 0 of 1 node(s) joined within 5 s",
        "round 1: no node joined; the remaining rounds were not run",
    ]


def test_ctrl_c_keeps_the_rounds_stored(tmp_path):
    class Interrupted(FakeMaster):
        def play(self, r, expect):
            if r == 2:
                raise KeyboardInterrupt
            return super().play(r, expect)

    FakeMaster.script = [(["a"], {"a": _report(10, 100)}, {}, {})]
    out = fleet.run(_args(tmp_path, nodes=1, users=1), Interrupted, lambda _: None)
    assert len(out.table) == 1 and out.fails == ["interrupted; the rounds stored so far stay"]


def test_the_command_prints_the_table_and_fails_on_a_lost_node(tmp_path, capsys):
    FakeMaster.script = [
        (["a", "b"], {"a": _report(100, 100)}, {"b": 0.5}, {}),
        (["a"], {"a": _report(90, 100)}, {}, {}),
    ]
    a = _args(tmp_path)
    assert fleet_command.run(a, FakeMaster) == Exit.FAILED
    out = capsys.readouterr().out.splitlines()
    head = out.index(next(line for line in out if line.lstrip().startswith("round  nodes")))
    assert out[head + 1].split() == ["1", "1/2", "100", "50", "100", "100", "degraded"]
    # a lost node is still expected next round: it did not join, so it is absent there
    assert out[head + 2].split() == ["2", "1/2", "90", "45", "100", "90", "degraded"]
    assert "FAIL: round 1: node b lost: went silent 0.5 s into the round (no heartbeat) and never reported" in out
    assert "FAIL: round 2: node b absent: did not join round 2 within 5 s" in out
    assert out[-1].startswith(f"results: {a.results}/fleet (run_id ")
    FakeMaster.script = [(["a", "b"], {"a": _report(100, 100)}, {"b": 0.5}, {})]
    assert fleet_command.run(_args(tmp_path, cycles=1, allow_node_loss=True), FakeMaster) == Exit.OK


def test_the_total_row_names_the_masters_machine_cpus_and_cpu_time_and_each_node_its_machine(tmp_path):
    """The master's CPU over the round's load (``Master.cpu_s``), its host and CPUs on the total row; each
    node row the machine Locust's worker id names (``<hostname>_<32 hex>``)."""
    import platform

    from rig.worker.load.master import machine_of

    assert machine_of("vm-1_" + "ab" * 16) == "vm-1" and machine_of("x") is None and machine_of(None) is None

    class Master(FakeMaster):
        cpu_s = 0.25

        def play(self, r, expect):
            joined, reports, missing_at = super().play(r, expect)
            return {n: (None, {**h, "machine": "vm-1"}) for n, (_, h) in joined.items()}, reports, missing_at

    FakeMaster.script = [(["a", "b"], {"a": _report(100, 100), "b": _report(80, 200)}, {}, {})]
    a = _args(tmp_path, users=2, cycles=1)
    fleet.run(a, Master, lambda _: None)
    stored = Store(a.results).read("fleet").set_index("node")
    assert stored.loc["*", "master_cpu_s"] == 0.25 and stored.loc["*", "host"] == (platform.node() or None)
    assert stored.loc["*", "master_cpus"] and list(stored.loc[["a", "b"], "host"]) == ["vm-1", "vm-1"]
    assert stored.loc[["a", "b"], "master_cpu_s"].isna().all()
