"""rig.repro.models: the models of a reproducer's folder are the rig's, each with its own finalize
evidence appended, which records initialize and finalize outside Triton too."""

from __future__ import annotations

import ast
import json
import re
import sys
import types

import pytest
from test_repro_cell import config_of

from rig.repro import cell as repro_cell
from rig.repro import evidence as repro_evidence
from rig.repro import models as repro_models


def test_the_models_are_the_rigs_with_their_own_evidence(tmp_path):
    from rig.parent.repository import templates_dir

    cfg = config_of(shape="batched")
    assert (cfg.retain, cfg.max_batch_size, cfg.dynamic_batching, cfg.requests_in_flight) == (
        "last-response", 8, True, 4)
    s = repro_cell.scenario_of("retained-response")
    assert repro_models.write_models(s, cfg, False, tmp_path / "models") == ["numpy"]
    config = (tmp_path / "models" / "numpy" / "config.pbtxt").read_text()
    assert "max_batch_size: 8" in config and "dynamic_batching" in config
    model = (tmp_path / "models" / "numpy" / "1" / "model.py").read_text()
    template = (templates_dir() / "numpy" / "1" / "model.py").read_text()
    assert model.startswith(template.rstrip("\n")) and model.endswith(repro_models.EVIDENCE_BLOCK)
    ast.parse(model)


def test_the_evidence_block_records_initialize_and_finalize(tmp_path, monkeypatch):
    """The template's model.py with the block, run outside Triton (a stand-in pb_utils): one JSON line
    per initialize and finalize, the error finalize raised on its end line."""
    cfg = config_of(scenario="finalize-raises")
    repro_models.write_models(repro_cell.scenario_of("finalize-raises"), cfg, False, tmp_path / "models")
    fake = types.ModuleType("triton_python_backend_utils")
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake)
    evidence = tmp_path / "evidence.jsonl"
    monkeypatch.setenv("REPRO_EVIDENCE", str(evidence))
    ns: dict = {"__name__": "model"}
    exec(compile((tmp_path / "models" / "numpy" / "1" / "model.py").read_text(), "model.py", "exec"), ns)
    model = ns["TritonPythonModel"]()
    config = (tmp_path / "models" / "numpy" / "config.pbtxt").read_text()
    params = dict(re.findall(r'key: "(\w+)" value: \{ string_value: "([^"]*)" \}', config))
    model.initialize({"model_config": json.dumps({"parameters": {k: {"string_value": v} for k, v in params.items()}}),
                      "model_instance_name": "numpy_0_0"})
    with pytest.raises(RuntimeError):
        model.finalize()
    marks = repro_evidence.read_evidence(evidence)
    assert [m["phase"] for m in marks] == ["init", "finalize_start", "finalize_end"]
    assert {m["instance"] for m in marks} == {"numpy_0_0"} and "finalize raises" in marks[-1]["error"]
    assert repro_evidence.finalize_summary(marks, marks[-1]["t_mono"] + 1)["errors"] == 1
