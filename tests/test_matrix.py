"""`rig matrix`: parsing, the table and the exit status (fast); end to end over three real
embedded cores into one store, read back by `rig report` (slow).

The slow tests use nvidia-pytriton 0.5.0 (Triton 2.41.0), 0.5.10 (2.48.0) and 0.7.0 (2.51.0);
the matrix installs a missing one itself (about 12 s each from a clean cache here, ~110 MB).
"""

from __future__ import annotations

import re

import pytest

from helpers import rig
from rig.analysis import matrix as M
from rig.commands import matrix as cmd
from rig.errors import RigError

RUNTIMES = {"0.5.0": "2.41.0", "0.5.10": "2.48.0", "0.7.0": "2.51.0"}


# ---------------------------------------------------------------- fast: parsing

def test_retain_list_and_all():
    assert cmd.parse_retain("all") == ["none", "last-response", "last-array"]
    assert cmd.parse_retain("last-array, none,none") == ["last-array", "none"]
    with pytest.raises(RigError, match="unknown retention policy bogus"):
        cmd.parse_retain("none,bogus")
    with pytest.raises(RigError, match="comma-separated"):
        cmd.parse_retain(" , ")


def test_engines_list():
    assert cmd.parse_engines("capi,tritonserver") == ["capi", "tritonserver"]
    with pytest.raises(RigError, match="unknown engine"):
        cmd.parse_engines("capi,onnx")


def test_runtimes_all_sorted_by_version_and_unknown_refused():
    known = {"0.5.0": "2.41.0", "0.5.9": "2.47.0", "0.5.10": "2.48.0", "0.7.0": "2.51.0"}
    assert cmd.parse_runtimes("all", ["0.7.0", "0.5.10", "0.5.9"], known) == ["0.5.9", "0.5.10", "0.7.0"]
    # known but not installed: kept (the matrix installs it); embedded-X is X; repeats once
    assert cmd.parse_runtimes("embedded-0.5.0,0.5.0,container", ["0.7.0"], known) == ["0.5.0", "container"]
    with pytest.raises(RigError, match="unknown runtime '9.9.9'"):
        cmd.parse_runtimes("0.7.0,9.9.9", ["0.7.0"], known)
    with pytest.raises(RigError, match="no embedded runtime is installed"):
        cmd.parse_runtimes("all", [], known)


def test_soak_options_pass_through_to_every_cell():
    from rig.cli import build_parser

    args = build_parser().parse_args(["matrix", "--runtimes", "0.7.0", "--exit-timeout", "3", "--workload",
                                      "steady", "--users", "2", "--allow-leaks", "--cycles", "5",
                                      "--allow-outcomes", "clean", "--results", "R"])
    words = cmd.passthrough(args)
    assert words[words.index("--exit-timeout") + 1] == "3"
    assert words[words.index("--users") + 1] == "2"
    assert "--allow-leaks" in words
    # set per cell, not passed through as given
    assert not {"--cycles", "--allow-outcomes", "--results", "--runtime", "--retain"} & set(words)
    argv = cmd.cell_argv(words, "0.5.0", "capi", "last-array", 5, "R", M.allowed_for("last-array", ("clean",)))
    assert argv[0] == "soak" and argv[argv.index("--allow-outcomes") + 1] == "clean,exit_timeout"
    # the bench takes the server and model options only
    bench = cmd._bench_words(args)
    assert bench == ["--exit-timeout", "3"]


def test_retention_allows_exit_timeout_only_where_a_reference_is_kept():
    assert M.allowed_for("none", ("clean",)) == ("clean",)
    assert M.allowed_for("last-response", ("clean",)) == ("clean", "exit_timeout")
    assert M.allowed_for("last-array", ("clean", "exit_timeout")) == ("clean", "exit_timeout")


# ---------------------------------------------------------------- fast: cells, table, status

