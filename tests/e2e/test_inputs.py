"""Real inputs (``--input-data zero|random|FILE.json``, ``--shape NAME:d1,d2``): what a model
receives is exactly what the file says, entry after entry, on every path (the sequential loop,
Locust's lanes, perf_analyzer beside the rig); bad files and shapes are refused in one line
before anything runs. These end-to-end tests (``slow``) read what a recording model wrote down;
the parser and the checks are tested as functions in test_inputs_parse.py (fast tier)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import cycles, rig
from rig.store import Store

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
    """A repository of one recording model (written the way tests/e2e/test_hostile.py writes its
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
    from rig.parent import perf_analyzer as pa

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
    # perf_analyzer's requests reached the model too: it saw every request either tool counted
    w = Store(tmp_path / "r").read("windows")
    by_tool = w.groupby("tool").requests.sum()
    assert by_tool["perf_analyzer"] > 0 and by_tool["rig"] > 0, by_tool
    assert len(records) >= by_tool["perf_analyzer"] + by_tool["rig"], (len(records), by_tool)
    for want in TEXT_SEEN:
        assert records.count(want) > len(records) / 4, "both entries, in turn"
