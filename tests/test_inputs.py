"""Real inputs (``--input-data zero|random|FILE.json``, ``--shape NAME:d1,d2``): what a model
receives is exactly what the file says, entry after entry, on every path (the sequential loop,
Locust's lanes, perf_analyzer beside the rig); bad files and shapes are refused in one line
before anything runs. The end-to-end tests (``slow``) read what a recording model wrote down;
the parser and the checks are tested as functions (fast tier)."""

from __future__ import annotations

import base64
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helpers import cycles, rig
from rig import inputs
from rig.engines.base import ModelMetadata, TensorSpec
from rig.errors import RigError

# A model as a team writes one to see what its clients send: every request's inputs (name,
# dtype, shape, raw bytes) appended as one JSON line to the file its config names.
RECORDER = '''
import base64
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.path = config["parameters"]["record_to"]["string_value"]
        self.names = [i["name"] for i in config["input"]]

    def execute(self, requests):
        responses = []
        with open(self.path, "a") as f:
            for request in requests:
                seen = []
                for name in self.names:
                    arr = pb_utils.get_input_tensor_by_name(request, name).as_numpy()
                    if arr.dtype == np.object_:
                        raw = [base64.b64encode(x).decode() for x in arr.reshape(-1)]
                    else:
                        raw = base64.b64encode(arr.tobytes()).decode()
                    seen.append({"name": name, "dtype": str(arr.dtype), "shape": list(arr.shape), "raw": raw})
                f.write(json.dumps(seen) + "\\n")
                out = pb_utils.Tensor("OUT", np.array([len(seen)], dtype=np.float32))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
'''

# The same model without a config.pbtxt: it declares its inputs itself, at load time, so only
# the server's metadata can tell what they are (the worker's check, not the parent's).
SELF_DECLARED = RECORDER.replace('''class TritonPythonModel:
''', '''class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [4]})
        config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]})
        config.set_max_batch_size(0)
        return config

''').replace('''        self.path = config["parameters"]["record_to"]["string_value"]''',
             '''        self.path = __file__.rsplit("/", 4)[0] + "/seen.jsonl"  # beside the repository''')

NUMBERS_AND_TEXT = ('input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] },\n'
                    '        { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]')
NUMBERS_ONLY = ('input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] },\n'
                '        { name: "N" data_type: TYPE_INT32 dims: [ -1 ] } ]')
VARIABLE = 'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]'


def _recording_model(tmp_path: Path, inputs_pbtxt: str, name: str = "rec") -> Path:
    """A repository of one recording model (written the way tests/test_hostile.py writes its
    models); returns the file it records to."""
    seen = tmp_path / "seen.jsonl"
    d = tmp_path / "models" / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n{inputs_pbtxt}\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        f'parameters [ {{ key: "record_to" value: {{ string_value: "{seen}" }} }} ]\n')
    (d / "1" / "model.py").write_text(RECORDER)
    return seen


def _wire(strings: list[str]) -> bytes:
    """Triton's BYTES wire form, as a client that writes base64 itself would build it."""
    return b"".join(len(s.encode()).to_bytes(4, "little") + s.encode() for s in strings)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _floats(values) -> str:
    return _b64(np.array(values, dtype="<f4").tobytes())


def _records(seen: Path) -> list:
    return [json.loads(line) for line in seen.read_text().splitlines()]