def test_classify_a_cell_by_exit_status_and_output():
    ok = ["cycle 1: clean | ...", "results: /r/cycles (run_id 20260101T000000-abcdef)"]
    assert cmd.classify(0, ok) == {"run_id": "20260101T000000-abcdef", "exit": 0, "status": "pass", "reason": ""}
    failed = cmd.classify(1, ["FAIL: outcomes not allowed: hung=1", "FAIL: leaks: 1 stub(s)", ok[1]])
    assert failed["status"] == "fail" and failed["reason"] == "outcomes not allowed: hung=1; leaks: 1 stub(s)"
    refused = cmd.classify(2, ["rig: error: the tritonserver engine does not load over X"])
    assert refused["status"] == "error" and refused["reason"].startswith("the tritonserver engine")
    assert cmd.classify(3, ["rig: skipped: the cupy model needs a CUDA device"])["status"] == "skipped"
    crashed = cmd.classify(-11, ["cycle 1: clean"])
    assert crashed["status"] == "crashed" and "SIGSEGV" in crashed["reason"]
    assert cmd.classify(4, ["rig: error: No space left on device"])["status"] == "machine"


def _cycle(outcome, stop, before, after=0, version="2.51.0"):
    return {"outcome": outcome, "stop_latency_s": stop, "finalize_expected": 1, "finalize_before_stop": before,
            "finalize_after_stop": after, "triton_version": version}


def test_cell_figures_and_the_table():
    crashed = {**_cycle("exit_timeout", 3.0, 0, 1), "cleanup": "crashed: killed by SIGABRT"}
    figs = M.cell_figures([{**_cycle("clean", 2.0, 1), "load_outcome": "ok"}, {**crashed, "load_outcome": "errors"},
                           {**_cycle("clean", 2.2, 1), "cleanup": "ok", "load_outcome": "ok"}])
    assert figs["outcomes"] == {"clean": 2, "exit_timeout": 1}
    assert figs["load_outcomes"] == {"ok": 2, "errors": 1}, "the load's verdict, apart"
    assert figs["finalize_before"] == 2 and figs["finalize_expected"] == 3 and figs["finalize_after"] == 1
    assert figs["stop_p50"] == 2.2 and figs["stop_max"] == 3.0 and figs["triton_version"] == "2.51.0"
    rows = [{"runtime": "0.7.0", "engine": "capi", "retain": "none", "status": "pass", "reason": "", **figs},
            {"runtime": "0.2.5", "triton_version": "2.33.0", "engine": "-", "retain": "none", "status": "skipped",
             "reason": "this runtime has no Python-backend stub for Python 3.11 (it has: none); run the rig ..."}]
    table = M.format_table(rows).splitlines()
    assert table[0].startswith("| runtime | Triton | engine | retain | outcomes | load |")
    assert figs["cleanup"] == {"crashed: killed by SIGABRT": 1}
    assert table[2] == ("| 0.7.0 | 2.51.0 | capi | none | clean 2, exit_timeout 1 (cleanup crashed: killed by "
                        "SIGABRT in 1) | errors 1, ok 2 | 67% (2/3), 1 after | "
                        "2.200 / 3.000 | pass |")
    assert table[3].endswith("| skipped: this runtime has no Python-backend stub for Python 3.11 (it has: none) |")


def test_exit_status():
    def rows(*statuses):
        return [{"status": s} for s in statuses]

    assert M.exit_status(rows("pass", "pass", "skipped")) == 0
    assert M.exit_status(rows("pass", "fail")) == 1
    assert M.exit_status(rows("pass", "crashed")) == 1
    assert M.exit_status(rows("timeout", "machine")) == 1
    assert M.exit_status(rows("pass", "machine")) == 4
    assert M.exit_status(rows("skipped", "skipped")) == 3
    assert M.exit_status([]) == 3


def test_bad_input_is_one_line_and_exit_2(capsys):
    from rig.cli import main

    assert main(["matrix", "--runtimes", "9.9.9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rig: error: unknown runtime '9.9.9'")
    assert main(["matrix", "--runtimes", "0.7.0", "--retain", "everything"]) == 2
    assert main(["matrix", "--runtimes", "0.7.0", "--users", "2"]) == 2  # no workload: refused as rig soak does
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("rig: error: ") for line in err)


# ---------------------------------------------------------------- slow: real cores, one store

