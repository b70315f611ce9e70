"""The 2026 lifecycle scenarios that need a core built with ensembles or the sequence batcher
(issue 43): ``ensemble-in-flight`` (server#8458, server#8597, core#455/#466/#470/#482/#483) and
``sequence-at-stop`` (server#8449, server#7117 / core#341). Their definitions, the engines'
sequence requests, what a core lacks said in one line (fast); each scenario and its negative
control run once through the C API on the embedded core 2.51.0, held to what was measured there
(slow)."""

import dataclasses
import json

import pytest
from helpers import cycles, rig

from rig.common.errors import RigError
from rig.parent import config, runtime
from rig.scenarios import catalog as scenarios
from rig.scenarios import core_features
from rig.scenarios import setup as scenario_setup
from rig.worker.clients import clientside, sequences
from rig.worker.engines.base import ONE_SHOT_IDS, Engine, Sequence
from rig.workflows import matrix_plan

NEW = {"ensemble-in-flight": ("stop-in-flight", ("ensemble",)),
       "sequence-at-stop": ("sequence-at-stop", ("sequence_batching",))}


def test_each_is_listed_with_its_client_what_it_needs_its_reports_and_fixes():
    for name, (client, needs) in NEW.items():
        s = scenarios.get(name)
        assert (s.client, s.needs) == (client, needs) and s.upstream and s.what and s.has_control
        assert scenario_setup.repository_of(s).is_dir()
    ens = scenarios.get("ensemble-in-flight")
    assert ens.client_is_fault and "core#483" in ens.upstream  # its control: no request in flight at stop
    assert ens.fixed_in[0].startswith("core#483 in r26.05 (2.69.0)")
    assert not scenarios.get("sequence-at-stop").client_is_fault  # its control runs the client, ending them
    proc = rig("scenarios")
    assert proc.returncode == 0, proc.stderr
    for name in NEW:
        assert f"\n{name}  (" in proc.stdout
    assert "fixed upstream in: core#483 in r26.05 (2.69.0)" in proc.stdout


def test_the_ensemble_keeps_an_empty_version_folder_and_every_model_a_fault_switch(tmp_path):
    for name in NEW:
        on = scenario_setup.materialize(scenario_setup.repository_of(scenarios.get(name)), tmp_path / name, control=True)
        for cfg in on.glob("*/config.pbtxt"):
            assert '"fault" value: { string_value: "off" }' in cfg.read_text(), cfg
    assert (tmp_path / "ensemble-in-flight" / "ensemble_pipeline" / "1").is_dir()


def test_the_control_of_the_ensemble_drops_the_client_and_of_the_sequences_keeps_it():
    assert config.load(None, {"scenario": "ensemble-in-flight", "control": True}).client == "none"
    assert config.load(None, {"scenario": "ensemble-in-flight"}).client == "stop-in-flight"
    assert config.load(None, {"scenario": "sequence-at-stop", "control": True}).client == "sequence-at-stop"
    assert "sequence-at-stop" in clientside.CLIENTS


class _Stateful(Engine):
    """An engine whose one model is stateful; it answers nothing (only sequence_of is asked)."""

    def stateful(self, model):
        return model == "seq"

    start = is_ready = model_ready = server_version = model_metadata = model_states = None
    load_model = unload_model = infer = stop = close = None


def test_a_request_to_a_stateful_model_goes_in_a_sequence_of_its_own_unless_given_one():
    e = _Stateful()
    a, b = e.sequence_of("seq", None), e.sequence_of("seq", None)
    assert a.start and a.end and a.flags == 3 and b.correlation_id == a.correlation_id + 1 >= ONE_SHOT_IDS + 1
    mine = Sequence(1001, start=True)
    assert e.sequence_of("seq", mine) is mine and mine.flags == 1 and Sequence(7, end=True).flags == 2
    assert e.sequence_of("plain", None) is None


def test_states_left_sums_what_each_finalize_wrote(tmp_path):
    assert sequences.states_left(str(tmp_path)) is None and sequences.states_left(None) is None
    (tmp_path / "sequences-11.count").write_text("3")
    (tmp_path / "sequences-12.count").write_text("1\n")
    (tmp_path / "marker.json").write_text(json.dumps({"kind": "finalize"}))
    assert sequences.states_left(str(tmp_path)) == 4