# Two entries: numbers and strings as lists (TEXT's shape from --shape TEXT:2), then the same
# inputs as base64 with explicit shapes (perf_analyzer's {"content": {"b64"}} spelling for TEXT).
TEXT_FILE = {"data": [
    {"X": [1.5, -2, 3.25, 4e6], "TEXT": ["hello", "wörld"]},
    {"X": {"b64": _floats([0.5, 1, 2, 8]), "shape": [4]},
     "TEXT": {"content": {"b64": _b64(_wire(["hi", ""]))}, "shape": [2]}},
]}
TEXT_SEEN = [
    [{"name": "X", "dtype": "float32", "shape": [4], "raw": _floats([1.5, -2, 3.25, 4e6])},
     {"name": "TEXT", "dtype": "object", "shape": [2], "raw": [_b64("hello".encode()), _b64("wörld".encode())]}],
    [{"name": "X", "dtype": "float32", "shape": [4], "raw": _floats([0.5, 1, 2, 8])},
     {"name": "TEXT", "dtype": "object", "shape": [2], "raw": [_b64(b"hi"), ""]}],
]
NUMBERS_FILE = {"data": [
    {"X": {"content": [[1, 2], [3, 4]]}, "N": {"content": [7, -8, 9], "shape": [3]}},
    {"X": [0, 0, 0, 1e-3], "N": {"b64": _b64(np.array([2**31 - 1], "<i4").tobytes()), "shape": [1]}},
    {"X": [9, 9, 9, 9], "N": [5, 5]},
]}
NUMBERS_SEEN = [
    [{"name": "X", "dtype": "float32", "shape": [4], "raw": _floats([1, 2, 3, 4])},
     {"name": "N", "dtype": "int32", "shape": [3], "raw": _b64(np.array([7, -8, 9], "<i4").tobytes())}],
    [{"name": "X", "dtype": "float32", "shape": [4], "raw": _floats([0, 0, 0, 1e-3])},
     {"name": "N", "dtype": "int32", "shape": [1], "raw": _b64(np.array([2**31 - 1], "<i4").tobytes())}],
    [{"name": "X", "dtype": "float32", "shape": [4], "raw": _floats([9, 9, 9, 9])},
     {"name": "N", "dtype": "int32", "shape": [2], "raw": _b64(np.array([5, 5], "<i4").tobytes())}],
]


def _cycled(records: list, expected: list) -> None:
    """Record k is entry k mod N: the reference requests (one per entry) first, then the load's."""
    assert len(records) >= 2 * len(expected), len(records)
    for k, got in enumerate(records):
        assert got == expected[k % len(expected)], f"request {k}: got {got}, want {expected[k % len(expected)]}"


# ---------------------------------------------------------------- end to end