def _rig(*argv):
    return rig(*argv, timeout=600, env={"PYTHONUNBUFFERED": "1"})


def _table_rows(stdout: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in stdout.splitlines()
            if line.startswith("| ") and not line.startswith(("| runtime", "| ---"))]


@pytest.fixture(scope="module")
def three_cores(tmp_path_factory):
    results = tmp_path_factory.mktemp("matrix") / "results"
    proc = _rig("matrix", "--runtimes", ",".join(RUNTIMES), "--engines", "capi,tritonserver", "--cycles", "2",
                "--exit-timeout", "3", "--results", str(results))
    return results, proc


@pytest.mark.slow
def test_three_cores_into_one_store(three_cores):
    from rig.store import Store

    results, proc = three_cores
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = _table_rows(proc.stdout)
    capi = {r[0]: r for r in rows if r[2] == "capi"}
    assert set(capi) == set(RUNTIMES)
    for version, triton in RUNTIMES.items():
        r = capi[version]
        assert r[1] == triton and r[3] == "none" and r[4] == "clean 2" and r[5] == "ok 2" and r[6] == "100% (2/2)"
        assert r[8] == "pass"
    # the official engine: where its bindings do not load (not installed here), a row that says why
    for r in (r for r in rows if r[2] == "tritonserver"):
        assert r[8] == "pass" or (r[8].startswith("skipped: ") and "tritonserver" in r[8]), r
    cycles = Store(results).read("cycles")
    assert sorted(cycles["triton_version"].unique()) == sorted(RUNTIMES.values())
    assert set(cycles[cycles.engine == "capi"].outcome) == {"clean"}
    assert cycles.groupby("triton_version").run_id.nunique().min() == 1


@pytest.mark.slow
def test_rig_report_shows_the_versions_side_by_side(three_cores, tmp_path):
    results, _ = three_cores
    proc = _rig("report", str(results), "--where", "engine=capi", "--out", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    assert "Compared by triton_version" in proc.stdout
    lifecycle = proc.stdout.split("## Lifecycle")[1].split("##")[0]
    shown = re.findall(r"^\| (2\.\d+\.\d+) \|", lifecycle, re.M)
    assert sorted(shown) == sorted(RUNTIMES.values())


@pytest.mark.slow
def test_a_retained_response_is_the_expected_outcome_and_a_bench_cell(tmp_path):
    """exit_timeout under --retain last-response is allowed (the matrix passes), and shown; --bench
    adds a bench cell whose windows land in the same store."""
    from rig.store import Store

    results = tmp_path / "r"
    proc = _rig("matrix", "--runtimes", "0.7.0", "--retain", "last-response", "--cycles", "1", "--exit-timeout",
                "1", "--bench", "--bench-concurrency", "2", "--results", str(results))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "exit_timeout is allowed" in proc.stdout
    soak_row, bench_row = _table_rows(proc.stdout)
    assert soak_row[3] == "last-response" and soak_row[4] == "exit_timeout 1" and soak_row[5] == "ok 1"
    assert soak_row[6] == "0% (0/1), 1 after" and soak_row[8] == "pass"
    assert bench_row[:3] == ["0.7.0", "2.51.0", "capi"] and bench_row[4] == "pass"
    infer_s = float(re.match(r"2: ([\d,]+) \(", bench_row[3]).group(1).replace(",", ""))
    windows = Store(results).read("windows")
    rig_windows = windows[(windows.tool == "rig") & (windows.concurrency == 2)]
    assert len(rig_windows) == 3 and infer_s > 0
    assert sorted(Store(results).read("cycles").retain.unique()) == ["last-response", "none"]


@pytest.mark.slow
def test_a_cell_that_outlives_its_time_is_a_row_not_a_crash(tmp_path):
    proc = _rig("matrix", "--runtimes", "0.7.0", "--cycles", "1", "--cell-timeout", "1", "--results",
                str(tmp_path / "r"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    (row,) = _table_rows(proc.stdout)
    assert row[0] == "0.7.0" and row[8].startswith("timeout: killed after")
    assert "Traceback" not in proc.stdout + proc.stderr
