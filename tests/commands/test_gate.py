"""`rig gate` end to end on a real store (tests/stores.py: two runs with nothing retained, one
that retains the last response across stop)."""

from __future__ import annotations

import re

import pytest

from helpers import rig
from stores import real_results  # noqa: F401  (the session's store, a fixture)

pytestmark = pytest.mark.slow


def test_a_retained_response_fails_the_gate_on_finalize(real_results):
    root, a, keep = real_results["root"], real_results["none_a"], real_results["keep"]
    p = rig("gate", str(root), "--baseline", a, "--candidate", keep[:17], timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL: finalize success 100.0 % -> 0.0 % (5/5 -> 0/5, p=0.004)" in p.stdout
    assert "FAIL: new outcome(s): exit_timeout in 5/5 cycles" in p.stdout
    assert f"candidate: run {keep}" in p.stdout and "finalize" in p.stdout and p.stderr == ""
    # the other way round, finalize and outcomes improve: no regression of theirs is named. Its
    # stop does regress (``keep`` waits out a 1 s exit_timeout, a clean stop takes 2 s here), and
    # the gate says so: the positive control of the stop rule. Throughput is out of this test's
    # reach: these runs were taken minutes apart on a shared VM (one CI night saw ``keep`` 27 %
    # faster than ``none_a``), so its threshold is set past any drift here.
    back = rig("gate", str(root), "--baseline", keep, "--candidate", a, "--max-throughput-drop", "0.9",
               timeout=120)
    fails = [line for line in back.stdout.splitlines() if line.startswith("FAIL")]
    # (the figures themselves move on a busy machine: 1.2 s -> 2.1 s was seen beside other runs, and
    # a clean stop is whole seconds of Triton's polls: 3 s where the unload outlasts the second one)
    assert back.returncode == 1 and fails and all(re.match(r"FAIL: stop p95 1\.\d s -> [2-9]\.\d s", line)
                                                  for line in fails), back.stdout + back.stderr


def test_two_runs_of_one_configuration_pass(real_results):
    root = str(real_results["root"])
    # Every default threshold: one run a side, so throughput fails only past a 30 % drop (runs
    # minutes apart on this shared 2-core VM differed by up to 27 %: 9.8k against 12.9k infer/s).
    p = rig("gate", root, "--baseline", real_results["none_a"], "--candidate", real_results["none_b"],
            timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout and "FAIL" not in p.stdout and "concurrency 1" in p.stdout
    assert "5/5 cycles (100%)" in p.stdout
    assert "cpu_idle=" not in p.stdout, "two soaks: one regime, no note"


def _gate_in_process(capsys, *argv) -> tuple[int, str, str]:
    from rig.cli import main

    rc = main(["gate", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("case, message", [
    ("missing", "no results folder"),
    ("empty", "is empty"),
    ("foreign", "is not a results folder"),
    ("unknown run", "no such Triton version or run id; versions: 2.51.0; runs: "),
    ("same side", "are both"),
    ("unknown column", "--where colour: no such column"),
    ("no match", "--where retain=last-array: no cycle matches; retain is one of last-response, none"),
    ("filtered away", "among the cycles --where keeps"),
])
def test_bad_input_is_one_line_and_exit_2(real_results, tmp_path, capsys, case, message):
    root, a, b = str(real_results["root"]), real_results["none_a"], real_results["keep"]
    (tmp_path / "empty").mkdir()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not results")
    argv = {"missing": [str(tmp_path / "nope"), "-a", a, "-b", b],
            "empty": [str(tmp_path / "empty"), "-a", a, "-b", b],
            "foreign": [str(tmp_path / "foreign"), "-a", a, "-b", b],
            "unknown run": [root, "-a", "2.99.0", "-b", b],
            "same side": [root, "-a", a, "-b", a],
            "unknown column": [root, "-a", a, "-b", b, "--where", "colour=red"],
            "no match": [root, "-a", a, "-b", b, "--where", "retain=last-array"],
            "filtered away": [root, "-a", a, "-b", b, "--where", "retain=none"]}[case]
    rc, out, err = _gate_in_process(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("rig: error: ") and message in err, err


def test_frames_and_the_example_script_over_the_real_store(real_results, capsys):
    from rig.analysis import compare_versions, frames
    from rig.store import Store

    s = Store(real_results["root"])
    cycles, windows = s.read("cycles"), s.read("windows")
    lc = frames.lifecycle(cycles).set_index("retain")  # retain is the one tag that differs
    assert lc.loc["none", "finalize_rate"] == 1.0 and lc.loc["none", "cycles"] == 10
    assert lc.loc["last-response", "finalize_rate"] == 0.0
    assert lc.loc["last-response", "outcome_exit_timeout"] == 5
    perf = frames.performance(windows, cycles=cycles)
    assert set(perf.retain) == {"none", "last-response"} and (perf.point == "concurrency 1").all()
    assert (perf.latencies == perf.requests).all() and (perf.p50_us <= perf.p99_us).all()
    rc = compare_versions.main([str(real_results["root"]), real_results["none_a"], real_results["keep"]])
    out = capsys.readouterr().out
    assert rc == 1 and "finalize_rate" in out and "FAIL: finalize success 100.0 % -> 0.0 %" in out


def test_idle_note_names_both_regimes_only_when_they_differ():
    from rig.workflows.gate_lines import idle_note

    assert idle_note({"os"}, {"os"}) == "" and idle_note(set(), {"poll"}) == ""
    note = idle_note({"os"}, {"poll"})
    assert "cpu_idle=os" in note and "cpu_idle=poll" in note and "do not compare" in note


@pytest.mark.slow
def test_a_side_measured_with_the_cpus_held_is_named(real_results, tmp_path, capsys):
    """The store's runs table, copied, with one run marked as measured under held CPUs."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "r"
    shutil.copytree(real_results["root"], root, ignore=shutil.ignore_patterns("_work"))
    for f in (root / "runs").rglob("*.parquet"):
        t = pq.read_table(f)
        idle = ["poll" if r == real_results["none_b"] else None for r in t.column("run_id").to_pylist()]
        if "cpu_idle" in t.column_names:
            t = t.drop(["cpu_idle"])
        pq.write_table(t.append_column("cpu_idle", pa.array(idle, pa.string())), f)
    rc, out, err = _gate_in_process(capsys, str(root), "--baseline", real_results["none_a"],
                                    "--candidate", real_results["none_b"])
    assert "baseline ran with cpu_idle=os and the candidate with cpu_idle=poll" in out, out + err


def test_where_takes_several_values_as_report_and_capacity_do():
    import pandas as pd

    from rig.workflows import gate_sides

    cycles = pd.DataFrame({"run_id": ["A", "B", "C"], "retain": ["none", "none", "last-response"]})
    assert list(gate_sides.where(cycles, ["run_id=A,B"]).run_id) == ["A", "B"]
    assert list(gate_sides.where(cycles, ["run_id=C", "retain=last-response"]).run_id) == ["C"]


def test_gate_keeps_the_cycles_report_keeps_for_one_where(real_results, tmp_path, capsys):
    """One ``--where`` (rig.store.where): ``run_id=X,Y`` keeps the same cycles in the gate as in
    the report, read from the same real store."""
    from rig.analysis.report import page as report
    from rig.workflows import gate_sides

    root, a, b = str(real_results["root"]), real_results["none_a"], real_results["keep"]
    clause = [f"run_id={a},{b}"]
    _, cycles = gate_sides.load(root, ["run_id"], (a, b))
    by_gate = {(r, int(c)) for r, c in gate_sides.where(cycles, clause)[["run_id", "cycle"]].itertuples(index=False)}
    data = report.select(report.load(root, ["run_id"]), clause)
    by_report = {(r, int(c)) for r, c in data.cycles[["run_id", "cycle"]].itertuples(index=False)}
    assert by_gate == by_report and {r for r, _ in by_gate} == {a, b} and len(by_gate) == 10
    # the commands themselves: the gate's two sides hold the cycles the report counts
    rc, out, err = _gate_in_process(capsys, root, "-a", a, "-b", b, "--where", clause[0])
    assert rc in (0, 1) and "\ncycles" in out, out + err
    sides = [int(n) for n in next(line for line in out.splitlines() if line.startswith("cycles")).split()[1:]]
    assert sum(sides) == len(by_report), out
    from rig.cli import main

    assert main(["report", root, "--where", clause[0], "--out", str(tmp_path / "r.html")]) == 0
    assert f"2 run(s), {len(by_report)} cycle(s)" in capsys.readouterr().out
