"""Lifecycle scenarios (rig.scenarios.catalog, `rig scenarios`, `--scenario`, `--control`): one vocabulary
with the fault presets and retention policies, refused combinations in one line, the `scenario`
column, the report's table; and end to end on real cores, each scenario's known verdicts with its
negative control clean."""

import re

import pandas as pd
import pytest
from helpers import cycle_row, cycles, rig

from rig.parent import config
from rig.scenarios import catalog as scenarios
from rig.scenarios import setup as scenario_setup
from rig.analysis.report import scenarios as report_scenarios
from rig.common.errors import RigError
from rig.parent.repository import FAULTS


def test_one_vocabulary_with_the_fault_presets_and_retention_policies():
    for s in scenarios.SCENARIOS.values():
        assert s.fault in FAULTS and s.retain in config.RETAIN
        assert s.what and s.expected and s.control == ("clean", "ok")
        assert s.repository is None or scenario_setup.repository_of(s).is_dir()
    named = {s.fault for s in scenarios.SCENARIOS.values()} | set(scenarios.UNNAMED)
    assert set(FAULTS) - {"none"} <= named  # every fault preset is a scenario, or said why not
    assert {s.retain for s in scenarios.SCENARIOS.values()} == set(config.RETAIN) - {"none"} | {"none"}
    assert scenarios.name_of("none", "none") == "baseline"
    assert scenarios.name_of("none", "last-response") == "retained-response"
    assert scenarios.name_of("execute-raises", "none") == "execute-raises"
    assert scenarios.name_of("execute-raises", "last-array") is None  # a mix no scenario names


def test_scenario_sets_fault_and_retention_and_its_control_drops_them():
    cfg = config.load(None, {"scenario": "retained-response"})
    assert (cfg.fault, cfg.retain, cfg.control) == ("none", "last-response", False)
    cfg = config.load(None, {"scenario": "stub-exits", "control": True})
    assert (cfg.fault, cfg.retain) == ("none", "none")
    cfg = config.load(None, {"scenario": "stub-exits"})
    assert cfg.fault == "stub-exits" and cfg.validate().fault == "stub-exits"  # validating twice holds


@pytest.mark.parametrize("given, words", [
    ({"scenario": "nope"}, "unknown scenario 'nope': choose one of retained-response"),
    ({"scenario": "retained-response", "retain": "last-array"}, "--retain last-array cannot combine with --scenario"),
    ({"scenario": "execute-raises", "fault": "stub-exits"}, "--fault stub-exits cannot combine"),
    ({"scenario": "execute-raises", "model_repository": "/tmp"}, "--model-repository cannot combine"),
    ({"control": True}, "--control runs a scenario's negative control: give --scenario NAME too"),
    ({"scenario": "memory", "control": True}, "--scenario memory has no negative control"),
    ({"scenario": "reload", "restart": "same-process"}, "--restart same-process cannot combine with --scenario reload"),
    ({"scenario": "stop-while-loading", "stop_strategy": "unload-then-stop"}, "--stop-strategy unload-then-stop"),
    ({"scenario": "metrics", "model_repository": "/tmp"}, "--model-repository cannot combine"),
    ({"scenario": "ready-stub-dead", "model_repository": "/tmp", "control": True},
     "--control with --scenario ready-stub-dead needs its own models"),
])
def test_what_cannot_combine_is_refused_in_one_line(given, words):
    with pytest.raises(RigError) as e:
        config.load(None, given)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_client_scenario_sets_its_client_and_runs_over_the_users_models_too(tmp_path):
    cfg = config.load(None, {"scenario": "stop-in-flight"})
    assert (cfg.fault, cfg.client, cfg.requests) == ("slow-execute", "stop-in-flight", 10)
    cfg = config.load(None, {"scenario": "stop-in-flight", "control": True})
    assert (cfg.fault, cfg.client) == ("none", "stop-in-flight")  # the same client, the model without its fault
    cfg = config.load(None, {"scenario": "refused-request", "control": True})
    assert cfg.client == "none"  # the client is the fault: its control leaves it out
    cfg = config.load(None, {"scenario": "reload"})
    assert (cfg.restart, cfg.fault) == ("reload", "leaks-per-load")
    cfg = config.load(None, {"scenario": "memory", "requests": 700})
    assert cfg.requests == 700  # the user's count stands; the scenario's replaces only the default
    # another team's models, the scenario's client around them (their fault is their model's)
    cfg = config.load(None, {"scenario": "stop-while-loading", "model_repository": str(tmp_path)})
    assert (cfg.fault, cfg.client, cfg.model_repository) == ("none", "stop-while-loading", str(tmp_path))
    # a scenario made by its client around models of its own: the client around the user's
    for name, client in (("ready-stub-dead", "stub-killed"), ("missing-model-py", "load-missing"),
                         ("ensemble-in-flight", "stop-in-flight")):
        cfg = config.load(None, {"scenario": name, "model_repository": str(tmp_path)})
        assert (cfg.client, cfg.model_repository) == (client, str(tmp_path)), name
    cfg = config.load(None, {"scenario": "worker-killed", "model_repository": str(tmp_path)})
    assert cfg.model_repository == str(tmp_path)
    # a run of the template's fault alone, without the client, is not the scenario
    assert scenarios.name_of("slow-execute", "none") is None and scenarios.name_of("leaks-per-load", "none") is None
    # the same ingredients given as options are filed under the scenario they make
    assert scenarios.name_of("leaks-per-load", "none", "reload") == "reload"
    assert scenarios.name_of("none", "none", "reload") == "baseline"
    assert scenarios.name_of("slow-execute", "none", "same-process", "stop-in-flight") == "stop-in-flight"