@pytest.mark.slow
def test_a_file_reaches_the_model_byte_for_byte_cycled_under_locust(tmp_path, runtime):
    seen = _recording_model(tmp_path, NUMBERS_AND_TEXT)
    data = tmp_path / "data.json"
    data.write_text(json.dumps(TEXT_FILE))
    res = tmp_path / "r"
    p = rig("soak", "--engine", "capi", "--model-repository", str(tmp_path / "models"), "--input-data", str(data),
            "--shape", "TEXT:2", "--workload", "steady", "--users", "1", "--workload-seconds", "1",
            "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    row = cycles(res).iloc[0]
    assert (row.outcome, row.load_outcome) == ("clean", "ok"), row.detail
    records = _records(seen)
    _cycled(records, TEXT_SEEN)
    assert len(records) == row.requests + 2, "the model got requests beyond the reference two and the load"
    assert "2 input entries: responses checked against the metadata, not exact bytes" in row.detail


@pytest.mark.slow
def test_the_native_lane_sends_the_entries_in_turn(tmp_path, runtime):
    seen = _recording_model(tmp_path, NUMBERS_ONLY)
    data = tmp_path / "data.json"
    data.write_text(json.dumps(NUMBERS_FILE))
    res = tmp_path / "r"
    p = rig("soak", "--engine", "capi", "--model-repository", str(tmp_path / "models"), "--input-data", str(data),
            "--shape", "N:2", "--workload", "steady", "--users", "1", "--workload-seconds", "1", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    row = cycles(res).iloc[0]
    assert (row.outcome, row.load_outcome, row.bad_outputs) == ("clean", "ok", 0), row.detail
    assert row.lane == "native", "numbers only: the capi engine's native lane carries them"
    records = _records(seen)
    _cycled(records, NUMBERS_SEEN)
    assert len(records) == row.requests + 3


@pytest.mark.slow
def test_the_sequential_path_cycles_the_entries(tmp_path, runtime):
    seen = _recording_model(tmp_path, NUMBERS_AND_TEXT)
    data = tmp_path / "data.json"
    data.write_text(json.dumps(TEXT_FILE))
    res = tmp_path / "r"
    p = rig("cycle", "--engine", "capi", "--model-repository", str(tmp_path / "models"), "--input-data", str(data),
            "--shape", "TEXT:2", "--requests", "6", "--retain", "last-response", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    row = cycles(res).iloc[0]
    assert row.load_outcome == "ok" and row.requests == 6, row.detail
    records = _records(seen)
    assert len(records) == 2 + 6  # the reference request of each entry, then the six
    _cycled(records, TEXT_SEEN)


@pytest.mark.slow
def test_shape_sets_a_variable_dimension_of_generated_data(tmp_path, runtime):
    seen = _recording_model(tmp_path, VARIABLE)
    for source, check in (("random", lambda raw: True), ("zero", lambda raw: not any(base64.b64decode(raw)))):
        seen.unlink(missing_ok=True)
        p = rig("cycle", "--engine", "capi", "--model-repository", str(tmp_path / "models"), "--shape", "X:5",
                "--input-data", source, "--requests", "2", "--results", str(tmp_path / source))
        assert p.returncode == 0, p.stdout + p.stderr
        records = _records(seen)
        assert len(records) == 3
        for (x,) in records:
            assert x["shape"] == [5] and len(base64.b64decode(x["raw"])) == 5 * 4 and check(x["raw"]), x


@pytest.mark.slow
def test_the_template_holds_each_entry_to_its_own_reference_answer(tmp_path, runtime):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": [{"INPUT": [1, 0, 0, 0]}, {"INPUT": [0, 1, 0, 0]}]}))
    res = tmp_path / "r"
    p = rig("cycle", "--engine", "capi", "--input-data", str(data), "--requests", "4", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    row = cycles(res).iloc[0]
    assert row.outputs_ok and row.bad_outputs == 0 and row.load_outcome == "ok", row.detail
    assert "2 input entries" in row.detail
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"data": [{"INPUT": [1, 2, 3, 4]}]}))
    p = rig("cycle", "--engine", "capi", "--input-data", str(one), "--requests", "4", "--results", str(tmp_path / "r1"))
    row = cycles(tmp_path / "r1").iloc[0]
    assert row.outputs_ok and "input entries" not in str(row.detail), row.detail  # the exact check


BAD = [  # (file contents or None, extra options, what the one line must say)
    ({"data": [{"X": [1, 2, 3, 4], "TEXT": {"content": ["a"], "shape": [1]}, "NOPE": [1]}]}, (), "'NOPE'"),
    ({"data": [{"X": ["a", "b", "c", "d"], "TEXT": {"content": ["a"], "shape": [1]}}]}, (), "'X' of model rec is FP32"),
    ({"data": [{"X": [1, 2, 3], "TEXT": {"content": ["a"], "shape": [1]}}]}, (), "'X' of model rec: 3 element(s)"),
    ({"data": [{"X": [1, 2, 3, 4], "TEXT": ["a"]}]}, (), "'TEXT' of model rec has variable dimensions"),
    ({"data": [{"X": [1, 2, 3, 4], "TEXT": {"content": [1], "shape": [1]}}]}, (), "'TEXT' of model rec is BYTES"),
    ('{"data": [{"X": [1, 2, 3, 4]', (), "is not JSON"),
    ({"entries": []}, (), 'no "data" list'),
    (None, ("--shape", "NOPE:3"), "no input 'NOPE'"),
    (None, ("--shape", "X:5"), "--shape X:5 contradicts input 'X'"),
]


@pytest.mark.slow
@pytest.mark.parametrize("content, extra, says", BAD, ids=["unknown-input", "wrong-datatype", "wrong-count",
                                                          "missing-shape", "numbers-for-bytes", "malformed-json",
                                                          "no-data", "shape-unknown", "shape-contradicts"])
def test_bad_input_is_one_line_exit_2_and_nothing_runs(tmp_path, runtime, content, extra, says):
    seen = _recording_model(tmp_path, NUMBERS_AND_TEXT)
    args = []
    if content is not None:
        data = tmp_path / "data.json"
        data.write_text(content if isinstance(content, str) else json.dumps(content))
        args = ["--input-data", str(data)]
    res = tmp_path / "r"
    p = rig("cycle", "--engine", "capi", "--model-repository", str(tmp_path / "models"), *args, *extra,
            "--results", str(res))
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and says in err[0], p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert not seen.exists(), "the model received a request"
    assert not res.exists(), "a refused run left results"


@pytest.mark.slow
def test_a_model_that_declares_its_inputs_at_load_is_checked_by_the_worker(tmp_path, runtime):
    """No config.pbtxt: the parent cannot know the inputs, the worker holds the file to the
    server's metadata before its first request: a good file reaches the model, a bad one is the
    same one-line refusal, and no cycle is stored."""
    d = tmp_path / "models" / "auto"
    (d / "1").mkdir(parents=True)
    (d / "1" / "model.py").write_text(SELF_DECLARED)
    seen = tmp_path / "seen.jsonl"
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"data": [{"X": [1, 2, 3, 4]}, {"X": [5, 6, 7, 8]}]}))
    p = rig("cycle", "--engine", "capi", "--model-repository", str(tmp_path / "models"), "--input-data", str(good),
            "--requests", "2", "--results", str(tmp_path / "ok"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert [r[0]["raw"] for r in _records(seen)] == [_floats([1, 2, 3, 4]), _floats([5, 6, 7, 8])] * 2
    seen.unlink()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"data": [{"X": [1, 2, 3, 4], "Y": [1]}]}))
    res = tmp_path / "r"
    p = rig("cycle", "--engine", "capi", "--model-repository", str(tmp_path / "models"), "--input-data", str(bad),
            "--results", str(res))
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "input 'Y' is not an input of model(s) auto" in err[0], p.stderr
    assert not seen.exists(), "the model received a request"
    assert not (res / "cycles").exists(), "a refused run stored a cycle"


