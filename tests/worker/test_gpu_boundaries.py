"""The boundaries the GPU path crosses on the rig's side, tested on a CPU through the CuPy 14
stand-in (``tests/standins/cupy14``) and, where the core is in play, a real core:

- the memory types and device ids the C API engine submits (``input_buffer``) and allocates
  (``_alloc`` / ``_release_buffer``), and the first input copy waited for before a stub can read it;
- the response allocator's lifetime across ``close()`` with a response still retained (real core);
- the cupy model's config naming its GPU; the device of a run's GPU work (``gpu_of``);
- the template's answers held to a tolerance, not exact bytes, where the GPU batches dynamically.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rig.common.errors import RigError
from rig.worker.engines import memory

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "cupy14"


@pytest.fixture
def cupy14(monkeypatch):
    """``import cupy`` gets the stand-in for this test only (two devices); the worker's device memory
    is made afresh and dropped after."""
    import numpy

    if tuple(int(p) for p in numpy.__version__.split(".")[:2]) < (2, 1):
        pytest.skip(f"the CuPy 14 stand-in needs numpy 2.1+ (this environment has {numpy.__version__})")
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.setenv("CUPY_STANDIN_DEVICES", "2")
    for name in [m for m in sys.modules if m == "cupy" or m.startswith("cupy.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(memory, "_DEVICE", None)
    monkeypatch.setattr(memory, "OUTPUTS", memory.Ledger())
    import cupy

    assert cupy.__version__.endswith("+standin")
    yield cupy
    for name in [m for m in sys.modules if m == "cupy" or m.startswith("cupy.")]:
        del sys.modules[name]


def _bytes_at(ptr: int, nbytes: int) -> bytes:
    return ctypes.string_at(ptr, nbytes)


def test_an_input_copy_has_landed_before_the_core_gets_its_pointer(cupy14, monkeypatch):
    from rig.capi.core import datatype_of
    from rig.worker.engines.capi.engine import input_buffer

    monkeypatch.setattr(memory, "PLACEMENT", memory.Placement("gpu", 1))
    x = np.arange(8, dtype=np.float32) + 0.5
    held, ptr, size, mtype, mid = input_buffer(x, datatype_of(x), memory.PLACEMENT)
    assert (mtype, mid, size) == (memory.MEMORY_GPU, 1, x.nbytes)
    assert held.device.id == 1 and ptr == held.data.ptr
    # read as another process reads it (the raw pointer, no stream): the copy has landed
    assert _bytes_at(ptr, size) == x.tobytes()
    again = input_buffer(x, datatype_of(x), memory.PLACEMENT)
    assert again[0] is held and memory.device_memory().copies == 1  # the same host array, copied once


def test_the_standin_would_show_a_copy_not_waited_for(cupy14):
    """The control: without the wait, the raw pointer holds the stand-in's poison."""
    x = np.arange(4, dtype=np.float32)
    dev = cupy14.asarray(x)
    assert np.isnan(np.frombuffer(_bytes_at(dev.data.ptr, x.nbytes), dtype=np.float32)).all()
    cupy14.cuda.get_current_stream().synchronize()
    assert _bytes_at(dev.data.ptr, x.nbytes) == x.tobytes()


def test_bytes_and_host_inputs_stay_on_the_host(cupy14):
    from rig.capi.core import datatype_of
    from rig.worker.engines.capi.engine import input_buffer

    x = np.arange(4, dtype=np.int32)
    held, ptr, size, mtype, mid = input_buffer(x, datatype_of(x), memory.Placement())
    assert (mtype, mid, size) == (memory.MEMORY_CPU, 0, 16) and ptr == held.ctypes.data
    words = np.array([b"ab", b"c"], dtype=object)
    held, _, size, mtype, mid = input_buffer(words, datatype_of(words), memory.Placement("gpu", 1))
    assert (mtype, mid) == (memory.MEMORY_CPU, 0) and size == len(held) == 4 + 2 + 4 + 1