def test_the_command_line_refuses_in_one_line_with_status_2(tmp_path):
    proc = rig("soak", "--scenario", "retained-response", "--retain", "last-array", "--results", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "cannot combine with --scenario retained-response" in proc.stderr


def test_rig_scenarios_lists_every_scenario_with_its_report_and_verdicts():
    proc = rig("scenarios", "--markdown")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("| ")][2:]
    assert [ln.split(" | ")[0][2:] for ln in lines] == list(scenarios.SCENARIOS)
    assert "| retained-response | the client keeps the last response object across stop() | server#8755 | " \
           "exit_timeout / ok | unbatched, batched, instances-2, decoupled | " in proc.stdout
    # where its verdicts are known is read from the data (rig/scenarios/known_verdicts.csv), not code
    from rig.scenarios import known

    versions = sorted({k[4] for k in known.table() if k[0] == "retained-response" and not k[1]}, key=known._version_key)
    assert f"| {', '.join(versions)}; " in lines[0]


@pytest.mark.slow  # a process of its own: the end-to-end tier
def test_rig_scenarios_accept_records_a_reviewed_runs_verdicts_as_data(tmp_path):
    """`rig scenarios --accept RESULTS` writes each scenario cell's verdicts, per shape, engine and
    core, into the known-verdicts file; a cell whose cycles disagree is named and left out."""
    from rig.scenarios import known
    from rig.store import Store

    store = Store(str(tmp_path / "R"))
    rows = [cycle_row(i, scenario="execute-raises", control=False, shape="batched", outcome="clean",
                      load_outcome="errors", growth_outcome="ok") for i in (1, 2)]
    rows += [cycle_row(3, scenario="stub-exits", control=False, shape="unbatched", outcome="exit_timeout",
                       load_outcome="errors"),
             cycle_row(4, scenario="stub-exits", control=False, shape="unbatched", outcome="clean",
                       load_outcome="errors")]
    store.write("cycles", rows, "2.51.0", "run")
    path = tmp_path / "known.csv"
    proc = rig("scenarios", "--accept", str(tmp_path / "R"), "--known-file", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "1 cell(s) recorded as known" in proc.stdout and "left out: stub-exits unbatched capi 2.51.0" in proc.stdout
    got = known.lookup("execute-raises", False, "batched", "capi", "2.51.0", path)
    assert got.verdicts == ("clean", "errors") and got.growth == "ok" and got.cycles == 2
    assert known.lookup("stub-exits", False, "unbatched", "capi", "2.51.0", path) is None
    empty = rig("scenarios", "--accept", str(tmp_path / "nothing"), "--known-file", str(path))
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1 and "holds no scenario cycles" in empty.stderr


def test_an_intermittent_cell_is_recorded_with_every_verdict_and_either_is_as_known(tmp_path):
    """`--accept R --intermittent`: a cell whose cycles disagree is recorded with each verdict its
    cycles gave (``exit_timeout|clean``); a cycle giving any one of them is as known, another is a
    finding, in the matrix's judgement and in the grid alike."""
    from rig.scenarios import known
    from rig.analysis.conformance import table as cf
    from rig.analysis.matrix import judge_scenario
    from rig.store import Store

    store = Store(str(tmp_path / "R"))
    outcomes = ("exit_timeout", "clean", "clean")
    rows = [cycle_row(i, scenario="execute-raises", control=False, shape="instances-2", engine="tritonserver",
                      outcome=o, load_outcome="errors", growth_outcome="ok") for i, o in enumerate(outcomes, 1)]
    store.write("cycles", rows, "2.51.0", "run")
    path = tmp_path / "known.csv"
    plain = rig("scenarios", "--accept", str(tmp_path / "R"), "--known-file", str(path))
    assert "left out: execute-raises instances-2 tritonserver 2.51.0" in plain.stdout
    proc = rig("scenarios", "--accept", str(tmp_path / "R"), "--intermittent", "--known-file", str(path))
    assert proc.returncode == 0 and "1 cell(s) recorded" in proc.stdout, proc.stdout + proc.stderr
    k = known.lookup("execute-raises", False, "instances-2", "tritonserver", "2.51.0", path)
    assert k.verdicts == ("clean|exit_timeout", "errors") and known.intermittent(k.verdicts)
    assert known.holds(("exit_timeout", "errors"), k.verdicts) and known.holds(("clean", "errors"), k.verdicts)
    assert not known.holds(("finalize_error", "errors"), k.verdicts)
    assert not known.holds(("clean", "ok"), k.verdicts)
    row = judge_scenario({"status": "pass", "expected": k.verdicts, "growth": "ok",
                          "verdicts": [("clean", "errors"), ("exit_timeout", "errors")]})
    assert row["status"] == "pass" and row["as_expected"] == 2
    row = judge_scenario({"status": "pass", "expected": k.verdicts, "growth": "ok",
                          "verdicts": [("clean", "errors"), ("stub_crashed", "errors")]})
    assert row["status"] == "finding"
    cell, = cf.cells(pd.DataFrame([r.__dict__ for r in rows]).assign(triton_version="2.51.0"), path)
    assert cell.judgement == cf.AS_KNOWN


def test_a_racing_cell_is_not_narrowed_by_a_run_that_fell_on_one_side(tmp_path):
    """A cell known as intermittent stays so when a later run's cycles all gave one of its
    alternatives (three cycles on one side of a race do not narrow it); a verdict it never named
    replaces it (the cell changed)."""
    from rig.scenarios import known

    path = tmp_path / "known.csv"

    def run(outcomes, run_id, **kw):
        return [cycle_row(i, run_id=run_id, scenario="execute-raises", control=False, shape="batched",
                          engine="tritonserver", outcome=o, load_outcome="errors",
                          growth_outcome="ok").__dict__ | {"triton_version": "2.60.0"}
                for i, o in enumerate(outcomes, 1)]

    known.accept(run(("exit_timeout", "clean", "clean"), "r1"), path, intermittent_ok=True)
    known.accept(run(("exit_timeout",) * 3, "r2"), path)
    k = known.lookup("execute-raises", False, "batched", "tritonserver", "2.60.0", path)
    assert k.verdicts == ("clean|exit_timeout", "errors") and k.cycles == 6 and k.run_id == "r1,r2"
    # the same results accepted again (a store that holds r1 and r2): no cycle counted twice
    known.accept(run(("exit_timeout", "clean", "clean"), "r1") + run(("exit_timeout",) * 3, "r2"), path,
                 intermittent_ok=True)
    k = known.lookup("execute-raises", False, "batched", "tritonserver", "2.60.0", path)
    assert k.verdicts == ("clean|exit_timeout", "errors") and k.cycles == 6 and k.run_id == "r1,r2"
    known.accept(run(("stub_crashed",) * 3, "r3"), path)
    k = known.lookup("execute-raises", False, "batched", "tritonserver", "2.60.0", path)
    assert k.verdicts == ("stub_crashed", "errors") and k.cycles == 3 and k.run_id == "r3"


def test_report_table_counts_verdicts_against_the_known_ones():
    rows = [cycle_row(i, scenario="retained-response", control=False, outcome="exit_timeout", load_outcome="ok",
                      stop_latency_s=3.0, finalize_expected=1, finalize_before_stop=0)
            for i in (1, 2)]
    rows += [cycle_row(3, scenario="retained-response", control=False, outcome="clean", load_outcome="ok",
                       stop_latency_s=2.0, finalize_expected=1, finalize_before_stop=1)]
    rows += [cycle_row(i, run_id="r2", scenario="retained-response", control=True, outcome="clean",
                       load_outcome="ok", stop_latency_s=2.0) for i in (1, 2, 3)]
    rows += [cycle_row(1, run_id="r3")]  # an older cycle: no scenario
    df = pd.DataFrame([r.__dict__ for r in rows]).assign(triton_version="2.51.0")  # a partition column
    t = report_scenarios.rows(df)
    assert list(t["scenario"]) == ["retained-response", "retained-response (control)"]
    first, control = t.iloc[0], t.iloc[1]
    assert first["as expected"] == "2/3" and first["outcomes"] == "exit_timeout 2, clean 1"
    assert first["finalize before stop"] == "1/3" and first["stop p50 s"] == 3.0
    assert control["as expected"] == "3/3" and control["upstream"] == "server#8755"
    assert report_scenarios.scenarios_section(df.drop(columns=["scenario"])) is None  # an older store


def _soak(tmp_path, name, *extra, runtime=None):
    results = tmp_path / "results"
    load = ["--workload", "steady", "--workload-seconds", "2", "--users", "2", "--request-timeout", "5"]
    args = ["soak", "--scenario", name, *extra, "--cycles", "3", "--exit-timeout", "3", "--engine", "capi",
            "--results", str(results), *(["--runtime", runtime] if runtime else []),
            *(load if scenarios.get(name).workload else [])]
    proc = rig(*args, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return cycles(results)


@pytest.mark.slow
# One older core (2.48.0) through retained-array; stub-exits there took 127 s of CI's 30 minutes and is a
# cell of the conformance table on every core (rig matrix --scenarios all).
@pytest.mark.parametrize("name, runtime", [("retained-response", None), ("stub-exits", None),
                                           ("finalize-raises", None), ("retained-array", "0.5.10"),
                                           ("sender-kept", None)])
def test_scenario_gives_its_verdicts_three_cycles_of_three_and_its_control_is_clean(tmp_path, name, runtime):
    s = scenarios.get(name)
    got = _soak(tmp_path / "on", name, runtime=runtime)
    version = {None: "2.51.0", "0.5.10": "2.48.0"}[runtime]
    assert list(zip(got.outcome, got.load_outcome)) == [s.expected_for("capi", version)] * 3
    assert set(got.scenario) == {name} and not got.control.any()
    control = _soak(tmp_path / "off", name, "--control", runtime=runtime)
    assert list(zip(control.outcome, control.load_outcome)) == [("clean", "ok")] * 3
    assert set(control.scenario) == {name} and control.control.all()


@pytest.mark.slow
def test_a_run_given_only_retain_is_filed_under_its_scenario_and_the_report_tables_it(tmp_path):
    results = tmp_path / "results"
    proc = rig("cycle", "--retain", "last-response", "--exit-timeout", "3", "--requests", "5",
               "--results", str(results))
    assert proc.returncode == 0, proc.stderr[-2000:]
    c = cycles(results)
    assert list(c.scenario) == ["retained-response"] and c.control.isna().all()
    report = rig("report", str(results))
    assert report.returncode == 0, report.stderr
    # (its growth: not_measured, a handful of requests; not held against it)
    assert re.search(r"\| retained-response \| 2\.51\.0 \| capi \| 1 \| exit_timeout 1 \| ok 1 \| (ok|not_measured) 1 "
                     r"\| exit_timeout / ok / ok \| 1/1 \|", report.stdout), report.stdout


def test_a_scenario_runs_stored_config_reads_back_the_same_in_every_shape():
    """What a run stores (``RunConfig.to_toml``) is what `rig soak --resume` and a matrix cell read
    back: every scenario, in every shape it runs in, and its control, give the same config again."""
    from rig.parent import config
    from rig.scenarios import catalog as scenarios

    for s in scenarios.SCENARIOS.values():
        for shape in s.shapes:
            for control in (False, True) if s.has_control else (False,):
                made = config.load(None, {"scenario": s.name, "model_shape": shape, "control": control or None})
                again = config.from_toml_text(made.to_toml())
                assert again == made, (s.name, shape, control)
