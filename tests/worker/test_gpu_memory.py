"""Where tensors live (``--input-memory``), and the CuPy model's handling of a CPU input.

No GPU here. So, in two layers:
- pure functions: the placement's parsing and labels, the ledger of where outputs went, the windows'
  memory columns, the input copies read back from the model's markers;
- the CuPy model's own file (``models/cupy/1/model.py``), served by a real core (the embedded 2.51.0,
  and the built 2.67.0 and 2.71.0 where they are built here) and a real backend stub over numpy 2
  (as it is served on a GPU node, where CuPy 14 needs numpy 2), with the CuPy 14 stand-in
  (``tests/standins/cupy14``) as its ``cupy``: its CPU-input path (``is_cpu()``, read by DLPack,
  copied asynchronously, counted), its output handed to the backend by DLPack, its counts' marker
  and its finalize. The stand-in gives what CuPy 14 gives (``toDlpack()``: a DLPack 1.0 capsule), so
  the model as it was (``from_dlpack(..., y.toDlpack())``) kills the stub here as it would on a GPU,
  and a producer that answers with a versioned capsule unasked is refused with an error response,
  the stub alive. The GPU-input path needs a GPU: the kit checks it (``benchmarks/gpu_check.sh --kit``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import shutil
import textwrap
from pathlib import Path

import pytest

from rig.common.errors import RigError
from rig.contract import evidence
from rig.worker.engines import memory
from rig.worker.load.windows import memory_columns

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "cupy14"


# ---------------------------------------------------------------- pure


def test_placement_parses_and_labels():
    assert memory.Placement.parse(None).label == "cpu"
    assert memory.Placement.parse("cpu") == memory.Placement("cpu", 0)
    assert memory.Placement.parse("gpu").label == "gpu:0"
    assert memory.Placement.parse("GPU:2") == memory.Placement("gpu", 2)
    assert memory.Placement.parse("gpu:1").gpu and not memory.Placement.parse("cpu").gpu
    for bad in ("host", "cpu:1", "gpu:x", "gpu:-1"):
        with pytest.raises(RigError):
            memory.Placement.parse(bad)


def test_memory_labels():
    assert memory.memory_label(memory.MEMORY_CPU, 0) == "cpu"
    assert memory.memory_label(memory.MEMORY_CPU_PINNED, 3) == "cpu"
    assert memory.memory_label(memory.MEMORY_GPU, 1) == "gpu:1"


def test_ledger_takes_what_was_seen_since_last_take():
    ledger = memory.Ledger()
    assert ledger.take() is None
    for label in ("gpu:0", "cpu", "gpu:0"):
        ledger.record(label)
    assert ledger.take() == "cpu,gpu:0"
    assert ledger.take() is None


def test_windows_memory_columns(monkeypatch):
    monkeypatch.setattr(memory, "PLACEMENT", memory.Placement("gpu", 0))
    monkeypatch.setattr(memory, "OUTPUTS", memory.Ledger())
    memory.OUTPUTS.record("gpu:0")
    assert memory_columns({"python"}) == {"input_memory": "gpu:0", "output_memory": "gpu:0"}
    # the native lane's allocator hands out host memory only
    monkeypatch.setattr(memory, "PLACEMENT", memory.Placement())
    assert memory_columns({"native"}) == {"input_memory": "cpu", "output_memory": "cpu"}
    assert memory_columns({"python"}) == {"input_memory": "cpu", "output_memory": None}


def test_input_copies_from_this_cycles_instances_only():
    markers = [
        {"pid": 1, "instance": "m_0", "phase": "init"},
        {"pid": 1, "instance": "m_0", "phase": "memory", "input_copies": 5},
        {"pid": 2, "instance": "m_1", "phase": "init"},
        {"pid": 2, "instance": "m_1", "phase": "memory", "input_copies": 2},
        {"pid": 9, "instance": "m_0", "phase": "memory", "input_copies": 100},  # an earlier cycle's stub
    ]
    assert evidence.input_copies(markers) == 7
    assert evidence.summarize_markers(markers, None)["input_copies"] == 7
    assert evidence.input_copies(markers[:1]) is None  # a model that does not count


# ---------------------------------------------------------------- real core, real stub, CuPy 14 stand-in

CHILD = textwrap.dedent(r"""
    import json, sys, time
    from pathlib import Path
    import numpy as np
    from rig.worker.engines.base import EngineError, ServerOptions
    from rig.worker.engines.capi import CapiEngine
    from rig.contract import evidence
    from rig.contract.runtime import from_dict as runtime_from_dict

    repo, work = Path(sys.argv[1]), Path(sys.argv[2])
    rt = runtime_from_dict(json.loads(sys.argv[3]))
    engine = CapiEngine(rt.core_library)
    engine.start(ServerOptions(model_repository=str(repo), backend_directory=rt.backend_dir,
                               exit_timeout_s=4, log_file=str(work / "server.log")))
    deadline = time.monotonic() + 60
    while not (engine.is_ready() and engine.model_ready("cupy")) and time.monotonic() < deadline:
        time.sleep(0.01)
    w = (np.arange(16, dtype=np.float32).reshape(4, 4) / 16).astype(np.float32)
    got, errors = [], []
    for k in range(3):
        x = np.arange(4, dtype=np.float32) + k
        try:
            r = engine.infer("cupy", {"INPUT": x}, timeout_s=20)
        except EngineError as e:
            got.append(False)
            errors.append(str(e)[:300])
            continue
        got.append(bool(np.allclose(r.outputs()["OUTPUT"], x @ w)))
        r.release()
    t0 = time.monotonic()
    err = engine.stop()
    stop_s = time.monotonic() - t0
    engine.close()
    markers = [m for m in evidence.read_markers(work / "evidence") if m.get("phase") == "memory"]
    mine = {(m["pid"], m["instance"]) for m in markers}
    print("RESULT " + json.dumps({"outputs_ok": got, "errors": errors, "stop_error": err, "stop_s": stop_s,
                                 "markers": len(markers), "input_copies": evidence.input_copies(markers, mine),
                                 "in_place": sum(m["inputs_in_place"] for m in markers)}))
