"""`--summary-json FILE` (rig.workflows.summary): written whole or not at all; a bad path is refused
in one line before anything runs; the gate's and the matrix's summaries from their rows; a real
soak's summary agrees with the cycles it stored (slow: a real core)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from helpers import rig
from stores import real_results  # noqa: F401 - the session's real store (slow tests only)


def test_written_atomically_and_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    from rig.workflows import summary

    path = tmp_path / "s.json"
    summary.write(str(path), {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(summary.os, "replace", broken)
    with pytest.raises(OSError):
        summary.write(str(path), {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1}  # the old one whole, no temporary left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


@pytest.mark.parametrize("where, says", [("missing/s.json", "does not exist"), ("s3://b/s.json", "a local file"),
                                         (".", "is a folder")])
def test_a_bad_path_is_refused_in_one_line_before_anything_runs(tmp_path, where, says, capsys):
    from rig.cli import main

    handler = signal.getsignal(signal.SIGTERM)
    try:
        for argv in (["soak", "--cycles", "1", "--results", str(tmp_path / "r")],
                     ["gate", str(tmp_path / "r"), "--baseline", "a", "--candidate", "b"],
                     ["matrix", "--runtimes", "0.7.0", "--results", str(tmp_path / "r")]):
            target = where if "://" in where else str(tmp_path / where)
            rc = main([*argv, "--summary-json", target])
            err = capsys.readouterr().err
            assert rc == 2, (argv, err)
            assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert not (tmp_path / "r").exists()  # nothing ran, nothing stored


def test_the_soak_and_matrix_summaries_count_each_kind_of_verdict():
    from rig.workflows import summary
    from rig.common.errors import Exit

    rows = [{"outcome": "clean", "load_outcome": "ok", "growth_outcome": "ok"},
            {"outcome": "exit_timeout", "load_outcome": "ok", "growth_outcome": None},
            {"outcome": "clean", "load_outcome": None, "growth_outcome": "leaking"}]
    s = summary.soak("soak", Exit.FAILED, "R1", rows, ["why"], cycles_planned=3)
    assert (s["exit_status"], s["exit"], s["verdict"], s["run_ids"]) == (1, "FAILED", "fail", ["R1"])
    assert s["outcomes"] == {"lifecycle": {"clean": 2, "exit_timeout": 1}, "load": {"ok": 2},
                             "growth": {"leaking": 1, "ok": 1}}
    assert summary.soak("soak", Exit.INTERRUPTED, "R1", rows, [])["verdict"] == "interrupted"
    cells = [{"run_id": "A", "status": "pass", "runtime": "0.7.0", "engine": "capi", "outcomes": {"clean": 3},
              "load_outcomes": {"ok": 3}, "growth_outcomes": {"ok": 3}},
             {"run_id": "B", "status": "fail", "reason": "exit_timeout 1", "runtime": "container", "engine": "capi",
              "outcomes": {"clean": 2, "exit_timeout": 1}, "load_outcomes": {"ok": 3}},
             {"run_id": None, "status": "skipped", "reason": "no stub", "runtime": "0.3.1", "engine": "capi"}]
    m = summary.matrix(Exit.FAILED, cells, "results")
    assert m["run_ids"] == ["A", "B"] and m["verdict"] == {"fail": 1, "pass": 1, "skipped": 1}
    assert m["outcomes"]["lifecycle"] == {"clean": 5, "exit_timeout": 1} and m["outcomes"]["load"] == {"ok": 6}
    assert m["reasons"] == ["container capi: fail: exit_timeout 1"] and m["exit_status"] == 1


@pytest.mark.slow
def test_the_gates_summary_holds_its_verdict_reasons_and_both_sides(real_results, tmp_path):  # noqa: F811
    """`rig gate` over the session's real store: its JSON says what it printed."""
    root, a, keep = real_results["root"], real_results["none_a"], real_results["keep"]
    out = tmp_path / "gate.json"
    p = rig("gate", str(root), "--baseline", a, "--candidate", keep, "--summary-json", str(out), timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    s = json.loads(out.read_text())
    assert (s["command"], s["verdict"], s["exit_status"], s["exit"]) == ("gate", "fail", 1, "FAILED")
    assert [f"FAIL: {r}" for r in s["reasons"]] == [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert set(s["run_ids"]) == {a, keep} and s["sides"]["candidate"]["run_ids"] == [keep]
    assert s["outcomes"]["candidate"]["lifecycle"] == {"exit_timeout": 5}
    assert s["outcomes"]["baseline"]["lifecycle"] == {"clean": 5}
    p = rig("gate", str(root), "--baseline", a, "--candidate", real_results["none_b"], "--max-throughput-drop",
            "0.9", "--summary-json", str(out), timeout=120)
    s = json.loads(out.read_text())
    assert (p.returncode, s["verdict"], s["exit_status"], s["reasons"]) == (0, "pass", 0, [])


@pytest.mark.slow
def test_a_real_soaks_summary_agrees_with_its_stored_cycles(tmp_path, runtime):
    import pandas as pd

    res, out = tmp_path / "results", tmp_path / "summary.json"
    p = rig("soak", "--cycles", "3", "--requests", "20", "--retain", "last-response", "--exit-timeout", "1",
            "--results", str(res), "--summary-json", str(out), timeout=600)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]  # the retained response fails the soak
    s = json.loads(out.read_text())
    assert (s["command"], s["exit_status"], s["exit"], s["verdict"]) == ("soak", 1, "FAILED", "fail")
    assert s["reasons"] and all(f"FAIL: {r}" in p.stdout for r in s["reasons"])
    assert f"(run_id {s['run_id']})" in p.stdout and s["run_ids"] == [s["run_id"]]
    cycles = pd.read_parquet(res / "cycles")
    mine = cycles[cycles["run_id"] == s["run_id"]]
    assert len(mine) == s["cycles"] == s["cycles_planned"] == 3
    for kind, column in (("lifecycle", "outcome"), ("load", "load_outcome"), ("growth", "growth_outcome")):
        stored = {str(k): int(v) for k, v in mine[column].dropna().value_counts().items()}
        assert s["outcomes"][kind] == stored, (kind, s["outcomes"], stored)
    assert s["triton_version"] == mine["triton_version"].astype(str).iloc[0]
    assert [f for f in os.listdir(tmp_path) if f.startswith(".summary.json")] == []