@pytest.mark.slow
def test_perf_analyzer_gets_the_same_entries(tmp_path, runtime):
    """``rig bench --compare perf-analyzer``: perf_analyzer sends the very bytes the rig sends
    (a file of its own format, written from the rig's checked entries): every request the model
    saw, from either tool, is one of the file's entries."""
    from rig import perf_analyzer as pa

    try:
        pa.ensure_perf_analyzer(log=print)
    except Exception as e:  # noqa: BLE001 - no perf_analyzer on this machine (offline, no wheel)
        pytest.skip(f"perf_analyzer unavailable: {e}")
    seen = _recording_model(tmp_path, NUMBERS_AND_TEXT)
    data = tmp_path / "data.json"
    data.write_text(json.dumps(TEXT_FILE))
    p = rig("bench", "--engine", "capi", "--model-repository", str(tmp_path / "models"), "--input-data", str(data),
            "--shape", "TEXT:2", "--compare", "perf-analyzer", "--concurrency", "1", "--windows", "1",
            "--window-seconds", "0.5", "--repeats", "1", "--results", str(tmp_path / "r"), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "perf_analyzer failed" not in p.stdout, p.stdout
    records = _records(seen)
    assert all(r in TEXT_SEEN for r in records), next(r for r in records if r not in TEXT_SEEN)
    assert len(records) > 100, "perf_analyzer's requests reached the model too"
    for want in TEXT_SEEN:
        assert records.count(want) > len(records) / 4, "both entries, in turn"


# ---------------------------------------------------------------- the parser and the checks

def _meta(*specs, batch: int = 0) -> ModelMetadata:
    return ModelMetadata("m", (), "", tuple(TensorSpec(*s) for s in specs), (), batch)


def _file(tmp_path, doc) -> list:
    path = tmp_path / "d.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return inputs.read_data(path)


def test_shapes_parse_as_perf_analyzer_writes_them():
    assert inputs.parse_shapes(["INPUT0:5", "X:2,3"]) == {"INPUT0": [5], "X": [2, 3]}
    assert inputs.parse_shapes("INPUT0:5,X:2,3") == {"INPUT0": [5], "X": [2, 3]}
    assert inputs.parse_shapes("A:1 B:0") == {"A": [1], "B": [0]}
    assert inputs.format_shapes(inputs.parse_shapes("INPUT0:5,X:2,3")) == "INPUT0:5 X:2,3"
    for bad, says in (("X:a", "whole numbers"), ("X:-1", "whole numbers"), ("5", "NAME:d1,d2"),
                      ("X:", "give its dimensions"), ("X:1 X:2", "twice")):
        with pytest.raises(RigError, match=says):
            inputs.parse_shapes(bad)


def test_a_file_of_every_form_becomes_the_same_arrays(tmp_path):
    meta = _meta(("X", "FP32", (2, 2)), ("T", "BYTES", (-1,)), ("B", "BOOL", (2,)), ("U", "UINT8", (2,)))
    data = _file(tmp_path, {"data": [
        {"X": [[1, 2], [3, 4]], "T": {"content": ["a", "bc"], "shape": [2]}, "B": [True, 0], "U": [0, 255]},
        {"X": {"b64": _floats([1, 2, 3, 4])}, "T": {"content": {"b64": _b64(_wire(["a", "bc"]))}, "shape": [2]},
         "B": {"b64": _b64(b"\x01\x00")}, "U": {"content": {"b64": _b64(b"\x00\xff")}, "shape": [2]}},
    ]})
    a, b = inputs.entries_for(meta, "FILE", {}, data)
    for entry in (a, b):
        assert entry["X"].dtype == np.float32 and entry["X"].tolist() == [[1, 2], [3, 4]]
        assert entry["T"].dtype == object and entry["T"].tolist() == [b"a", b"bc"]
        assert entry["B"].tolist() == [True, False] and entry["U"].tolist() == [0, 255]


def test_entries_of_a_batching_model_get_the_batch_dimension():
    meta = _meta(("X", "INT64", (-1, -1, 3)), batch=8)  # metadata: the batch dimension first
    (entry,) = inputs.entries_for(meta, "zero", {"X": [2, 3]})
    assert entry["X"].shape == (1, 2, 3) and not entry["X"].any()
    (entry,) = inputs.entries_for(meta, "random")
    assert entry["X"].shape == (1, 1, 3)
    with pytest.raises(RigError, match="batch dimension is left out"):
        inputs.check_shapes({"m": meta}, {"X": [1, 2, 3]})


@pytest.mark.parametrize("doc, says", [
    ("[1, 2]", 'no "data" list'),
    ('{"data": []}', '"data" is empty'),
    ('{"data": [[{"X": [1]}]]}', "streams of a sequence model"),
    ('{"data": [{"X": [1]}], "validation_data": []}', '"validation_data" is not checked'),
    ('{"data": [{"X": {"content": [1], "shpae": [1]}}]}', "unknown key(s) 'shpae'"),
    ('{"data": [{"X": {"b64": "not base64!"}}]}', "not valid base64"),
    ('{"data": [{"X": {"content": [1], "shape": [-1]}}]}', "whole numbers >= 0"),
    ('{"data": [{"X": "1 2 3"}]}', "give a list of values"),
    ('{"data": [{"X": [{"a": 1}]}]}', "values are numbers"),
])
def test_a_malformed_file_is_refused_before_its_model_is_known(tmp_path, doc, says):
    with pytest.raises(RigError) as e:
        _file(tmp_path, doc)
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)


