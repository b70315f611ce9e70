"""What the official engine asks of the bindings for its outputs' memory, what it records, and
what a retained response or array holds, in either placement.

The bindings since 2.55 put every output in host memory owned by the core's response, and, when a
request carries ``output_memory_type``, replace each output by a device copy afterwards
(``Tensor.to_device``): the copies own nothing of the core's response, so a retained one would hold
no model and server#8755 would read clean. The engine reads which design the bindings have
(``rig/worker/engines/official/allocation.py``) and asks for an output memory only of bindings
that allocate there.

The fast tests read the decision over packages laid out as each design ships; the ``official``
ones run the real bindings over the real embedded core in the sandbox
(``bash tests/sandbox/official.sh -- tests/worker/test_official_memory.py``). There is no GPU or
CuPy there: the GPU placement is driven with CuPy's one job on the rig's side, copying an input
to the device, left to the host array itself; everything else (the engine's requests, the
bindings, the core, the stub) is what runs on a GPU node.
"""

from __future__ import annotations

import json
import textwrap
import types

import numpy as np
import pytest

from rig.worker.engines import memory
from rig.worker.engines.memory import Placement
from rig.worker.engines.official import allocation
from rig.worker.engines.official.responses import record_memory
from test_official_engine import _in_child, _log, official

# ================================================================ everywhere

BUILDER_COPIES = '''
class InferenceResponse:
    @staticmethod
    def _from_tritonserver_inference_response(model, request, inference_request, response, flags):
        result = InferenceResponse()
        if inference_request.output_memory_type is not None:
            outputs = {}
            for name, tensor in result.outputs.items():
                outputs[name] = tensor.to_device(inference_request.output_memory_type)
            result.outputs = outputs
        return result
'''

BUILDER_PLAIN = '''
class InferenceResponse:
    @staticmethod
    def _from_tritonserver_inference_response(model, request, response, flags):
        return InferenceResponse()
'''

ALLOCATORS = '''
class ResponseAllocator:
    def allocate(self, *args):
        pass

    def query_preferred_memory_type(self, _allocator, _user_object, _name, _size, memory_type, memory_type_id):
        return memory_type, memory_type_id
'''


def _bindings(root, name: str, builder: str, allocators: str | None):
    """A package laid out as the bindings' ``tritonserver`` (``_api/_response.py``, and
    ``_api/_allocators.py`` where given), imported under ``name``."""
    import importlib

    pkg = root / name
    (pkg / "_api").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"from {name}._api._response import InferenceResponse\n")
    (pkg / "_api" / "__init__.py").write_text("")
    (pkg / "_api" / "_response.py").write_text(builder)
    if allocators is not None:
        (pkg / "_api" / "_allocators.py").write_text(allocators)
    return importlib.import_module(name)


@pytest.mark.parametrize("name, builder, allocators, design", [
    ("ts_r2501", BUILDER_PLAIN, ALLOCATORS, allocation.ALLOCATES),  # r24.10 ... r25.01 (2.51-2.54)
    ("ts_r2502", BUILDER_COPIES, None, allocation.COPIES),  # r25.02 (2.55) ... r26.06, main
    ("ts_both", BUILDER_COPIES, ALLOCATORS, allocation.COPIES),  # a copy afterwards wins
    ("ts_neither", BUILDER_PLAIN, None, allocation.UNKNOWN),  # a design not recognised
])
def test_the_decision_follows_what_the_bindings_do(tmp_path, monkeypatch, name, builder, allocators, design):
    monkeypatch.syspath_prepend(str(tmp_path))
    found = allocation.output_allocation(_bindings(tmp_path, name, builder, allocators))
    assert found.design == design, found
    asked = {"output_memory_type": "gpu:0"} if design == allocation.ALLOCATES else {}
    assert allocation.request_kwargs(Placement.parse("gpu"), found) == asked
    assert allocation.request_kwargs(Placement.parse("cpu"), found) == {}
    if design == allocation.ALLOCATES:
        assert allocation.request_kwargs(Placement.parse("gpu:1"), found) == {"output_memory_type": "gpu:1"}
    else:
        assert "no output memory is asked" in found.why


def test_without_the_source_the_allocator_alone_decides(tmp_path, monkeypatch):
    """An install without the ``.py`` files: the Python allocator still shows the first design."""
    monkeypatch.syspath_prepend(str(tmp_path))
    ts = _bindings(tmp_path, "ts_nosource", BUILDER_PLAIN, ALLOCATORS)
    monkeypatch.setattr(ts.InferenceResponse, "_from_tritonserver_inference_response", len)  # a builtin
    assert allocation.output_allocation(ts).design == allocation.ALLOCATES