""")


def _runtime(which: str):
    from rig.parent import runtime

    try:
        rt = runtime.resolve(None if which == "embedded" else which, auto_install=False)
    except RigError as e:
        print(f"skipped: {e}")
        pytest.skip(f"Triton runtime {which} is not here: {e}")
    import numpy

    if tuple(int(p) for p in numpy.__version__.split(".")[:2]) < (2, 1):
        pytest.skip("the CuPy 14 stand-in makes its capsules with numpy 2.1+ (this environment has numpy "
                    f"{numpy.__version__})")
    return rt.__class__(**{**rt.to_dict(), "stub_site": None})  # as prepare() serves the cupy model


def _serve(tmp_path, rt, model_text: str | None = None, env_extra: dict | None = None) -> tuple[dict, list[dict]]:
    """The cupy model (its own file, or ``model_text``) behind a real core and stub, the stand-in as its
    CuPy; three requests, a stop. The child's result and the stand-in's log of what crossed it."""
    from rig.parent import repository

    repo = tmp_path / "repo"
    repo.mkdir()
    mdir = repository.render(repository.ModelSpec(kind="cupy"), repo)
    config = mdir / "config.pbtxt"
    text = config.read_text()
    assert "kind: KIND_GPU gpus: [ 0 ]" in text
    config.write_text(text.replace("kind: KIND_GPU gpus: [ 0 ]", "kind: KIND_CPU"))  # no GPU here
    if model_text is not None:
        (mdir / "1" / "model.py").write_text(model_text)
    shutil.copytree(STANDIN / "cupy", mdir / "1" / "cupy")
    work = tmp_path / "work"
    (work / "evidence").mkdir(parents=True)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / "standin.jsonl"
    env = {**rt.worker_env(), "RIG_EVIDENCE_DIR": str(work / "evidence"), "CUPY_STANDIN_LOG": str(log),
           **(env_extra or {})}
    proc = subprocess.run([sys.executable, str(script), str(repo), str(work), json.dumps(rt.to_dict())],
                          env=env, capture_output=True, text=True, timeout=180, start_new_session=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    server_log = (work / "server.log").read_text()[-3000:] if (work / "server.log").exists() else ""
    assert lines, f"child failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}\n{server_log}"
    events = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    result = json.loads(lines[0][len("RESULT "):])
    print(result)
    return result, events


RUNTIMES = ["embedded", "2.67.0", "2.71.0"]


@pytest.mark.slow
@pytest.mark.parametrize("which", RUNTIMES)
def test_cupy_model_hands_the_backend_only_unversioned_capsules_in_a_real_stub(tmp_path, which):
    rt = _runtime(which)
    result, events = _serve(tmp_path, rt)
    assert result["outputs_ok"] == [True, True, True]  # x @ W from a CPU input, sent back by DLPack
    assert result["stop_error"] is None
    assert result["input_copies"] == 3                 # each CPU input copied once, counted
    assert result["in_place"] == 0 and result["markers"] == 1  # one instance; written at its finalize
    exports = [e for e in events if e["event"] == "export"]
    # the backend asked for each output itself (no max_version) and got the capsule it reads
    assert len(exports) == 3 and {(e["via"], e["capsule"], e["max_version"]) for e in exports} == {
        ("__dlpack__", "dltensor", None)}
    assert sum(e["event"] == "copy" for e in events) == 3  # one asynchronous copy per CPU input


@pytest.mark.slow
@pytest.mark.parametrize("which", RUNTIMES)
def test_the_model_as_it_was_kills_the_stub_through_the_cupy14_standin(tmp_path, which):
    """The negative control: ``from_dlpack("OUTPUT", y.toDlpack())``, CuPy 14's versioned capsule,
    misread by the backend (PbTensor::FromDLPackCapsule casts it to DLManagedTensor): what it reads
    at the wrong offsets decides how it fails. Here (embedded 2.51.0) each request fails with
    "cannot create std::vector larger than max_size()" (a shape read from the wrong place); where
    the bytes read point elsewhere the stub dies. Either way no request gets its answer."""
    rt = _runtime(which)
    model = (Path(__file__).resolve().parents[2] / "models" / "cupy" / "1" / "model.py").read_text()
    old = model.replace('pb_utils.Tensor.from_dlpack("OUTPUT", _Export(y))', 'pb_utils.Tensor.from_dlpack("OUTPUT", y.toDlpack())')
    assert old != model
    result, events = _serve(tmp_path, rt, model_text=old)
    assert {e["capsule"] for e in events if e["event"] == "export"} == {"dltensor_versioned"}
    assert True not in result["outputs_ok"]  # no request got its answer
    assert result["errors"] or result["stop_error"] is not None


@pytest.mark.slow
def test_a_producer_that_answers_versioned_unasked_gets_an_error_response_not_a_dead_stub(tmp_path):
    rt = _runtime("embedded")
    result, events = _serve(tmp_path, rt, env_extra={"CUPY_STANDIN_MISBEHAVE": "versioned"})
    assert result["outputs_ok"] == [False, False, False]
    assert all("dltensor" in e for e in result["errors"]), result["errors"]
    assert result["stop_error"] is None and result["markers"] == 1  # the stub lived to finalize