def _engine():
    """A C API engine's allocator, without a server: the callbacks the core calls, their host memory
    from the C library (the core itself does not load in the test's process: its libraries are found
    through the worker's LD_LIBRARY_PATH)."""
    from types import SimpleNamespace

    from rig.worker.engines.capi import CapiEngine

    engine = CapiEngine.__new__(CapiEngine)
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    engine.core = SimpleNamespace(libc=libc)
    return engine


@pytest.mark.parametrize(
    ("placement", "preferred", "want"),
    [
        (memory.Placement("gpu", 1), (memory.MEMORY_GPU, 1), (memory.MEMORY_GPU, 1, "gpu:1")),
        (memory.Placement("gpu", 0), (memory.MEMORY_GPU, 1), (memory.MEMORY_GPU, 1, "gpu:1")),
        (memory.Placement("gpu", 1), (memory.MEMORY_CPU, 0), (memory.MEMORY_CPU, 0, "cpu")),
        (memory.Placement(), (memory.MEMORY_GPU, 0), (memory.MEMORY_CPU, 0, "cpu")),
    ],
)
def test_the_allocator_gives_the_memory_and_device_the_core_asked_for(cupy14, monkeypatch, placement, preferred, want):
    """Device memory where the core prefers it (on the device it names) and the placement is gpu;
    host memory otherwise; the ledger records what was handed out, and the release returns it."""
    engine = _engine()
    monkeypatch.setattr(memory, "PLACEMENT", placement)
    buffer, userp, amtype, amid = [None], [None], [None], [None]
    engine._alloc(None, b"OUTPUT", 64, preferred[0], preferred[1], None, buffer, userp, amtype, amid)
    assert (amtype[0], amid[0]) == want[:2] and buffer[0]
    assert memory.OUTPUTS.take() == want[2]
    if want[0] == memory.MEMORY_GPU:
        assert buffer[0] in memory.device_memory()._outputs
    engine._release_buffer(None, buffer[0], None, 64, amtype[0], amid[0])
    if want[0] == memory.MEMORY_GPU:
        assert buffer[0] not in memory.device_memory()._outputs


def test_a_device_the_standin_lacks_is_one_clear_error(cupy14, monkeypatch):
    with pytest.raises(RigError, match="CUDA device 5 is not usable"):
        memory.DeviceMemory(5)


def test_the_cupy_model_names_its_gpu(tmp_path):
    from rig.parent import repository

    text = (repository.render(repository.ModelSpec(kind="cupy", gpu=1), tmp_path) / "config.pbtxt").read_text()
    assert "instance_group [ { count: 1 kind: KIND_GPU gpus: [ 1 ] } ]" in text
    with pytest.raises(RigError):
        repository.render(repository.ModelSpec(kind="cupy", gpu=-1), tmp_path / "bad")


def test_the_gpu_of_a_run():
    from rig.parent.config import RunConfig
    from rig.parent.options import gpu_of

    assert gpu_of(RunConfig(model="cupy", input_memory="gpu:1")) == 1
    assert gpu_of(RunConfig(model="cupy", input_memory="auto")) == 0
    assert gpu_of(RunConfig(model="numpy", input_memory="cpu")) == 0


class _Answer:
    """One answer of a request as the Engine interface gives it (no core: the reference check alone)."""

    def __init__(self, out):
        self.out = out

    def outputs(self):
        return {"OUTPUT": self.out}

    def release(self):
        pass


class _Answers:
    def __init__(self, out):
        self.out = out

    def infer(self, model, inputs, timeout_s):
        return _Answer(self.out)


