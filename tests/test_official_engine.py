"""Tests of the engine over the official ``tritonserver`` package.

Three groups:
* ``probe()``: runs everywhere.
* The engine's own logic against small stand-ins for the package's objects (no Triton needed):
  option mapping, error mapping, and above all that no reference to a response survives
  ``release()`` — the rig measures exactly that bug (server#8755).
* A real in-process server on a tiny Python-backend model: skipped, with the probe's reason,
  where ``import tritonserver`` does not work (outside the NGC image).
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import importlib.util
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest

from rig.engines.base import EngineError, ServerOptions
from rig.engines import official
from rig.engines.official import OfficialEngine, probe

W = np.arange(16, dtype=np.float32).reshape(4, 4)


# ================================================================ probe

def test_probe_says_why():
    ok, reason = probe()
    print(f"probe: ok={ok} reason={reason}")
    assert isinstance(ok, bool)
    assert isinstance(reason, str) and reason.strip()
    if importlib.util.find_spec("tritonserver") is None:
        assert ok is False
        assert "tritonserver" in reason


class _GlibcxxFinder:
    """Makes ``import tritonserver`` fail the way the wheels do on Debian 12."""

    def find_spec(self, name, path=None, target=None):
        if name == "tritonserver":
            raise ImportError("/usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' "
                              "not found (required by .../tritonserver/_c/triton_bindings.so)")
        return None


def test_probe_explains_a_glibcxx_failure(monkeypatch):
    monkeypatch.delitem(sys.modules, "tritonserver", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_GlibcxxFinder(), *sys.meta_path])
    ok, reason = probe()
    assert ok is False
    assert "GLIBCXX_3.4.32" in reason and "NGC" in reason


# ================================================================ stand-ins for the package

class InternalError(Exception):
    """Named like the bindings' class: the engine maps error classes by name."""


class InvalidArgumentError(Exception):
    pass


class _DT(enum.Enum):
    FP32 = 11
    BYTES = 13


class _MT(enum.Enum):
    CPU = 0
    GPU = 2


class FakeTensor:
    def __init__(self, array):
        self._array = np.ascontiguousarray(array)
        self.data_type = _DT.FP32
        self.memory_type = _MT.CPU

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class FakeResponse:
    def __init__(self, outputs=None, error=None, final=True):
        self.outputs = outputs or {}
        self.error = error
        self.final = final


class FakeModel:
    def __init__(self, name, mode="ok"):
        self.name = name
        self.mode = mode
        self.made = []  # weakrefs to every response handed out

    def _responses(self, inputs):
        if self.mode == "error-response":
            r = FakeResponse()
            # The bindings append the failed response to the error's args.
            r.error = InternalError("model failed", r)
            self.made.append(weakref.ref(r))
            return [r]
        if self.mode == "submit-error":
            raise InvalidArgumentError("unexpected inference input 'BAD'")
        r = FakeResponse({"OUTPUT": FakeTensor(inputs["INPUT"] @ W)})
        self.made.append(weakref.ref(r))
        return [r]

    def infer(self, inputs=None, **_):
        responses = self._responses(inputs)
        if self.mode == "raise-on-error":  # older iterators raise response.error
            def gen():
                r = FakeResponse()
                r.error = InternalError("raised by iterator", r)
                self.made.append(weakref.ref(r))
                raise r.error
                yield  # pragma: no cover
            return gen()
        return iter(responses)

    def async_infer(self, inputs=None, **_):
        responses = self._responses(inputs)

        async def agen():
            for r in responses:
                yield r
        return agen()

    def ready(self):
        return True

    def metadata(self):
        return {"name": self.name, "versions": ["1"], "platform": "python",
                "inputs": [{"name": "INPUT", "datatype": "FP32", "shape": [4]}],
                "outputs": [{"name": "OUTPUT", "datatype": "FP32", "shape": [4]}]}

    def config(self):
        return {"max_batch_size": 0}


