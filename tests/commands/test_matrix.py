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
from rig.workflows import matrix_jobs as jobs
from rig.workflows import matrix_plan as mplan
from rig.workflows import matrix_setup as setup
from rig.common.errors import RigError
from rig.contract.cell import BenchSettings

RUNTIMES = {"0.5.0": "2.41.0", "0.5.10": "2.48.0", "0.7.0": "2.51.0"}


# ---------------------------------------------------------------- fast: parsing

def test_retain_list_and_all():
    assert mplan.parse_retain("all") == ["none", "last-response", "last-array"]
    assert mplan.parse_retain("last-array, none,none") == ["last-array", "none"]
    with pytest.raises(RigError, match="unknown retention policy bogus"):
        mplan.parse_retain("none,bogus")
    with pytest.raises(RigError, match="comma-separated"):
        mplan.parse_retain(" , ")


def test_engines_list():
    assert mplan.parse_engines("capi,tritonserver") == ["capi", "tritonserver"]
    with pytest.raises(RigError, match="unknown engine"):
        mplan.parse_engines("capi,onnx")


def test_runtimes_all_is_every_core_once_and_installed_is_what_is_here():
    known = {"0.5.0": "2.41.0", "0.5.4": "2.44.0", "0.5.6": "2.44.0", "0.5.9": "2.47.0", "0.5.10": "2.48.0",
             "0.6.0": "2.51.0", "0.7.0": "2.51.0"}
    # every core once, by version: the runtime installed here for it, else the newest that bundles it
    assert mplan.parse_runtimes("all", ["0.6.0", "0.5.10", "0.5.4"], known) == ["0.5.0", "0.5.4", "0.5.9", "0.5.10",
                                                                              "0.6.0"]
    assert mplan.parse_runtimes("all", [], known) == ["0.5.0", "0.5.6", "0.5.9", "0.5.10", "0.7.0"]
    assert mplan.parse_runtimes("installed", ["0.7.0", "0.5.10", "0.5.9"], known) == ["0.5.9", "0.5.10", "0.7.0"]
    # known but not installed: kept (the matrix installs it); embedded-X is X; repeats once
    assert mplan.parse_runtimes("embedded-0.5.0,0.5.0,container", ["0.7.0"], known) == ["0.5.0", "container"]
    with pytest.raises(RigError, match="unknown runtime '9.9.9'"):
        mplan.parse_runtimes("0.7.0,9.9.9", ["0.7.0"], known)
    with pytest.raises(RigError, match="no runtime is installed or built here"):
        mplan.parse_runtimes("installed", [], known)


def test_shards_split_the_cells_once_each_whatever_the_matrix_holds():
    from rig.workflows.matrix_plan import cell_key, parse_shard, take_shard

    cells = [{"scenario": f"s{i}", "control": c, "shape": "unbatched", "runtime": r, "engine": e}
             for i in range(9) for c in (False, True) for r in ("0.5.10", "0.7.0") for e in ("capi", "tritonserver")]
    shares = [take_shard(cells, (k, 4)) for k in range(4)]
    keys = [cell_key(c) for share in shares for c in share]
    assert sorted(keys) == sorted(cell_key(c) for c in cells) and len(set(keys)) == len(cells)
    assert all(len(share) > 0 for share in shares)
    # a cell's shard is its own: the same with another matrix around it
    assert take_shard(cells[:5], (1, 4)) == [c for c in shares[1] if c in cells[:5]]
    assert take_shard(cells, None) == cells and parse_shard("3/4") == (3, 4)
    for bad in ("4/4", "-1/4", "1/0", "a/b", "1"):
        with pytest.raises(RigError, match="--shard"):
            parse_shard(bad)


def _base(*argv):
    """The matrix's parsed options and the base config every cell derives from."""
    from rig.cli import build_parser
    from rig.parent.options import run_config

    args = build_parser().parse_args(["matrix", "--runtimes", "0.7.0", *argv])
    return args, run_config(mplan.soak_options(args, "0.7.0", "none", cmd.DEFAULT_CYCLES))


PLAN = [{"spec": "0.5.0", "triton": "2.41.0", "engines": [("capi", "asked for")], "skipped": []}]


