"""Tests of the engine over the official ``tritonserver`` package.

Two groups:
* ``probe()``: runs everywhere.
* A real in-process server on a tiny Python-backend model: skipped, with the probe's reason,
  where ``import tritonserver`` does not work (outside the NGC image).
"""

from __future__ import annotations

import gc
import importlib.util
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from rig.engines.base import EngineError, ServerOptions
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


# Behaviour is tested against the real package only (below); where it does not load,
# those tests skip with the probe's reason.

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