class FakeHandle:
    def __init__(self, name, state):
        self.name = name
        self.state = state


class FakeServer:
    def __init__(self, mode="ok", stop_error=None):
        self.models_by_name = {"simple": FakeModel("simple", mode)}
        self.stop_error = stop_error

    def model(self, name):
        return self.models_by_name[name]

    def models(self):
        return {("simple", 1): FakeHandle("simple", "UNLOADING"),
                ("simple", 2): FakeHandle("simple", "READY"),
                ("other", -1): FakeHandle("other", None)}

    def ready(self):
        return True

    def metadata(self):
        return {"name": "triton", "version": "2.99.0"}

    def stop(self):
        if self.stop_error is not None:
            raise self.stop_error


def _engine(server):
    engine = OfficialEngine()
    engine._server = server  # inject the stand-in; start() would import tritonserver
    return engine


# ================================================================ engine logic, no Triton

def test_infer_outputs_and_release_leave_no_reference():
    server = FakeServer()
    engine = _engine(server)
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    resp = engine.infer("simple", {"INPUT": x})
    out = resp.outputs()["OUTPUT"]
    np.testing.assert_allclose(out, x @ W)
    np.testing.assert_allclose(resp.output_view("OUTPUT"), x @ W)
    made = server.models_by_name["simple"].made
    assert made[0]() is not None
    resp.release()
    resp.release()  # idempotent
    # Plain references only: no gc.collect() needed (or allowed) for the response to go.
    assert made[0]() is None
    with pytest.raises(EngineError):
        resp.outputs()
    np.testing.assert_allclose(out, x @ W)  # the copy outlives the response


@pytest.mark.parametrize("mode", ["error-response", "raise-on-error"])
def test_error_response_is_raised_without_keeping_it(mode):
    server = FakeServer(mode=mode)
    engine = _engine(server)
    with pytest.raises(EngineError) as info:
        engine.infer("simple", {"INPUT": np.zeros(4, np.float32)})
    err = info.value
    assert err.code == "INTERNAL"
    assert "FakeResponse" not in str(err)  # only the error's own text
    assert err.__cause__ is None and err.__context__ is None
    assert server.models_by_name["simple"].made[0]() is None


def test_submit_error_maps_code():
    engine = _engine(FakeServer(mode="submit-error"))
    with pytest.raises(EngineError) as info:
        engine.infer("simple", {"BAD": np.zeros(4, np.float32)})
    assert info.value.code == "INVALID_ARG"
    assert "BAD" in str(info.value)


def test_infer_async_delivers_and_keeps_nothing():
    server = FakeServer()
    engine = _engine(server)
    got = {}
    event = threading.Event()

    def done(resp, err):
        got["resp"], got["err"] = resp, err
        event.set()

    x = np.array([1, 0, 0, 1], dtype=np.float32)
    engine.infer_async("simple", {"INPUT": x}, done)
    assert event.wait(10)
    assert got["err"] is None
    np.testing.assert_allclose(got["resp"].outputs()["OUTPUT"], x @ W)
    got["resp"].release()
    deadline = time.monotonic() + 5
    while engine._tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.models_by_name["simple"].made[0]() is None
    assert engine.stop() is None
    engine.close()


def test_infer_async_reports_errors_to_the_callback():
    engine = _engine(FakeServer(mode="error-response"))
    got = []
    event = threading.Event()
    engine.infer_async("simple", {"INPUT": np.zeros(4, np.float32)},
                       lambda r, e: (got.append((r, e)), event.set()))
    assert event.wait(10)
    resp, err = got[0]
    assert resp is None and isinstance(err, EngineError) and err.code == "INTERNAL"
    engine.stop()