@pytest.mark.parametrize("entry, shapes, says", [
    ({"X": [1, 2, 3, 4], "Q": [1]}, {}, "input 'Q' is not an input of model(s) m"),
    ({"N": [1]}, {}, "gives no data for input 'X'"),
    ({"X": [1, 2, 3], "N": [1]}, {}, "input 'X' of model m: 3 element(s) given"),
    ({"X": ["1", "2", "3", "4"], "N": [1]}, {}, "'X' of model m is FP32, which takes numbers"),
    ({"X": [1, 2, 3, 4], "N": [1.5]}, {"N": [1]}, "'N' of model m is INT32, which takes whole numbers"),
    ({"X": [1, 2, 3, 4], "N": [2**31]}, {"N": [1]}, "INT32, which holds"),
    ({"X": [1, 2, 3, 4], "N": [True]}, {"N": [1]}, "INT32, which takes numbers"),
    ({"X": [1, 2, 3, 4], "N": {"content": [1, 2], "shape": [2, 1]}}, {}, "shape [2, 1] does not fit"),
    ({"X": {"b64": _floats([1, 2, 3])}, "N": [1]}, {}, "b64 holds 12 bytes"),
    ({"X": [1, 2, 3, 4], "N": [1, 2]}, {}, "'N' of model m has variable dimensions [-1] and no shape"),
])
def test_an_entry_that_does_not_fit_the_model_names_its_input(tmp_path, entry, shapes, says):
    meta = _meta(("X", "FP32", (4,)), ("N", "INT32", (-1,)))
    data = _file(tmp_path, {"data": [{"X": [0, 0, 0, 0], "N": {"content": [1], "shape": [1]}}, entry]})
    with pytest.raises(RigError) as e:
        inputs.build({"m": meta}, "FILE", shapes, data)
    assert says in str(e.value) and "entry 2" in str(e.value), str(e.value)


