"""Model shapes (rig.scenarios.shapes) and the verdicts known per shape (rig.scenarios.known): pure functions, then a
real cycle in each shape the template model serves."""

from __future__ import annotations

import pytest
from helpers import rig

from rig.parent import config
from rig.scenarios import catalog as scenarios
from rig.scenarios import known, shapes
from rig.common.errors import RigError
from rig.parent.repository import ModelSpec, parse_pbtxt, render


@pytest.mark.parametrize("name", ["unbatched", "batched", "batched-delayed", "max-batch", "instances-2", "decoupled",
                                  "decoupled,instances-2", "batched,instances-3"])
def test_a_shape_name_reads_back_as_itself(name):
    assert shapes.parse(name).name == name


def test_a_models_config_says_its_shape_whatever_its_batch_size():
    def of(text):
        return shapes.of_config(parse_pbtxt(text))

    assert of('name: "m" max_batch_size: 0') == "unbatched"
    assert of("max_batch_size: 4\ndynamic_batching { }") == "batched"
    # a queue delay, any: the axis that moves execute-raises' race
    assert of("max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: 100 }") == "batched-delayed"
    assert of("max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: 0 }") == "batched"
    assert of("max_batch_size: 4\ndynamic_batching { preferred_batch_size: [2, 4] }") == "batched"
    assert shapes.of_config({"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": "500"}}) \
        == "batched-delayed"  # the core's JSON: an int64 as a string
    assert of("max_batch_size: 16") == "max-batch"  # a batch dimension, one request an execute
    assert of("max_batch_size: 0\ninstance_group [ { count: 2 kind: KIND_CPU } ]") == "instances-2"
    assert of("instance_group [ { count: 1 }, { count: 2 } ]") == "instances-3"
    assert of("model_transaction_policy { decoupled: true }\nmax_batch_size: 0") == "decoupled"
    assert of("model_transaction_policy { decoupled: false }") == "unbatched"
    with pytest.raises(RigError, match="unknown model shape 'wide'"):
        shapes.parse("wide")


def test_instances_rewritten_in_a_config_or_a_group_added():
    assert "count: 2" in shapes.with_instances('instance_group [ { count: 1 kind: KIND_CPU } ]', 2)
    added = shapes.with_instances('name: "m"\nbackend: "python"\n', 2)
    assert shapes.of_config(parse_pbtxt(added)) == "instances-2"


def test_the_template_renders_each_shape(tmp_path):
    for name in ("batched", "batched-delayed", "instances-2", "decoupled"):
        sh = shapes.parse(name)
        mdir = render(ModelSpec(name=f"m{len(name)}", instances=sh.instances, max_batch_size=sh.max_batch_size,
                                dynamic_batching=sh.dynamic_batching, queue_delay_us=sh.queue_delay_us,
                                decoupled=sh.decoupled), tmp_path)
        assert shapes.of_config(parse_pbtxt((mdir / "config.pbtxt").read_text())) == name


def test_a_scenario_runs_in_its_shapes_only_and_sets_the_template_to_it():
    cfg = config.RunConfig(scenario="execute-raises", model_shape="batched")
    cfg = cfg.validate()
    assert (cfg.max_batch_size, cfg.dynamic_batching, cfg.instances, cfg.decoupled, cfg.model_shape) == \
        (8, True, 1, False, "batched")
    default = config.RunConfig(scenario="sender-kept")
    default = default.validate()
    assert default.model_shape == "decoupled"  # its own models' shape, its first
    with pytest.raises(RigError, match="scenario load-fails runs in unbatched, instances-2"):
        config.RunConfig(scenario="load-fails", model_shape="decoupled").validate()
    with pytest.raises(RigError, match="cannot combine with --scenario execute-raises"):
        config.RunConfig(scenario="execute-raises", model_shape="batched", instances=3).validate()
    plain = config.RunConfig(model_shape="decoupled,instances-2")
    plain = plain.validate()
    assert (plain.instances, plain.decoupled) == (2, True)
    with pytest.raises(RigError, match="--model-repository runs your own"):
        config.RunConfig(model_shape="batched", model_repository="/tmp").validate()
    assert all(s.shapes and len(set(s.shapes)) == len(s.shapes) for s in scenarios.SCENARIOS.values())