def test_every_cell_is_a_typed_config_derived_from_the_matrixs_options():
    from rig.parent.config import from_toml_text

    args, base = _base("--exit-timeout", "3", "--workload", "steady", "--users", "2", "--allow-leaks", "--cycles", "5",
                       "--allow-outcomes", "clean", "--results", "s3://u:pw@minio:9000/b")
    (job,) = jobs.plain_jobs(base, PLAN, ["last-array"], None)
    spec, cfg = job.spec, from_toml_text(job.spec.config)
    assert spec.command == "soak" and spec.allowed == ("clean", "ok", "exit_timeout") and spec.bench is None
    # the matrix's options, then the cell's own keys
    assert (cfg.runtime, cfg.engine, cfg.retain, cfg.cycles, cfg.exit_timeout) == ("0.5.0", "capi", "last-array", 5, 3)
    assert (cfg.workload.name, cfg.workload.users, cfg.thresholds.allow_leaks) == ("steady", 2, True)
    assert cfg.thresholds.allow_outcomes == "clean,ok,exit_timeout"  # the load's default named with it
    # the results as given travel beside the text, which redacts a URI's credentials
    assert spec.results == "s3://u:pw@minio:9000/b" and "pw" not in spec.config
    assert job.row == {"runtime": "0.5.0", "triton_version": "2.41.0", "engine": "capi", "retain": "last-array"}
    assert spec.run_id == ""  # named as the cell starts (matrix_run._run_cell)
    # the bench takes the server and model options only, and its own settings
    (bench,) = jobs.bench_jobs(args, PLAN, "R", None)
    b = from_toml_text(bench.spec.config)
    assert bench.spec.command == "bench" and bench.table == "windows" and bench.spec.results == "R"
    assert bench.spec.bench == BenchSettings(concurrency="1,4", windows=3, window_seconds=1.0, repeats=1)
    assert (b.runtime, b.engine, b.exit_timeout, b.workload.window_seconds) == ("0.5.0", "capi", 3, 1.0)
    assert (b.workload.name, b.workload.users, b.cycles, b.thresholds.allow_leaks) == ("none", 1, 1, False)
    assert b.thresholds.allow_outcomes is None


def test_a_config_file_and_its_cycles_reach_every_cell(tmp_path):
    from rig.parent.config import from_toml_text

    config = tmp_path / "c.toml"
    config.write_text('cycles = 7\nrequests = 20\n\n[thresholds]\nmax_stop_latency_s = 9.0\n')
    _, base = _base("--config", str(config))
    (job,) = jobs.plain_jobs(base, PLAN, ["none"], None)
    cfg = from_toml_text(job.spec.config)
    assert (cfg.cycles, cfg.requests, cfg.thresholds.max_stop_latency_s) == (7, 20, 9.0)
    assert cfg.thresholds.allow_outcomes == "clean,ok" and job.spec.allowed == ("clean", "ok")
    _, base = _base()
    assert base.cycles == cmd.DEFAULT_CYCLES


def test_retention_allows_exit_timeout_only_where_a_reference_is_kept():
    assert M.allowed_for("none", ("clean",)) == ("clean",)
    assert M.allowed_for("last-response", ("clean",)) == ("clean", "exit_timeout")
    assert M.allowed_for("last-array", ("clean", "exit_timeout")) == ("clean", "exit_timeout")


# ---------------------------------------------------------------- fast: cells, table, status

def test_a_cells_status_is_the_record_it_sent():
    from rig.workflows.matrix_run import cell_status
    from rig.contract.messages import CellDone, Fatal

    assert cell_status([CellDone(0, "r1")], 0, "r1") == {"run_id": "r1", "exit": 0, "status": "pass", "reason": ""}
    failed = cell_status([CellDone(1, "r1", ("outcomes not allowed: hung=1", "leaks: 1 stub(s)"))], 1, "r1")
    assert failed["status"] == "fail" and failed["reason"] == "outcomes not allowed: hung=1; leaks: 1 stub(s)"
    refused = cell_status([CellDone(2, None, error="the tritonserver engine does not load over X")], 2, "r1")
    assert refused == {"run_id": None, "exit": 2, "status": "error",
                       "reason": "the tritonserver engine does not load over X"}
    assert cell_status([CellDone(3, None, error="nothing was run")], 3, "r1")["status"] == "skipped"
    assert cell_status([CellDone(4, "r1", error="No space left on device")], 4, "r1")["status"] == "machine"
    # no record: how the process ended, the run the matrix named for it, and a Fatal's error
    crashed = cell_status([], -11, "r1")
    assert crashed == {"run_id": "r1", "exit": -11, "status": "crashed", "reason": "the cell process died of SIGSEGV"}
    fatal = cell_status([Fatal("KeyError: 'tool'", "Traceback ...")], 3, "r1")
    assert fatal["status"] == "crashed" and fatal["reason"] == "the cell process exited 3: KeyError: 'tool'"
    assert cell_status([CellDone(0, None)], 0, "r1")["status"] == "crashed"  # a pass that names no run