def test_shape_fills_entries_without_one_and_an_entry_overrides_it(tmp_path):
    meta = _meta(("N", "INT32", (-1, 2)))
    data = _file(tmp_path, {"data": [{"N": [1, 2, 3, 4]}, {"N": {"content": [1, 2], "shape": [1, 2]}}]})
    a, b = inputs.build({"m": meta}, "FILE", {"N": [2, 2]}, data)["m"]
    assert a["N"].shape == (2, 2) and b["N"].shape == (1, 2)
    with pytest.raises(RigError, match="contradicts input 'N'"):
        inputs.build({"m": meta}, "FILE", {"N": [2, 3]}, data)


def test_one_file_serves_models_with_different_inputs_and_optional_inputs_may_be_left_out(tmp_path):
    a, b = _meta(("X", "FP32", (1,))), _meta(("Y", "FP32", (1,)), ("Z", "FP32", (1,)))
    data = _file(tmp_path, {"data": [{"X": [1], "Y": [2]}]})
    with pytest.raises(RigError, match="gives no data for input 'Z' of model b"):
        inputs.build({"a": a, "b": b}, "FILE", {}, data)
    got = inputs.build({"a": a, "b": b}, "FILE", {}, data, optional={"b": ["Z"]})
    assert list(got["a"][0]) == ["X"] and list(got["b"][0]) == ["Y"]


def test_generated_data_zero_and_random():
    meta = _meta(("X", "FP32", (3,)), ("T", "BYTES", (-1,)), ("I", "INT8", (2,)))
    (zero,) = inputs.entries_for(meta, "zero", {"T": [2]})
    assert not zero["X"].any() and zero["T"].tolist() == [b"", b""] and not zero["I"].any()
    (rand,) = inputs.entries_for(meta, "random")
    assert rand["T"].shape == (1,) and rand["X"].dtype == np.float32
    assert np.array_equal(inputs.inputs_for(meta)["X"], rand["X"]), "inputs_for: the same random entry"