class _Enum:
    """An enum as the bindings give it: a name and an integer ``value``."""

    def __init__(self, name: str, value: int):
        self.name, self.value = name, value


def test_the_cycle_is_told_when_gpu_outputs_were_not_asked(monkeypatch):
    """The decision reaches the cycle's row (a note) under a GPU placement, and only there."""
    from rig.worker.engines.official.engine import OfficialEngine

    engine = OfficialEngine.__new__(OfficialEngine)
    engine.output_allocation = allocation.OutputAllocation(allocation.COPIES, "they copy afterwards")
    monkeypatch.setattr(memory, "PLACEMENT", Placement("gpu", 0))
    assert engine.start_notes() == ["outputs not asked in gpu:0: they copy afterwards"]
    engine.output_allocation = allocation.OutputAllocation(allocation.ALLOCATES, "they allocate there")
    assert engine.start_notes() == []
    engine.output_allocation = allocation.OutputAllocation(allocation.COPIES, "they copy afterwards")
    monkeypatch.setattr(memory, "PLACEMENT", Placement())
    assert engine.start_notes() == []


@pytest.mark.parametrize("memory_type, device, label", [
    (_Enum("CPU", 0), 0, "cpu"), (_Enum("CPU_PINNED", 1), 0, "cpu"), (_Enum("GPU", 2), 1, "gpu:1"),
    (None, 0, "cpu"),
])
def test_the_memory_recorded_is_what_the_output_reports(memory_type, device, label):
    """Every output of a response, as its tensor says: never the placement asked."""
    memory.OUTPUTS.take()
    tensor = types.SimpleNamespace(memory_type=memory_type, memory_type_id=device)
    record_memory(types.SimpleNamespace(outputs={"A": tensor, "B": tensor}))
    assert memory.OUTPUTS.take() == label
    record_memory(types.SimpleNamespace(outputs={}))  # the final flag alone: nothing to say
    assert memory.OUTPUTS.take() is None


# ================================================================ the real bindings

# finalize leaves a file in the model's folder: whether it ran, read after the stop
MODEL_PY = textwrap.dedent("""
    import os
    import numpy as np
    import triton_python_backend_utils as pb_utils

    W = np.arange(16, dtype=np.float32).reshape(4, 4)


    class TritonPythonModel:
        def initialize(self, args):
            self.marker = os.path.join(args["model_repository"], "finalized")

        def execute(self, requests):
            return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
                "OUTPUT", (pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy() @ W).astype(np.float32))])
                for r in requests]

        def finalize(self):
            open(self.marker, "w").close()
""")

CONFIG = textwrap.dedent("""
    name: "simple"
    backend: "python"
    max_batch_size: 0
    input [ { name: "INPUT", data_type: TYPE_FP32, dims: [ 4 ] } ]
    output [ { name: "OUTPUT", data_type: TYPE_FP32, dims: [ 4 ] } ]
    instance_group [ { kind: KIND_CPU, count: 1 } ]
""")

EXIT_TIMEOUT = 3


@pytest.fixture
def repo(tmp_path):
    model = tmp_path / "models" / "simple"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG)
    (model / "1" / "model.py").write_text(MODEL_PY)
    return tmp_path


def _run(runtime, repo, placement: str, body: str) -> list[dict]:
    """``body`` in a child process (the runtime's environment, as the rig's worker has it) under
    ``placement``, with ``e`` an official engine started on ``repo`` and its model ready, ``ts``
    the bindings, ``x`` an input and ``marker`` finalize's file; returns the JSON lines it printed."""
    opts = {"model_repository": str(repo / "models"), "backend_directory": runtime.backend_dir,
            "exit_timeout_s": EXIT_TIMEOUT, "log_file": str(repo / "server.log")}
    code = textwrap.dedent(f"""
        import ctypes, gc, json, os, sys, time, traceback
        import numpy as np
        from rig.worker.engines import memory
        from rig.worker.engines.base import EngineError, ServerOptions
        from rig.worker.engines.official import OfficialEngine, allocation, loader

        class HostInputs:
            # CuPy's one job on the rig's side under --input-memory gpu: the input's copy on the
            # device. Without a GPU the host array stands in; the request is otherwise the same.
            def input(self, arr):
                return arr

        memory.set_placement(memory.Placement.parse({placement!r}))
        if memory.PLACEMENT.gpu:
            memory.device_memory = HostInputs
        W = np.arange(16, dtype=np.float32).reshape(4, 4)
        x = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
        marker = {str(repo / "models" / "simple" / "finalized")!r}
        e = OfficialEngine({runtime.core_library!r})
        e.start(ServerOptions(**{opts!r}))
        ts = e._ts
        deadline = time.monotonic() + 120
        while not e.model_ready("simple"):
            assert time.monotonic() < deadline, "not ready"
            time.sleep(0.02)

        def say(**kw):
            print(json.dumps(kw, default=str), flush=True)

        def body():
    """) + textwrap.indent(textwrap.dedent(body), "    ") + textwrap.dedent("""
        try:
            body()
            say(ok=True)
        except BaseException:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # a response still held can make the exit itself wait
    """)
    p = _in_child(runtime, code)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert p.returncode == 0 and lines and lines[-1] == {"ok": True}, p.stdout + p.stderr[-3000:] + _log(repo)
    return lines[:-1]