def test_stop_returns_the_message_instead_of_raising():
    engine = _engine(FakeServer(stop_error=InternalError("Exit timeout expired. Exiting immediately.")))
    assert engine.stop() == "Exit timeout expired. Exiting immediately."
    engine._server.stop_error = None  # the core's second stop returns at once ...
    assert engine.stop() == "Exit timeout expired. Exiting immediately."  # ... the first outcome stays
    assert _engine(FakeServer()).stop() is None
    assert OfficialEngine().stop()  # never started: a message, not an exception


def test_queries_map_the_package_answers():
    engine = _engine(FakeServer())
    assert engine.is_ready() and engine.model_ready("simple")
    assert engine.server_version() == "2.99.0"
    states = engine.model_states()
    assert states == {"simple": "UNLOADING", "other": "UNAVAILABLE"}
    meta = engine.model_metadata("simple")
    assert meta.inputs[0].name == "INPUT" and meta.inputs[0].shape == (4,)
    assert meta.outputs[0].datatype == "FP32" and meta.max_batch_size == 0
    assert OfficialEngine().is_ready() is False


class _FakeModes(enum.Enum):
    NONE = 0
    POLL = 1
    EXPLICIT = 2


@dataclasses.dataclass
class _OldOptions:  # an older Options without the log_* switches or startup_models
    model_repository: str = ""
    model_control_mode: _FakeModes = _FakeModes.NONE
    exit_timeout: int = 30
    strict_readiness: bool = True
    log_verbose: int = 0
    log_file: str | None = None
    backend_directory: str = "/opt/tritonserver/backends"
    backend_configuration: dict = dataclasses.field(default_factory=dict)


class _FakeTs:
    Options = _OldOptions
    ModelControlMode = _FakeModes


def test_options_mapping():
    opts = ServerOptions(model_repository="/m", backend_directory="/b", exit_timeout_s=5,
                         model_control="explicit", log_file="/l.log", log_verbose=1,
                         backend_config=(("python", "shm-default-byte-size", "1048576"),))
    kwargs = official._options_kwargs(opts, _FakeTs)
    assert kwargs == {"model_repository": "/m", "model_control_mode": _FakeModes.EXPLICIT,
                      "exit_timeout": 5, "strict_readiness": True, "log_verbose": 1,
                      "backend_directory": "/b", "log_file": "/l.log",
                      "backend_configuration": {"python": {"shm-default-byte-size": "1048576"}}}
    _OldOptions(**kwargs)  # accepted as is
    with pytest.raises(EngineError) as info:
        official._options_kwargs(ServerOptions(model_repository="/m", startup_models=("a",)), _FakeTs)
    assert info.value.code == "UNSUPPORTED"
    with pytest.raises(EngineError):
        official._options_kwargs(ServerOptions(model_repository="/m", model_control="sometimes"), _FakeTs)


# ================================================================ a real server (NGC image)

_OK, _WHY = probe()

needs_tritonserver = pytest.mark.skipif(not _OK, reason=f"tritonserver not usable here: {_WHY}")

MODEL_PY = textwrap.dedent("""
    import numpy as np
    import triton_python_backend_utils as pb_utils

    W = np.arange(16, dtype=np.float32).reshape(4, 4)


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
                if x[0] < -1e6:  # lets a test ask for an error response
                    responses.append(pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("asked for an error")))
                    continue
                y = (x @ W).astype(np.float32)
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUTPUT", y)]))
            return responses
""")

CONFIG = textwrap.dedent("""
    name: "simple"
    backend: "python"
    max_batch_size: 0
    input [ { name: "INPUT", data_type: TYPE_FP32, dims: [ 4 ] } ]
    output [ { name: "OUTPUT", data_type: TYPE_FP32, dims: [ 4 ] } ]
    instance_group [ { kind: KIND_CPU, count: 1 } ]
""")


@pytest.fixture
def repo(tmp_path):
    model = tmp_path / "models" / "simple"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG)
    (model / "1" / "model.py").write_text(MODEL_PY)
    return tmp_path


