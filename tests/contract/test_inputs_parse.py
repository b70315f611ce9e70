"""Real inputs, the parser and the checks as functions (fast tier): ``--input-data FILE.json``
in every form perf_analyzer reads, ``--shape NAME:d1,d2``, a file's entries held to a model's
metadata (one line naming the input where one does not fit), generated data, perf_analyzer's
file, and the options in a config file. What a model receives end to end is in test_inputs.py."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from rig.contract import inputs
from rig.contract.engines import ModelMetadata, TensorSpec
from rig.common.errors import RigError
from test_inputs import _b64, _floats, _wire


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
    from rig.contract import perf_inputs

    written = perf_inputs.perf_analyzer_file(meta, entries)
    assert written["data"][0]["X"]["shape"] == [2], "shapes without the batch dimension"
    again = inputs.entries_for(meta, "FILE", {}, _file(tmp_path, written))
    for x, y in zip(entries, again):
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) and x[k].dtype == y[k].dtype for k in x)


def test_a_config_pbtxt_tells_the_inputs_the_server_will_report(tmp_path):
    from rig.parent.repository import config_inputs

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
    from rig.worker.outputs import merge_checks

    one = {"name": "OUT", "datatype": "FP32", "shape": (4,), "size": 16, "bytes": b"x" * 16}
    assert merge_checks([one]) is one, "one entry: its exact check"
    other = {**one, "bytes": b"y" * 16}
    assert merge_checks([one, other]) == {"name": "OUT", "datatype": "FP32", "shape": (4,), "size": 16, "bytes": None}
    assert merge_checks([one, {**other, "size": 8, "shape": (2,)}])["size"] is None
    assert merge_checks([one, {**other, "name": "OTHER"}]) is None


def test_input_data_and_shapes_in_the_config_file(tmp_path, monkeypatch):
    from rig.parent import config

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