@official
def test_these_bindings_copy_afterwards_so_the_engine_asks_no_output_memory(runtime, repo):
    """The PyPI bindings, read as they are installed: their outputs are the core's, in host
    memory, copied afterwards where a request asks another memory. Under the GPU placement the
    engine asks for none, in its plain requests, its prebuilt ones and its lane's; asked anyway
    (what the engine did before), the bindings try the device copy: without CuPy it fails, and
    with CuPy the output would be the copy, owned by CuPy."""
    import importlib.util

    [seen] = _run(runtime, repo, "gpu", """
        import importlib.util
        found = e.output_allocation
        assert found is not None and found.design == allocation.COPIES, found
        assert importlib.util.find_spec("tritonserver._api._allocators") is None
        assert e.request_kwargs == {} and "output_memory_type" not in e.infer_kwargs, e.infer_kwargs
        handle = e.model_handle("simple")
        assert e.prebuilt_request(handle, {"INPUT": x}).output_memory_type is None
        lane = e.lane("simple", {"INPUT": x}, in_flight=1)
        assert "output_memory_type" not in lane._send.keywords
        lane.close()
        # the control: what the engine asked before, sent through the same path
        e.infer_kwargs = {**e.infer_kwargs, "output_memory_type": "gpu:0"}
        try:
            r = e.infer("simple", {"INPUT": x}, timeout_s=30)
        except EngineError as err:
            asked = str(err)
        else:
            tensor = r._response.outputs["OUTPUT"]
            asked = f"{tensor.memory_type} owned by {type(tensor.memory_buffer.owner).__module__}"
            r.release()
        say(design=found.design, why=found.why, asked=asked, version=loader.bindings_version())
    """)
    print(seen)
    assert "to_device" in seen["why"]
    # no CuPy: "Memory type gpu:0 not supported: Conversion from ... not supported"; CuPy: a copy
    assert "not supported" in seen["asked"] or "cupy" in seen["asked"], seen
    assert importlib.util.find_spec("cupy") is not None or "not supported" in seen["asked"]


# Walks a retained array back to what owns its memory: numpy keeps the DLPack capsule as the
# array's base, the capsule points at the bindings' DLManagedTensor, whose manager_ctx is the
# bindings' _ManagerCtx holding the Tensor (tritonserver/_api/_tensor.py, _create_managed_tensor).
CHAIN = """
    from tritonserver._api._dlpack import DLManagedTensor

    def dlpack_tensor(arr):
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        capsule = arr.base
        managed = DLManagedTensor.from_address(api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)))
        return ctypes.cast(managed.manager_ctx, ctypes.py_object).value._tensor

    def name(obj):
        return f"{type(obj).__module__}.{type(obj).__qualname__}"
"""