def test_known_verdicts_are_data_read_back_as_written(tmp_path):
    path = tmp_path / "k.csv"
    rows = {("execute-raises", False, "batched", "capi", "2.51.0"): known.Known("clean", "errors", "ok", 3, "r1"),
            ("execute-raises", True, "batched", "capi", "2.9.0"): known.Known("clean", "ok", "ok", 3, "r1"),
            ("execute-raises", True, "batched", "capi", "2.10.0"): known.Known("clean", "ok", "ok", 3, "r1")}
    known.write(rows, path)
    assert known.table(path) == rows
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    assert lines[0] == ",".join((*known.FIELDS, *known.OPTIONAL)) and "2.9.0" in lines[2] and "2.10.0" in lines[3]  # by version
    assert known.lookup("execute-raises", False, "batched", "capi", "2.51.0", path).verdicts == ("clean", "errors")
    assert known.lookup("execute-raises", False, "unbatched", "capi", "2.51.0", path) is None
    # a shape the scenario does not run in is held to its default shape's verdicts; one it runs in is not
    stub_dead = scenarios.get("ready-stub-dead")
    assert "batched" not in stub_dead.shapes and stub_dead.shapes[0] == "unbatched"
    known.write({("ready-stub-dead", False, "unbatched", "capi", "2.51.0"):
                 known.Known("finalize_missing", "ok", "ok", 3, "r2")}, path)
    assert known.expected(stub_dead, False, "batched", "capi", "2.51.0", path).verdicts == ("finalize_missing", "ok")
    assert known.expected(stub_dead, False, "instances-2", "capi", "2.51.0", path) is None
    # a queue delay where the scenario has no row for one: its batched row, not its default shape's
    retained = scenarios.get("retained-response")
    assert "batched-delayed" not in retained.shapes and retained.shapes[0] == "unbatched"
    known.write({("retained-response", False, "batched", "capi", "2.51.0"): known.Known("clean", "ok", "ok", 3, "r3"),
                 ("retained-response", False, "unbatched", "capi", "2.51.0"):
                 known.Known("exit_timeout", "ok", "ok", 3, "r3")}, path)
    assert known.expected(retained, False, "batched-delayed", "capi", "2.51.0", path).verdicts == ("clean", "ok")
    assert shapes.nearest("batched-delayed,instances-2", ("unbatched", "batched,instances-2")) == "batched,instances-2"
    assert shapes.nearest("batched-delayed", ("unbatched", "instances-2")) == "unbatched"
    assert shapes.nearest("wide", ("decoupled",)) == "decoupled"
    raises = scenarios.get("execute-raises").shapes
    assert shapes.nearest("batched-delayed,instances-2", raises) == "batched-delayed"  # its batching first
    assert shapes.nearest("batched,instances-3", raises) == "batched"
    assert shapes.nearest("instances-3", raises) == "unbatched"  # no row for 3 instances: the default
    assert shapes.nearest("max-batch", raises) == "unbatched"
    assert "batched-delayed" in scenarios.get("execute-raises").shapes  # the scenario whose race it moves
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(RigError, match="not a known-verdicts file"):
        known.table(bad)


def test_a_core_run_through_other_bindings_is_held_to_their_row_not_its_releases_own(tmp_path):
    """The embedded 2.51.0 runs PyPI's 2.71.0 bindings; its release's users ran its own: two rows."""
    path = tmp_path / "k.csv"
    key = ("retained-array", False, "batched", "tritonserver", "2.51.0")
    known.write({(*key, "own"): known.Known("clean", "ok", "ok", 3, "r1", "own"),
                 (*key, "2.71.0"): known.Known("exit_timeout", "ok", "ok", 3, "r0", "2.71.0"),
                 ("retained-array", False, "batched", "capi", "2.51.0", ""): known.Known("exit_timeout", "ok", "ok", 3, "r2")},
                path)
    assert known.table(path)[key].verdicts == ("clean", "ok")  # what the release's users ran stands first
    assert known.lookup(*key, path=path).verdicts == ("clean", "ok")
    assert known.lookup(*key, path=path, bindings="own").verdicts == ("clean", "ok")
    assert known.lookup(*key, path=path, bindings="2.71.0").verdicts == ("exit_timeout", "ok")
    assert known.lookup(*key, path=path, bindings="2.70.0") is None  # bindings no row says: unjudged
    retained = scenarios.get("retained-array")
    assert known.expected(retained, False, "batched", "tritonserver", "2.51.0", path, "2.71.0").lifecycle == "exit_timeout"
    # a stored cycle says its bindings as a row does
    assert known.bindings_label({"engine": "tritonserver", "bindings_own": False, "tritonserver_version": "2.71.0"}) == "2.71.0"
    assert known.bindings_label({"engine": "tritonserver", "bindings_own": True, "tritonserver_version": "2.51.0"}) == "own"
    assert known.bindings_label({"engine": "tritonserver", "bindings_own": float("nan")}) == ""
    assert known.bindings_label({"engine": "capi", "bindings_own": None}) == ""
    # accepting a run through other bindings adds their row beside the release's own, never over it
    cycles = [{"scenario": "retained-array", "control": False, "shape": "batched", "engine": "tritonserver",
               "triton_version": "2.51.0", "outcome": "exit_timeout", "load_outcome": "ok", "run_id": "r9",
               "bindings_own": False, "tritonserver_version": "2.70.0"}] * 3
    assert known.accept(cycles, path) == (1, [])
    assert known.lookup(*key, path=path, bindings="2.70.0").run_id == "r9"
    assert known.lookup(*key, path=path).run_id == "r1" and len(known.entries(path)) == 4
    # cycles that do not say theirs (a store from before the column) update the row a lookup reads
    unsaid = [{**c, "bindings_own": None, "tritonserver_version": None, "run_id": "r10"} for c in cycles]
    assert known.accept(unsaid, path) == (1, [])
    assert known.lookup(*key, path=path).run_id == "r10" and len(known.entries(path)) == 4
    # a file written before the column reads as not saying, and stands for any bindings
    old = tmp_path / "old.csv"
    old.write_text(",".join(known.FIELDS) + "\nretained-array,0,batched,tritonserver,2.51.0,clean,ok,ok,3,r1\n")
    assert known.lookup(*key, path=old, bindings="2.71.0").run_id == "r1"