def test_the_matrix_reads_no_cells_output():
    """A cell's status comes from its typed record (CellDone over its pipe), never from the
    lines it printed: nothing in the matrix's modules parses them."""
    from pathlib import Path

    from rig.workflows import matrix_run

    sources = {p.name: p.read_text() for p in (Path(cmd.__file__).parent).glob("matrix*.py")}
    sources |= {p.name: p.read_text() for p in (Path(matrix_run.__file__).parent).glob("matrix*.py")}
    assert set(sources) == {"matrix.py", "matrix_jobs.py", "matrix_plan.py", "matrix_races.py", "matrix_run.py",
                            "matrix_setup.py", "matrix_table.py"}
    for name, text in sources.items():
        for scraped in ("FAIL: ", "rig: error: ", "rig: skipped: ", "(run_id ", "_RUN_ID", "def classify",
                        "lines.append", "passthrough", "cell_argv", "scenario_argv", '"soak", *'):
            assert scraped not in text, f"{name} holds {scraped!r}"
    assert [f.name for f in matrix_run.dataclasses.fields(matrix_run.Job)][:2] == ["label", "spec"]


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
    assert table[0].startswith("| runtime | Triton | engine | retain | outcomes | load | growth | batches |")
    assert figs["cleanup"] == {"crashed: killed by SIGABRT": 1}
    assert table[2] == ("| 0.7.0 | 2.51.0 | capi | none | clean 2, exit_timeout 1 (cleanup crashed: killed by "
                        "SIGABRT in 1) | errors 1, ok 2 | - | - | 67% (2/3), 1 after | "
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


# ---------------------------------------------------------------- fast: the scenario axis

def test_scenarios_list_and_all():
    from rig.scenarios import catalog as scenarios

    assert [s.name for s in mplan.parse_scenarios("all")] == list(scenarios.SCENARIOS)
    assert [s.name for s in mplan.parse_scenarios("finalize-raises, retained-response,finalize-raises")] == [
        "finalize-raises", "retained-response"]
    with pytest.raises(RigError, match="unknown scenario 'nope'"):
        mplan.parse_scenarios("retained-response,nope")


@pytest.mark.parametrize("extra, says", [
    (["--retain", "all"], "--retain all cannot combine with --scenarios"),
    (["--retain", "last-response"], "--retain last-response cannot combine with --scenarios"),
    (["--fault", "stub-exits"], "--fault cannot combine with --scenarios"),
    (["--model-repository", "models"], "--model-repository cannot combine with --scenarios"),
    (["--allow-outcomes", "clean"], "--allow-outcomes cannot combine with --scenarios"),
    (["--control"], "unrecognized arguments: --control"),  # the matrix runs each control itself
])
def test_what_cannot_combine_with_scenarios_is_one_line_and_exit_2(capsys, extra, says):
    from rig.cli import main

    assert main(["matrix", "--runtimes", "0.7.0", "--scenarios", "retained-response", *extra]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rig: error: ") and says in lines[0], err
    assert "Traceback" not in out + err


def test_a_scenario_that_cannot_combine_with_the_cells_options_is_named(capsys, tmp_path):
    from rig.cli import main

    assert main(["matrix", "--runtimes", "0.7.0", "--scenarios", "stop-while-loading", "--stop-strategy",
                 "unload-then-stop", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rig: error: --scenarios stop-while-loading: --stop-strategy")
    config = tmp_path / "c.toml"
    config.write_text('retain = "last-array"\n')
    assert main(["matrix", "--runtimes", "0.7.0", "--scenarios", "all", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "retain cannot combine with --scenarios" in err[0] and "drop them from the file" in err[0]
    assert list(tmp_path.iterdir()) == [config]  # nothing ran


def _scenario(name, **kw):
    from rig.scenarios.catalog import Scenario

    return Scenario(name, ("server#1",), "what it does", **kw)


def test_scenario_cells_per_shape_runtime_and_engine_controls_apart_and_skips(tmp_path):
    from rig.scenarios import catalog as scenarios
    from rig.scenarios import known

    path = tmp_path / "known.csv"  # the verdicts known, as data: per scenario, control, shape, engine and core
    known.write({("execute-raises", False, "unbatched", "capi", "2.51.0"): known.Known("exit_timeout", "errors", "ok", 3, "r1"),
                 ("execute-raises", False, "unbatched", "capi", "2.48.0"): known.Known("clean", "errors", "ok", 3, "r1"),
                 ("execute-raises", False, "batched", "capi", "2.51.0"): known.Known("clean", "errors", "ok", 3, "r1"),
                 ("execute-raises", True, "unbatched", "capi", "2.48.0"): known.Known("clean", "ok", "ok", 3, "r1"),
                 ("leaks-memory", False, "unbatched", "capi", "2.48.0"): known.Known("clean", "ok", "leaking", 3, "r1")},
                path)
    plan = [{"spec": "0.7.0", "triton": "2.51.0", "engines": [("capi", "asked"), ("tritonserver", "asked")]},
            {"spec": "0.5.10", "triton": "2.48.0", "engines": [("capi", "asked")]}]
    capi_only = _scenario("capi-only", expected=("exit_timeout", "ok"), engines=("capi",))
    no_control = _scenario("measures", has_control=False)
    raises = scenarios.get("execute-raises")
    cells = mplan.scenario_cells([raises, capi_only, no_control], plan, path)
    key = [(c["scenario"], c["control"], c["shape"], c["runtime"], c["engine"]) for c in cells]
    assert key[:4] == [("execute-raises", False, "unbatched", "0.7.0", "capi"),
                       ("execute-raises", False, "unbatched", "0.7.0", "tritonserver"),
                       ("execute-raises", False, "unbatched", "0.5.10", "capi"),
                       ("execute-raises", False, "batched", "0.7.0", "capi")]
    assert len([k for k in key if k[0] == "execute-raises"]) == 2 * len(raises.shapes) * 3  # control apart, each shape
    by = {k: c for k, c in zip(key, cells)}
    assert by["execute-raises", False, "unbatched", "0.7.0", "capi"]["expected"] == ("exit_timeout", "errors")
    assert by["execute-raises", False, "unbatched", "0.5.10", "capi"]["expected"] == ("clean", "errors")  # its core
    assert by["execute-raises", False, "batched", "0.7.0", "capi"]["expected"] == ("clean", "errors")  # its shape
    assert by["execute-raises", True, "unbatched", "0.5.10", "capi"]["expected"] == ("clean", "ok")
    # nothing known there (another engine, shape or core): unjudged, never assumed
    assert by["execute-raises", False, "unbatched", "0.7.0", "tritonserver"]["expected"] is None
    assert by["execute-raises", False, "decoupled", "0.5.10", "capi"]["expected"] is None
    assert by["execute-raises", True, "decoupled", "0.5.10", "capi"]["expected"] == ("clean", "ok")  # its contract
    skipped = by["capi-only", False, "unbatched", "0.7.0", "tritonserver"]
    assert skipped["status"] == "skipped" and skipped["reason"] == "scenario capi-only runs over capi only, not tritonserver"
    # a control that is the plain template (no client, no load of its own) is the template's cell, once
    assert ("capi-only", True, "unbatched", "0.7.0", "capi") not in by
    assert by["template", False, "unbatched", "0.7.0", "tritonserver"]["expected"] == ("clean", "ok")  # a contract
    assert len([k for k in key if k[0] == "template"]) == 3 and "status" not in by["template", False, "unbatched",
                                                                                     "0.7.0", "tritonserver"]
    assert "status" not in by["capi-only", False, "unbatched", "0.7.0", "capi"]
    assert [k for k in key if k[0] == "measures"] == [("measures", False, "unbatched", "0.7.0", "capi"),
                                                       ("measures", False, "unbatched", "0.7.0", "tritonserver"),
                                                       ("measures", False, "unbatched", "0.5.10", "capi")]  # no control
    leak = mplan.scenario_cells([scenarios.get("leaks-memory")], plan[1:], path)
    assert [(c["control"], c["shape"], c["growth"]) for c in leak][:2] == [(False, "unbatched", "leaking"),
                                                                        (False, "batched", None)]


def test_a_scenario_cell_records_every_verdict_and_leaks_only_with_the_fault_on():
    """The soak of a scenario cell allows every verdict: the matrix judges the stored ones against
    the known (a finding is not a failed soak); a control still fails on a leak."""
    from rig.contract.verdicts import GROWTH_OUTCOMES, LOAD_OUTCOMES, OUTCOMES
    from rig.parent.config import RunConfig, Thresholds, from_toml_text

    every = [*OUTCOMES, *LOAD_OUTCOMES, *GROWTH_OUTCOMES]
    cell = {"scenario": "stub-exits", "control": False, "shape": "batched", "runtime": "0.7.0",
            "triton_version": "2.51.0", "engine": "capi", "why": "asked for", "expected": ("exit_timeout", "errors"),
            "growth": None}
    base = RunConfig(exit_timeout=3, cycles=2, results="R")
    job = jobs.scenario_job(cell, base, dict(setup.SCENARIO_LOAD_KEYS))
    cfg = from_toml_text(job.spec.config)
    assert (cfg.scenario, cfg.control, cfg.model_shape, cfg.fault, cfg.retain) == ("stub-exits", False, "batched",
                                                                                 "stub-exits", "none")
    assert (cfg.max_batch_size, cfg.dynamic_batching) == (8, True)  # the shape, applied once, by the cell
    assert (cfg.runtime, cfg.engine, cfg.cycles, cfg.exit_timeout, cfg.results) == ("0.7.0", "capi", 2, 3, "R")
    assert cfg.thresholds.allow_outcomes.split(",") == every and list(job.spec.allowed) == every
    assert cfg.thresholds.allow_leaks is True
    assert (cfg.workload.name, cfg.workload.seconds, cfg.workload.users) == ("steady", 2.0, 2)
    assert job.row["retain"] == "-" and "why" not in job.row and job.row["expected"] == ("exit_timeout", "errors")
    assert "expected exit_timeout / errors / ok under the steady workload, 2 user(s), 2 s a cycle" in job.start_line
    control = jobs.scenario_job({**cell, "control": True, "expected": ("clean", "ok")}, base, {})
    c = from_toml_text(control.spec.config)
    assert (c.control, c.fault, c.thresholds.allow_leaks, c.workload.name) == (True, "none", False, "none")
    given = jobs.scenario_job({**cell, "control": True}, RunConfig(thresholds=Thresholds(allow_leaks=True)), {})
    assert from_toml_text(given.spec.config).thresholds.allow_leaks is True  # the matrix's --allow-leaks
    # the same load as `rig soak` options, for a scenario's class run by hand (test_variants.py)
    assert setup.SCENARIO_LOAD == ("--workload", "steady", "--workload-seconds", "2", "--users", "2")


def test_a_scenario_matrix_shortens_the_timeouts_nobody_set():
    args, base = _base("--scenarios", "stub-exits", "--request-timeout", "7")
    assert setup.scenario_timeouts(args, base) == {"exit_timeout": mplan.SCENARIO_EXIT_TIMEOUT}
    assert setup.check_scenarios(args, base, mplan.parse_scenarios("execute-raises,stub-exits")) == {
        "execute-raises": setup.SCENARIO_LOAD_KEYS}  # the load, where a scenario needs one and none is given


def test_scenario_cells_judged_by_their_stored_verdicts_and_tabled():
    def row(status, verdicts, expected, **kw):
        figs = M.cell_figures([{"outcome": o, "load_outcome": lo, "triton_version": "2.51.0"} for o, lo in verdicts])
        return M.judge_scenario({"runtime": "0.7.0", "engine": "capi", "scenario": "retained-response",
                                 "control": False, "status": status, "reason": "", "expected": expected, **figs, **kw})

    good = row("pass", [("exit_timeout", "ok")] * 2, ("exit_timeout", "ok"))
    assert good["status"] == "pass" and good["as_expected"] == 2
    # the soak skips a load it did not measure; the matrix holds every cycle to the pair
    odd = row("pass", [("exit_timeout", "ok"), ("exit_timeout", "not_measured")], ("exit_timeout", "ok"))
    assert odd["status"] == "finding" and odd["reason"] == "verdicts exit_timeout / not_measured 1, exit_timeout / ok 1; "                                                         "expected exit_timeout / ok"
    failed = row("fail", [("clean", "ok")] * 2, ("clean", "ok"), control=True, reason="leaks: 1 stub(s)")
    assert failed["status"] == "fail" and failed["as_expected"] == 2
    unjudged = row("pass", [("exit_timeout", "ok")], None)
    assert unjudged["status"] == "unjudged" and "nothing known for Triton 2.51.0 through capi" in unjudged["reason"]
    skipped = {"runtime": "0.7.0", "triton_version": "2.51.0", "engine": "tritonserver", "scenario": "capi-only",
               "control": False, "status": "skipped", "reason": "scenario capi-only runs over capi only, not tritonserver",
               "expected": ("clean", "ok")}
    table = M.format_scenarios([good, odd, failed, unjudged, skipped]).splitlines()
    assert table[0] == ("| scenario | shape | runtime | Triton | engine | outcomes | load | growth | batches | "
                        "expected | as expected | status |")
    assert table[2] == ("| retained-response | - | 0.7.0 | 2.51.0 | capi | exit_timeout 2 | ok 2 | - | - | "
                        "exit_timeout / ok / ok | yes (2/2) | pass |")
    assert table[3].endswith("| exit_timeout / ok / ok | no (1/2) | finding: verdicts exit_timeout / not_measured 1, "
                             "exit_timeout / ok 1 |")
    assert table[4].startswith("| retained-response (control) |") and "| yes (2/2) | fail: leaks: 1 stub(s) |" in table[4]
    assert table[5].endswith("| not known | not known for this core | unjudged: nothing known for Triton 2.51.0 "
                             "through capi in shape unbatched: verdicts recorded, not judged |")
    assert table[6] == ("| capi-only | - | 0.7.0 | 2.51.0 | tritonserver | - | - | - | - | - | - | skipped: scenario "
                        "capi-only runs over capi only, not tritonserver |")
    assert M.exit_status([good, unjudged, skipped]) == 0 and M.exit_status([good, odd]) == 1



def test_a_scenario_cell_holds_every_cycle_to_its_growth_verdict():
    """A cell passes only where every cycle's growth verdict is the scenario's (ok for a control);
    a cycle without one (an older store) or not_measured is not held against it."""
    def row(growths, growth, status="pass", reason="", control=False):
        figs = M.cell_figures([{"outcome": "clean", "load_outcome": "ok", "growth_outcome": g,
                                "triton_version": "2.51.0"} for g in growths])
        return M.judge_scenario({"runtime": "0.7.0", "engine": "capi", "scenario": "leaks-memory",
                                 "control": control, "status": status, "reason": reason, "expected": ("clean", "ok"),
                                 "growth": growth, **figs})

    leak = row(["leaking", "leaking"], "leaking")
    assert leak["status"] == "pass" and leak["as_expected"] == 2 and leak["growth_outcomes"] == {"leaking": 2}
    mixed = row(["leaking", "ok"], "leaking")
    assert mixed["status"] == "finding" and mixed["reason"] == "growth ok 1 (expected leaking)" and mixed["as_expected"] == 1
    control = row(["leaking", "ok"], "ok", "fail", "growth outcomes not allowed: leaking=1", control=True)
    assert control["status"] == "fail" and control["as_expected"] == 1  # the soak's own reason stands
    assert row(["leaking", "ok"], "ok", control=True)["reason"] == "growth leaking 1 (expected ok)"
    assert row([None, "not_measured"], "leaking")["status"] == "pass"  # older cycles, unmeasured: not held
    assert row([None, None], "ok")["as_expected"] == 2
    both = M.judge_scenario({**row(["slowing"], "leaking"), "status": "pass", "verdicts": [("exit_timeout", "ok")]})
    assert both["reason"] == "verdicts exit_timeout / ok 1; expected clean / ok; growth slowing 1 (expected leaking)"
    table = M.format_scenarios([leak, mixed, control]).splitlines()
    assert table[2] == ("| leaks-memory | - | 0.7.0 | 2.51.0 | capi | clean 2 | ok 2 | leaking 2 | - | "
                        "clean / ok / leaking | yes (2/2) | pass |")
    assert table[3].endswith("| leaking 1, ok 1 | - | clean / ok / leaking | no (1/2) | finding: growth ok 1 "
                             "(expected leaking) |")
    assert table[4].startswith("| leaks-memory (control) |") and "| clean / ok / ok | no (1/2) |" in table[4]
    plain = {"runtime": "0.7.0", "engine": "capi", "retain": "none", "status": "fail", "reason": "",
             **M.cell_figures([{"outcome": "clean", "load_outcome": "ok", "growth_outcome": "leaking",
                                "triton_version": "2.51.0"}] * 2)}
    assert "| clean 2 | ok 2 | leaking 2 |" in M.format_table([plain])

def test_shapes_of_two_parts_are_joined_with_plus():
    from rig.workflows.matrix_plan import parse_shapes

    assert parse_shapes("decoupled+instances-2,instances-2") == ["decoupled,instances-2", "instances-2"]
    assert parse_shapes("all") is None and parse_shapes("first") == ["first"]
    with pytest.raises(RigError, match="unknown model shape"):
        parse_shapes("decoupled+twice")


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
        assert r[1] == triton and r[3] == "none" and r[4] == "clean 2" and r[5] == "ok 2" and r[8] == "100% (2/2)"
        assert r[10] == "pass"  # r[7]: the batches formed
    # the official engine: where its bindings do not load (not installed here), a row that says why
    for r in (r for r in rows if r[2] == "tritonserver"):
        assert r[10] == "pass" or (r[10].startswith("skipped: ") and "tritonserver" in r[10]), r
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
    assert soak_row[8] == "0% (0/1), 1 after" and soak_row[10] == "pass"
    assert bench_row[:3] == ["0.7.0", "2.51.0", "capi"] and bench_row[4] == "pass"
    infer_s = float(re.match(r"2: ([\d,]+) \(", bench_row[3]).group(1).replace(",", ""))
    windows = Store(results).read("windows")
    rig_windows = windows[(windows.tool == "rig") & (windows.concurrency == 2)]
    assert len(rig_windows) == 3 and infer_s > 0
    assert sorted(Store(results).read("cycles").retain.unique()) == ["last-response", "none"]


@pytest.mark.slow
def test_a_cell_that_outlives_its_time_is_a_row_not_a_crash(tmp_path):
    proc = _rig("matrix", "--runtimes", "0.7.0", "--cycles", "1", "--cell-timeout", "1", "--results",
                str(tmp_path / "r"), "--junit", str(tmp_path / "m.xml"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    (row,) = _table_rows(proc.stdout)
    assert row[0] == "0.7.0" and row[10].startswith("timeout: killed after")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert re.search(r"run_id \d{8}T\d{6}-[0-9a-f]{6}", (tmp_path / "m.xml").read_text()), \
        "a killed cell still names the run the matrix gave it"


@pytest.mark.slow
def test_scenarios_and_their_controls_into_one_store_and_the_report_tables_them(tmp_path):
    """Two scenarios, each with its negative control, on the embedded 2.51.0 through capi: four
    cells, each as expected, in one store whose `rig report` shows them with the control rows."""
    results = tmp_path / "r"
    proc = _rig("matrix", "--scenarios", "retained-response,finalize-raises", "--runtimes", "0.7.0", "--engines",
                "capi", "--cycles", "2", "--exit-timeout", "3", "--shapes", "first", "--jobs", "2",
                "--results", str(results))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = [r for r in _table_rows(proc.stdout) if not r[0].startswith("scenario")]
    # the two controls are one: the plain template (each scenario's model and client without the fault)
    assert [(r[0], r[1], r[3], r[4], r[9], r[10], r[11]) for r in rows] == [  # r[8]: the batches formed
        ("retained-response", "unbatched", "2.51.0", "capi", "exit_timeout / ok / ok", "yes (2/2)", "pass"),
        ("template", "unbatched", "2.51.0", "capi", "clean / ok / ok", "yes (2/2)", "pass"),
        ("finalize-raises", "unbatched", "2.51.0", "capi", "finalize_error / ok / ok", "yes (2/2)", "pass")]
    report = _rig("report", str(results), "--out", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
    section = report.stdout.split("## Scenarios")[1].split("\n## ")[0]
    verdicts, left = [[[c.strip() for c in ln.strip("|").split("|")] for ln in part.splitlines()
                       if ln.startswith("| ") and not ln.startswith(("| scenario", "| ---"))]
                      for part in section.split("**What the cycles left")]
    assert [r[:6] + r[7:9] for r in verdicts] == [
        ["retained-response", "2.51.0", "capi", "2", "exit_timeout 2", "ok 2", "exit_timeout / ok / ok", "2/2"],
        ["finalize-raises", "2.51.0", "capi", "2", "finalize_error 2", "ok 2", "finalize_error / ok / ok", "2/2"],
        ["template", "2.51.0", "capi", "2", "clean 2", "ok 2", "clean / ok / ok", "2/2"]]
    assert not any("leaking" in r[6] or "slowing" in r[6] for r in verdicts)  # the growth verdicts
    assert [r[-1] for r in verdicts] == ["server#8755", "the rig's own control", "the rig's own control"]
    assert [r[10] for r in verdicts] == ["0/2", "2/2", "2/2"]  # finalize before stop
    assert all(r[3] == "0" and r[4] == "0" for r in left)  # no stub killed, no shared memory left
    from rig.analysis.report.scenarios import LEFT
    slopes = LEFT.index("worker RSS B/cycle")
    assert all(r[slopes:slopes + 3] == ["n<3"] * 3 for r in left)  # worker RSS, /dev/shm, stub RSS: two cycles each
    assert all(r[LEFT.index("ready after load")] == "2/2" for r in left)
    assert "n<3: a slope needs 3 cycles" in section
    assert "template" in (tmp_path / "r.html").read_text()


def _cells(results) -> dict:
    """Each stored cell's verdicts, cycle by cycle: {(scenario, control, shape, core, engine): [...]}."""
    from rig.store import Store

    f = Store(str(results)).read("cycles")
    out: dict = {}
    for key, g in f.sort_values(["run_id", "cycle"]).groupby(["scenario", "control", "shape", "triton_version",
                                                               "engine"]):
        out[key] = sorted(zip(g["outcome"], g["load_outcome"], g["growth_outcome"]))
    return out


@pytest.mark.slow
def test_two_shards_into_one_store_equal_one_unsharded_run(tmp_path):
    """`--shard 0/2` and `--shard 1/2`, run as two processes at once into one store, give the same
    cells with the same verdicts as one unsharded run, each cell once."""
    import subprocess
    import sys

    words = ["matrix", "--scenarios", "finalize-raises,load-fails", "--runtimes", "0.7.0", "--engines", "capi",
             "--cycles", "1", "--exit-timeout", "3"]
    shards = [subprocess.Popen([sys.executable, "-m", "rig", *words, "--shard", f"{k}/2", "--results",
                                str(tmp_path / "sharded")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True) for k in range(2)]
    whole = _rig(*words, "--jobs", "2", "--results", str(tmp_path / "whole"))
    outs = [p.communicate(timeout=600)[0] for p in shards]
    assert whole.returncode == 0, whole.stdout[-3000:]
    assert [p.returncode for p in shards] == [0, 0], outs
    counts = [int(re.search(r"shard \d/2: (\d+) cell\(s\) to run", o).group(1)) for o in outs]
    assert sum(counts) == 8 and min(counts) >= 1  # 3 shapes + 2, and their shared control (the template) in 3
    sharded, unsharded = _cells(tmp_path / "sharded"), _cells(tmp_path / "whole")
    assert sharded == unsharded and len(sharded) == 8
    assert all(len(v) == 1 for v in sharded.values())  # every cell once
