"""Where tensors live (``--input-memory``), and the CuPy model's handling of a CPU input.

No GPU here. So, in two layers:
- pure functions: the placement's parsing and labels, the ledger of where outputs went, the windows'
  memory columns, the input copies read back from the model's markers;
- the CuPy model's own file (``models/cupy/1/model.py``), served by a real embedded core and a real
  backend stub over numpy 2 (as it is served on a GPU node, where CuPy 14 needs numpy 2), with numpy
  standing in for CuPy, in a ``cupy`` folder beside the model: that runs, for real, its CPU-input
  path (``is_cpu()``, read by DLPack, copied, counted), its output by DLPack, its counts' marker and
  its finalize. The GPU-input path and the engines' device buffers need a GPU: the kit checks them
  (``benchmarks/gpu_check.sh --kit``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rig.common.errors import RigError
from rig.contract import evidence
from rig.worker.engines import memory
from rig.worker.load.windows import memory_columns


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


# ---------------------------------------------------------------- real core, real stub

# numpy standing in for the part of CuPy the model uses on the host path (no GPU here)
CUPY_STANDIN = {
    "cupy/__init__.py": "from numpy import asarray, from_dlpack, matmul, float32, arange, empty, uint8  # noqa\n"
                        "from . import cuda  # noqa\n",
    "cupy/cuda/__init__.py": textwrap.dedent('''
        class Device:
            def __init__(self, id=0):
                self.id = id

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False
    '''),
}

CHILD = textwrap.dedent(r'''
    import json, sys, time
    from pathlib import Path
    import numpy as np
    from rig.parent import runtime
    from rig.worker.engines.base import ServerOptions
    from rig.worker.engines.capi import CapiEngine
    from rig.contract import evidence

    repo, work = Path(sys.argv[1]), Path(sys.argv[2])
    from rig.contract.runtime import from_dict as runtime_from_dict
    rt = runtime_from_dict(json.loads(sys.argv[3]))
    engine = CapiEngine(rt.core_library)
    engine.start(ServerOptions(model_repository=str(repo), backend_directory=rt.backend_dir,
                               exit_timeout_s=5, log_file=str(work / "server.log")))
    deadline = time.monotonic() + 60
    while not (engine.is_ready() and engine.model_ready("cupy")) and time.monotonic() < deadline:
        time.sleep(0.01)
    w = (np.arange(16, dtype=np.float32).reshape(4, 4) / 16).astype(np.float32)
    got = []
    for k in range(3):
        x = np.arange(4, dtype=np.float32) + k
        r = engine.infer("cupy", {"INPUT": x})
        got.append(bool(np.allclose(r.outputs()["OUTPUT"], x @ w)))
        r.release()
    t0 = time.monotonic()
    err = engine.stop()
    stop_s = time.monotonic() - t0
    engine.close()
    # no evidence hook here (no init markers): the model's own memory markers, whichever instance
    markers = [m for m in evidence.read_markers(work / "evidence") if m.get("phase") == "memory"]
    mine = {(m["pid"], m["instance"]) for m in markers}
    print("RESULT " + json.dumps({"outputs_ok": got, "stop_error": err, "stop_s": stop_s, "markers": len(markers),
                                 "input_copies": evidence.input_copies(markers, mine),
                                 "in_place": sum(m["inputs_in_place"] for m in markers)}))
''')


@pytest.mark.slow
def test_cupy_model_takes_a_cpu_input_in_a_real_stub_over_numpy2(tmp_path):
    from rig.parent import repository, runtime

    try:
        rt = runtime.resolve(None, auto_install=False)
    except RigError as e:
        print(f"skipped: {e}")
        pytest.skip(f"no Triton runtime installed: {e}")
    import numpy

    if int(numpy.__version__.split(".")[0]) < 2:
        pytest.skip("this environment has numpy 1: the stub would not run over numpy 2")
    rt = rt.__class__(**{**rt.to_dict(), "stub_site": None})  # as prepare() serves the cupy model
    repo = tmp_path / "repo"
    repo.mkdir()
    mdir = repository.render(repository.ModelSpec(kind="cupy"), repo)
    config = mdir / "config.pbtxt"
    config.write_text(config.read_text().replace("KIND_GPU", "KIND_CPU"))  # no GPU here
    for rel, text in CUPY_STANDIN.items():
        (mdir / "1" / rel).parent.mkdir(parents=True, exist_ok=True)
        (mdir / "1" / rel).write_text(text)
    work = tmp_path / "work"
    (work / "evidence").mkdir(parents=True)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**rt.worker_env(), "RIG_EVIDENCE_DIR": str(work / "evidence")}
    proc = subprocess.run([sys.executable, str(script), str(repo), str(work), json.dumps(rt.to_dict())],
                          env=env, capture_output=True, text=True, timeout=120, start_new_session=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    log = (work / "server.log").read_text()[-3000:] if (work / "server.log").exists() else ""
    assert lines, f"child failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}\n{log}"
    result = json.loads(lines[0][len("RESULT "):])
    print(result)
    assert result["outputs_ok"] == [True, True, True]  # x @ W computed from a CPU input, sent back by DLPack
    assert result["stop_error"] is None
    assert result["input_copies"] == 3                 # each CPU input copied once, counted
    assert result["in_place"] == 0 and result["markers"] == 1  # one instance; written at its finalize