def _options(repo, **kw):
    from rig.runtime import container_home
    home = container_home()
    return ServerOptions(model_repository=str(repo / "models"),
                         backend_directory=str(home / "backends") if home else None,
                         exit_timeout_s=kw.pop("exit_timeout_s", 10),
                         log_file=str(repo / "server.log"), **kw)


def _wait(predicate, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def engine():
    if not _OK:
        print(f"skipping: {_WHY}")
        pytest.skip(f"tritonserver not usable here: {_WHY}")
    eng = OfficialEngine()
    yield eng
    eng.close()


def _log_tail(repo):
    p = repo / "server.log"
    return p.read_text()[-3000:] if p.exists() else "(no log)"


@needs_tritonserver
def test_real_infer_release_stop(engine, repo):
    engine.start(_options(repo))
    assert _wait(engine.is_ready), _log_tail(repo)
    assert engine.model_ready("simple")
    print("server version:", engine.server_version())
    meta = engine.model_metadata("simple")
    assert [(t.name, t.datatype, t.shape) for t in meta.inputs] == [("INPUT", "FP32", (4,))]
    assert [(t.name, t.datatype, t.shape) for t in meta.outputs] == [("OUTPUT", "FP32", (4,))]
    x = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
    resp = engine.infer("simple", {"INPUT": x})
    out = resp.outputs()["OUTPUT"]
    np.testing.assert_allclose(out, x @ W, rtol=1e-6)
    view = resp.output_view("OUTPUT")
    np.testing.assert_allclose(np.asarray(view), x @ W, rtol=1e-6)
    del view
    resp.release()
    del resp
    t0 = time.monotonic()
    assert engine.stop() is None, _log_tail(repo)
    print(f"stop() returned cleanly in {time.monotonic() - t0:.2f} s")


@needs_tritonserver
def test_real_errors_keep_nothing(engine, repo):
    engine.start(_options(repo, exit_timeout_s=5))
    assert _wait(engine.is_ready), _log_tail(repo)
    # Refused at submission (no response exists).
    with pytest.raises(EngineError) as info:
        engine.infer("simple", {"WRONG": np.zeros(4, np.float32)})
    print("submission error:", info.value.code, info.value)
    # An error response from the model: the bindings put it in a reference cycle with its
    # error; the engine must cut it, so stop() is clean without the cyclic GC's help.
    gc.disable()
    try:
        with pytest.raises(EngineError) as info:
            engine.infer("simple", {"INPUT": np.array([-1e7, 0, 0, 0], np.float32)})
        print("error response:", info.value.code, info.value)
        assert "asked for an error" in str(info.value)
        del info
        assert engine.stop() is None, _log_tail(repo)
    finally:
        gc.enable()


@needs_tritonserver
def test_real_explicit_load_unload(engine, repo):
    engine.start(_options(repo, model_control="explicit"))
    assert _wait(engine.is_ready), _log_tail(repo)
    assert engine.model_states().get("simple") != "READY"
    engine.load_model("simple")
    assert engine.model_ready("simple")
    assert engine.model_states()["simple"] == "READY"
    engine.unload_model("simple")
    assert _wait(lambda: engine.model_states()["simple"] not in ("READY", "UNLOADING"), 30), \
        engine.model_states()
    assert engine.stop() is None, _log_tail(repo)


@needs_tritonserver
def test_real_infer_async(engine, repo):
    engine.start(_options(repo))
    assert _wait(engine.is_ready), _log_tail(repo)
    results = []
    event = threading.Event()
    x = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)

    def done(resp, err):
        if resp is not None:
            results.append(resp.outputs()["OUTPUT"])
            resp.release()
        else:
            results.append(err)
        event.set()

    engine.infer_async("simple", {"INPUT": x}, done)
    assert event.wait(60)
    assert not isinstance(results[0], Exception), results[0]
    np.testing.assert_allclose(results[0], x @ W, rtol=1e-6)
    gc.collect()
    assert engine.stop() is None, _log_tail(repo)