def _fake_runtime(tmp_path, flags: dict, library: bytes):
    lib = tmp_path / "py3.11" / "lib" / "libtritonserver.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(library)
    (tmp_path / "runtime.json").write_text(json.dumps({"core_flags": flags}))
    real = runtime.resolve(None, auto_install=False)
    return dataclasses.replace(real, core_library=str(lib), kind="built", triton_version="9.9.9")


def test_a_core_built_without_ensembles_is_refused_in_one_line_and_skipped_in_the_matrix(tmp_path):
    has_both = b"x" + b"".join(m for m, _, _ in core_features.FEATURES.values())
    rt = _fake_runtime(tmp_path, {"TRITON_ENABLE_ENSEMBLE": "OFF"}, has_both)
    assert core_features.missing(rt, ("ensemble", "sequence_batching")) == ["ensembles"]
    with pytest.raises(RigError) as e:
        core_features.check(scenarios.get("ensemble-in-flight"), rt)
    assert str(e.value) == ("scenario ensemble-in-flight needs a core built with ensembles: Triton 9.9.9 "
                            "(built) was built without")
    core_features.check(scenarios.get("sequence-at-stop"), rt)  # it has the sequence batcher
    plan = [{"spec": "fake", "triton": "9.9.9", "engines": [("capi", "asked")], "runtime": rt}]
    cells = matrix_plan.scenario_cells([scenarios.get("ensemble-in-flight"), scenarios.get("sequence-at-stop")], plan)
    skipped = [(c["scenario"], c["control"]) for c in cells if c.get("status") == "skipped"]
    assert skipped == [("ensemble-in-flight", False), ("ensemble-in-flight", True)]
    assert all("built without" in c["reason"] for c in cells if c.get("status") == "skipped")


def test_every_core_here_has_both():
    for spec in ("0.7.0", "2.67.0", "2.71.0"):
        try:
            rt = runtime.resolve(spec, auto_install=False)
        except RigError:
            continue  # not installed on this host
        assert core_features.missing(rt, ("ensemble", "sequence_batching")) == [], spec


def _soak(results, name, *extra):
    proc = rig("soak", "--scenario", name, *extra, "--cycles", "1", "--exit-timeout", "5",
               "--request-timeout", "5", "--results", str(results))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return cycles(results).iloc[0]


@pytest.mark.slow
def test_ensemble_requests_in_flight_at_stop_are_lost_on_2_51_and_its_control_is_clean(tmp_path):
    # 2.51.0: the steps refused once stop() began leave their ensemble request never released
    # (core#483's counter): lost, and stop() waits out the exit timeout on the ensemble
    row = _soak(tmp_path / "on", "ensemble-in-flight")
    assert (row.outcome, row.load_outcome, row.in_flight) == ("requests_lost", "ok", 8)
    assert row.in_flight_lost >= 1 and row.stop_latency_s >= 4.9
    control = _soak(tmp_path / "off", "ensemble-in-flight", "--control")
    assert (control.outcome, control.load_outcome) == ("clean", "ok") and control.stop_latency_s < 4


@pytest.mark.slow
def test_sequences_open_at_stop_hold_it_until_the_reaper_and_their_state_stays(tmp_path):
    row = _soak(tmp_path / "on", "sequence-at-stop")
    assert (row.outcome, row.load_outcome) == ("clean", "ok")
    assert (row.sequences_open, row.sequences_reaped, row.sequence_states_left) == (4, 2, 4)
    assert row.stop_latency_s >= 2.9  # stop() waits for the open sequences until the reaper ends them
    control = _soak(tmp_path / "off", "sequence-at-stop", "--control")
    assert control.outcome in ("clean", "crashed")  # 2.51.0's stop crashed once in 4 (SIGSEGV), see the docs
    if control.outcome == "clean":
        assert (control.sequences_open, control.sequences_reaped, control.sequence_states_left) == (0, 0, 0)
        assert control.stop_latency_s < 2.9