def test_perf_analyzers_file_reads_back_as_the_same_entries(tmp_path):
    meta = ModelMetadata("m", (), "", (TensorSpec("X", "FP16", (-1, 2)), TensorSpec("T", "BYTES", (-1, -1))), (), 4)
    data = _file(tmp_path, {"data": [{"X": [0.5, 1], "T": {"content": ["x", "yz"], "shape": [2]}},
                                     {"X": [2, 4], "T": {"content": ["ü"], "shape": [1]}}]})
    entries = inputs.entries_for(meta, "FILE", {}, data)
    written = inputs.perf_analyzer_file(meta, entries)
    assert written["data"][0]["X"]["shape"] == [2], "shapes without the batch dimension"
    again = inputs.entries_for(meta, "FILE", {}, _file(tmp_path, written))
    for x, y in zip(entries, again):
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) and x[k].dtype == y[k].dtype for k in x)


def test_a_config_pbtxt_tells_the_inputs_the_server_will_report(tmp_path):
    from rig.repository import config_inputs

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.pbtxt").write_text(textwrap.dedent('''
        name: "m"  # a comment
        backend: "python"
        max_batch_size: 8
        input [
          { name: "IMAGE" data_type: TYPE_UINT8 dims: [ 3, -1, -1 ] },
          { name: "PROMPT", data_type: TYPE_STRING, dims: [ 1 ], optional: true }
        ]
        input { name: 'SEED' data_type: TYPE_INT64 dims: 1 reshape: { shape: [ ] } }
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
        instance_group [ { count: 2, kind: KIND_CPU } ]
        dynamic_batching { max_queue_delay_microseconds: 100 }
        parameters: { key: "k" value: < string_value: "v" > }
    '''))
    got = config_inputs(d)
    assert got.meta.max_batch_size == 8 and got.optional == {"PROMPT"}
    assert [(s.name, s.datatype, s.shape) for s in got.meta.inputs] == [
        ("IMAGE", "UINT8", (-1, 3, -1, -1)), ("PROMPT", "BYTES", (-1, 1)), ("SEED", "INT64", (-1, 1))]
    (d / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')  # inputs filled in at load time
    assert config_inputs(d) is None
    (d / "config.pbtxt").write_text('name: "m" input [ { name: "X" ')  # not the format: the worker checks
    assert config_inputs(d) is None


def test_several_entries_hold_responses_to_what_their_answers_share():
    from rig.outputs import merge_checks

    one = {"name": "OUT", "datatype": "FP32", "shape": (4,), "size": 16, "bytes": b"x" * 16}
    assert merge_checks([one]) is one, "one entry: its exact check"
    other = {**one, "bytes": b"y" * 16}
    assert merge_checks([one, other]) == {"name": "OUT", "datatype": "FP32", "shape": (4,), "size": 16, "bytes": None}
    assert merge_checks([one, {**other, "size": 8, "shape": (2,)}])["size"] is None
    assert merge_checks([one, {**other, "name": "OTHER"}]) is None


def test_input_data_and_shapes_in_the_config_file(tmp_path, monkeypatch):
    from rig import config

    (tmp_path / "d.json").write_text('{"data": [{"X": [1]}]}')
    monkeypatch.chdir(tmp_path)
    toml = tmp_path / "run.toml"
    toml.write_text('input_data = "d.json"\nshapes = ["X:1", "Y:2,3"]\n')
    cfg = config.load(str(toml))
    assert cfg.input_data == str(tmp_path / "d.json"), "a relative file is the user's folder's"
    assert cfg.shapes == "X:1 Y:2,3"
    again = config.from_toml_text(cfg.to_toml())
    assert (again.input_data, again.shapes) == (cfg.input_data, cfg.shapes), "stored and read back alike"
    toml.write_text('input_data = "nope.json"\n')
    with pytest.raises(RigError, match="nope.json: no such file"):
        config.load(str(toml))
    toml.write_text('shapes = 5\n')
    with pytest.raises(RigError, match="shapes must be"):
        config.load(str(toml))