def test_the_template_is_held_to_a_tolerance_where_its_bytes_may_move():
    from rig.worker.outputs import output_is, reference_output

    x = np.arange(4, dtype=np.float32)
    w = np.arange(16, dtype=np.float32).reshape(4, 4) / 16
    near = (x @ w) * np.float32(1 + 3e-7)  # a last-bit difference, as another cuBLAS kernel gives
    ok, note, check = reference_output(_Answers(x @ w), "cupy", {"INPUT": x}, 4, 5.0)
    assert ok and note is None and check["bytes"] == (x @ w).tobytes()
    assert not output_is(check, {"OUTPUT": near})  # exact bytes: a last-bit change reads as wrong
    ok, note, check = reference_output(_Answers(x @ w), "cupy", {"INPUT": x}, 4, 5.0, exact=False)
    assert ok and check["bytes"] is None and "not exact bytes" in note
    assert output_is(check, {"OUTPUT": near})
    ok, note, _ = reference_output(_Answers(x @ w + 1), "cupy", {"INPUT": x}, 4, 5.0, exact=False)
    assert ok is False and "wrong outputs" in note  # the reference itself is still held to INPUT @ W


def test_a_batching_cupy_run_asks_for_no_exact_bytes(tmp_path):
    from rig.parent.config import RunConfig

    def exact(**kw):
        from rig.parent.orchestrator.spec import check_exact

        return check_exact(RunConfig(**kw))

    assert exact(model="cupy") and exact(model="numpy", max_batch_size=8, dynamic_batching=True)
    assert not exact(model="cupy", max_batch_size=8, dynamic_batching=True)


CHILD = textwrap.dedent(r"""
    import json, sys, time
    import numpy as np
    from rig.parent import repository
    from rig.worker.engines.base import ServerOptions
    from rig.worker.engines.capi import CapiEngine
    from rig.contract.runtime import from_dict as runtime_from_dict

    repo = sys.argv[1]
    rt = runtime_from_dict(json.loads(sys.argv[2]))
    repository.render(repository.ModelSpec(kind="numpy"), __import__("pathlib").Path(repo))
    engine = CapiEngine(rt.core_library)
    engine.start(ServerOptions(model_repository=repo, backend_directory=rt.backend_dir, exit_timeout_s=1,
                               log_file=sys.argv[3]))
    deadline = time.monotonic() + 60
    while not (engine.is_ready() and engine.model_ready("numpy")) and time.monotonic() < deadline:
        time.sleep(0.01)
    kept = engine.infer("numpy", {"INPUT": np.arange(4, dtype=np.float32)})  # retained through close()
    other = engine.infer("numpy", {"INPUT": np.ones(4, dtype=np.float32)})
    other.release()
    stop_error = engine.stop()
    engine.close()
    after_close = bool(engine._allocator)
    out = kept.outputs()["OUTPUT"].tolist()  # still readable: the response lives
    kept.release()                            # its buffer released through the allocator, then it goes
    print("RESULT " + json.dumps({"stop_error": stop_error, "allocator_after_close": after_close,
                                 "allocator_after_release": bool(engine._allocator), "out": out}), flush=True)
    # as the worker leaves: the stub of the model the response held is past its exit timeout
    __import__("os")._exit(0)
""")


@pytest.mark.slow
def test_the_allocator_outlives_a_response_retained_past_close(tmp_path):
    from rig.parent import runtime

    try:
        rt = runtime.resolve(None, auto_install=False)
    except RigError as e:
        pytest.skip(f"no Triton runtime installed: {e}")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "child.out"
    # to a file, not a pipe: the stub of the model the response held outlives the child (past its exit
    # timeout) and would keep a pipe open; its process group is killed after
    with out.open("w") as f:
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "repo"), json.dumps(rt.to_dict()),
                                 str(tmp_path / "server.log")], env=rt.worker_env(), stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=120)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = out.read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    assert lines and returncode == 0, f"exit {returncode}:\n{text[-3000:]}"
    result = json.loads(lines[0][len("RESULT "):])
    assert "timeout" in (result["stop_error"] or "").lower()  # the retained response held the model (server#8755)
    assert result["allocator_after_close"] is True             # kept for the response still held
    assert result["allocator_after_release"] is False          # gone with it
    assert len(result["out"]) == 4