@pytest.mark.parametrize("placement, retain", [
    ("cpu", "last-response"), ("cpu", "last-array"), ("gpu", "last-response"), ("gpu", "last-array"),
    ("gpu", "none"),
])
@official
def test_a_retained_response_or_array_holds_the_core_response(runtime, repo, placement, retain):
    """The owner chain, in either placement: the retained array (or the response's output) is a
    ``Tensor`` whose ``MemoryBuffer`` is owned by the core's response (the pybind
    ``TRITONSERVER_InferenceResponse``), over that response's own host memory; so ``stop()`` waits
    out exit_timeout with finalize not run, and finalize runs once the retention is dropped.
    ``none`` is the control: nothing held, a clean stop, finalize run."""
    [chain, stop] = _run(runtime, repo, placement, textwrap.dedent(CHAIN) + textwrap.dedent("""
        from rig.worker.engines.retention import Retained, apply_retention
        memory.OUTPUTS.take()
        kept = Retained()
        if RETAIN == "none":  # apply_retention sends nothing for none: the same request, let go
            kept.keep(e.infer("simple", {"INPUT": x}, timeout_s=30), RETAIN)
            say(outputs=memory.OUTPUTS.take())
        else:
            assert apply_retention(e, "simple", {"INPUT": x}, RETAIN, kept, 30) is None
            if RETAIN == "last-array":
                held = kept.array
                tensor = dlpack_tensor(held)
                assert held.ctypes.data == tensor.memory_buffer.data_ptr  # the array is over that memory
            else:
                held = kept.response
                tensor = held._response.outputs["OUTPUT"]
            np.testing.assert_allclose(np.asarray(np.from_dlpack(tensor)), x @ W, rtol=1e-6)
            owner = tensor.memory_buffer.owner
            say(chain=[name(held), name(tensor), name(tensor.memory_buffer), name(owner)],
                memory=str(tensor.memory_type), device=tensor.memory_type_id, outputs=memory.OUTPUTS.take(),
                owner_is_core_response=isinstance(owner, ts._c.TRITONSERVER_InferenceResponse))
            held = tensor = owner = None
        gc.collect()
        t0 = time.monotonic()
        message = e.stop()
        stopped = time.monotonic() - t0
        finalized_at_stop = os.path.exists(marker)
        kept.clear()
        gc.collect()
        deadline = time.monotonic() + 60
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        say(message=message, stop_s=stopped, finalized_at_stop=finalized_at_stop,
            finalized_after_release=os.path.exists(marker))
    """).replace("RETAIN", repr(retain)))
    print(placement, retain, chain, stop)
    if retain == "none":
        assert chain["outputs"] == "cpu"
        assert stop["message"] is None and stop["stop_s"] < EXIT_TIMEOUT and stop["finalized_at_stop"]
        return
    assert chain["chain"][0] == ("numpy.ndarray" if retain == "last-array"
                                 else "rig.worker.engines.official.responses.OfficialResponse")
    assert chain["chain"][1:] == ["tritonserver._api._tensor.Tensor",
                                  "tritonserver._api._memorybuffer.MemoryBuffer",
                                  "tritonserver._c.triton_bindings.TRITONSERVER_InferenceResponse"], chain
    assert chain["owner_is_core_response"]
    # the output as the core made it, and the windows' record of it, under either placement
    assert chain["memory"].endswith("CPU") and chain["device"] == 0 and chain["outputs"] == "cpu"
    assert "Exit timeout expired" in stop["message"]
    assert 0.95 * EXIT_TIMEOUT <= stop["stop_s"] < 2 * EXIT_TIMEOUT  # waited out, then ended
    assert not stop["finalized_at_stop"]  # the retention held the model: finalize never ran
    assert stop["finalized_after_release"]  # the positive control: dropped, finalize runs


@official
def test_the_lane_reads_and_records_outputs_on_the_host_under_the_gpu_placement(runtime, repo):
    """Under the GPU placement the lane's outputs are the core's host memory: checked there in
    place (a wrong reference fails every response: the check reads the real bytes), and every
    window's output memory says ``cpu``, checked or not."""
    [seen] = _run(runtime, repo, "gpu", """
        import locust, gevent
        want = (x @ W).astype(np.float32).tobytes()

        def run(check):
            memory.OUTPUTS.take()
            lane = e.lane("simple", {"INPUT": x}, in_flight=2)
            lane.set_check(check)
            lane.start_closed()
            deadline = time.monotonic() + 60
            while lane.stats()["completed"] < 50 and time.monotonic() < deadline:
                gevent.sleep(0.01)
            assert lane.stop(30)
            lane.drain()
            stats, counters = lane.stats(), lane.counters()
            lane.close()
            assert stats["completed"] >= 50 and stats["errors"] == 0, stats
            return stats["completed"], counters["bad_outputs"], memory.OUTPUTS.take()

        check = {"name": "OUTPUT", "datatype": "FP32", "shape": (4,), "size": len(want), "bytes": want}
        wrong = {**check, "bytes": bytes(len(want))}
        say(right=run(check), wrong=run(wrong), unchecked=run(None))
        assert e.stop() is None
    """)
    print(seen)
    completed, bad, outputs = seen["right"]
    assert bad == 0 and outputs == "cpu"
    completed, bad, outputs = seen["wrong"]
    assert bad == completed and outputs == "cpu"
    assert seen["unchecked"][1:] == [0, "cpu"]