def test_the_rigs_own_known_verdicts_name_real_scenarios_shapes_and_engines():
    for (name, control, shape, engine, version), k in known.table().items():
        s = scenarios.get(name)
        assert shape in s.shapes and engine in s.engines and version.count(".") == 2, (name, shape, engine)
        assert not control or s.has_control
        assert k.cycles >= 1 and k.run_id
    said = {key[5] for key in known.entries() if key[3] == "tritonserver"}
    assert said == {"own", "2.71.0"}  # every official row says its bindings: the release's own, or PyPI's


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["decoupled", "batched", "batched-delayed", "instances-2"])
def test_a_cycle_in_each_template_shape_answers_and_records_it(tmp_path, runtime, shape):
    proc = rig("cycle", "--model-shape", shape, "--requests", "20", "--exit-timeout", "3", "--runtime", runtime.name,
               "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from rig.store import Store

    row = Store(str(tmp_path)).read("cycles").iloc[0]
    assert row["shape"] == shape and row["outcome"] == "clean" and row["load_outcome"] == "ok"
    assert row["errors"] == 0 and row["requests"] >= 20


def test_a_scenario_sets_the_load_that_moves_its_verdict_and_a_users_count_stands():
    full = config.RunConfig(scenario="execute-raises-full", workload=config.WorkloadConfig(name="steady"))
    full = full.validate()
    assert (full.model_shape, full.queue_delay_us, full.max_batch_size, full.workload.users) == \
        ("batched-delayed", shapes.QUEUE_DELAY_US, shapes.BATCH, 8)  # enough users to fill every batch
    mine = config.RunConfig(scenario="execute-raises-full", workload=config.WorkloadConfig(name="steady", users=3))
    mine = mine.validate()
    assert mine.workload.users == 3
    from rig.workflows.matrix_setup import SCENARIO_LOAD_KEYS, check_scenarios

    class Args:
        config, requests = None, None

    loads = check_scenarios(Args, config.RunConfig(), [scenarios.get("execute-raises-full"),
                                                        scenarios.get("execute-raises")])
    assert loads["execute-raises-full"]["workload.users"] == 8
    assert loads["execute-raises"]["workload.users"] == SCENARIO_LOAD_KEYS["workload.users"] == 2


SCORER = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "features").as_numpy()
            score = x.sum(axis=1, keepdims=True).astype(np.float32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("score", score)]))
        return out
'''


@pytest.mark.slow
def test_a_users_model_with_a_queue_delay_is_held_to_the_row_nearest_its_shape(tmp_path, runtime):
    """A batched scorer written as users write it, with the dynamic batcher's queue delay, under a
    scenario whose client acts on a user's models and that has no batched-delayed row: its cycle
    records batched-delayed (its config), and `rig report` holds it to the scenario's batched row."""
    mdir = tmp_path / "repo" / "scorer"
    (mdir / "1").mkdir(parents=True)
    (mdir / "config.pbtxt").write_text(
        'name: "scorer"\nbackend: "python"\nmax_batch_size: 8\n'
        "dynamic_batching { max_queue_delay_microseconds: 200 }\n"
        'input [ { name: "features" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        'output [ { name: "score" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        "instance_group [ { count: 1 kind: KIND_CPU } ]\n")
    (mdir / "1" / "model.py").write_text(SCORER)
    results = tmp_path / "r"
    proc = rig("soak", "--scenario", "stop-in-flight", "--model-repository", str(tmp_path / "repo"), "--cycles", "1",
               "--exit-timeout", "3", "--request-timeout", "5", "--runtime", runtime.name, "--results", str(results))
    from rig.store import Store

    row = Store(str(results)).read("cycles").iloc[0]
    assert row["shape"] == "batched-delayed", proc.stdout + proc.stderr
    s = scenarios.get("stop-in-flight")
    assert "batched-delayed" not in s.shapes and "batched" in s.shapes
    held = known.expected(s, False, "batched-delayed", row["engine"], str(row["triton_version"]))
    assert held == known.expected(s, False, "batched", row["engine"], str(row["triton_version"])) is not None
    report = rig("report", str(results))
    assert report.returncode == 0 and "not known" not in report.stdout, report.stdout
    assert "/".join(held.verdicts) in report.stdout.replace(" / ", "/"), report.stdout
