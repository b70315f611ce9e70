"""The engine over the official ``tritonserver`` package, on the real embedded core.

The tests marked ``official`` need the PyPI bindings (CPython 3.12, glibc 2.39+): CI runs them
inside the Debian 13 sandbox (``bash tests/sandbox/official.sh``); elsewhere they skip with the
reason. They cover what the capi engine's tests cover: the server#8755 mechanism under every
retention policy and ``del`` as its fix, the lane, and the pairing of bindings and core; the
rig's commands over this engine (fault models, bad input, workloads) are in
test_official_soak.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pandas as pd
import pytest

from helpers import cycles, rig
from rig.worker.engines.official import loader

W = np.arange(16, dtype=np.float32).reshape(4, 4)
ENGINE = ("--engine", "tritonserver")


# ================================================================ everywhere

def test_explain_names_the_cause_and_the_way_out():
    why = loader.explain("/usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found "
                         "(required by .../tritonserver/_c/triton_bindings.so)")
    assert "GLIBCXX_3.4.32" in why and "NGC" in why and "sandbox" in why
    assert "pip install -e '.[official]'" in loader.explain("No module named 'tritonserver'")
    assert "\n" not in loader.explain("line one\nline two")


@pytest.mark.slow
def test_probe_says_why_in_one_line(runtime):
    """The parent's probe (rig.parent.engines: the worker's side asked in a child) says why in one line."""
    from rig.parent.engines import official_probe

    ok, why = official_probe(runtime)
    print(f"probe over {runtime.name}: ok={ok}: {why}")
    assert why.strip() and "\n" not in why
    if loader.bindings_library() is None:
        assert ok is False and "tritonserver" in why


@pytest.mark.slow
def test_asking_for_the_engine_where_it_cannot_load_is_one_line(tmp_path, runtime):
    from rig.parent.engines import official_probe

    if official_probe(runtime)[0]:
        pytest.skip("the bindings load here; the refusal is tested where they do not")
    p = rig("cycle", *ENGINE, "--results", str(tmp_path))
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0 and "--engine capi" in p.stderr


def test_loop_runs_on_a_real_thread_and_wakes_greenlets_under_gevent():
    """Where Locust has monkey-patched the process, the engine's loop is still an OS thread
    (gevent's patched Thread would make it a greenlet and stall the hub), and a result set on
    it wakes a waiting greenlet while the hub keeps running others."""
    code = textwrap.dedent("""
        import locust, asyncio, threading, time, gevent
        from rig.worker.engines.official.loop import LoopThread, Signal
        loop = LoopThread()
        seen, done = {}, Signal()
        ticks = []
        async def work():  # ends once the hub's ticker has ticked ten times
            seen["thread"] = threading.get_native_id()
            while len(ticks) < 10:
                await asyncio.sleep(0.005)
            done.set(42)
        ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(10)])
        loop.submit(work())
        # the result comes only if the ticker ran during the wait: the wait yielded to the hub
        assert done.wait(30) and done.value == 42, f"the hub was blocked while waiting ({len(ticks)} ticks)"
        assert len(ticks) == 10
        assert seen["thread"] != threading.get_native_id(), "the loop ran on the hub's thread"
        loop.shutdown()
        print("ok")
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().endswith("ok"), p.stdout + p.stderr[-2000:]


# ================================================================ the real bindings

_OK = loader.bindings_library() is not None
_WHY = ("the tritonserver bindings are not installed here; "
        "run these tests in the sandbox: bash tests/sandbox/official.sh")


def official(test):
    """Needs the real bindings: CI runs it in the sandbox; elsewhere it skips with the reason."""
    return pytest.mark.slow(pytest.mark.official(pytest.mark.skipif(not _OK, reason=_WHY)(test)))

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
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUTPUT", (x @ W).astype(np.float32))]))
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


def _log(repo):
    p = repo / "server.log"
    return p.read_text()[-3000:] if p.exists() else "(no log)"


def _in_child(runtime, code: str) -> subprocess.CompletedProcess:
    """The engine in a fresh process with the runtime's environment, as the rig's worker has it,
    in a process group of its own: backend stubs that outlive it (a model still held) are killed
    with it, and output goes to files, not pipes that a surviving stub would keep open."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=err,
                                env=runtime.worker_env(), start_new_session=True)
        try:
            proc.wait(timeout=300)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())


@pytest.mark.parametrize("retain, outcome, before", [
    ("none", "clean", 1), ("last-response", "exit_timeout", 0), ("last-array", "exit_timeout", 0)])
@official
def test_cycle_under_each_retention_policy(tmp_path, runtime, retain, outcome, before):
    """server#8755 through the very API it was reported against."""
    res, exit_timeout = tmp_path / "r", 3
    p = rig("cycle", *ENGINE, "--retain", retain, "--exit-timeout", str(exit_timeout), "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(res).iloc[0]
    print(p.stdout)
    assert r.engine == "tritonserver" and r.outcome == outcome, r.detail
    assert r.finalize_expected == 1 and r.finalize_before_stop == before
    assert str(r.triton_version) == runtime.triton_version  # the core's own word
    assert r.outputs_ok
    if outcome == "exit_timeout":
        assert "Exit timeout expired" in r.stop_error
        assert 0.95 * exit_timeout <= r.stop_latency_s < 2 * exit_timeout  # waited out, then ended
        assert r.finalize_after_stop == 1  # dropping the reference lets finalize run
    else:
        assert pd.isna(r.stop_error) and r.stop_latency_s < exit_timeout


def _engine_script(runtime, repo, body: str, **options) -> str:
    """Run ``body`` in a child process (the runtime's environment, as the rig's worker has it)
    with ``e``, an official engine started on ``repo`` and ready; returns its stdout."""
    opts = {"model_repository": str(repo / "models"), "backend_directory": runtime.backend_dir,
            "exit_timeout_s": 5, "log_file": str(repo / "server.log"), **options}
    code = textwrap.dedent(f"""
        import gc, os, sys, time, traceback
        import numpy as np
        from rig.worker.engines.base import EngineError, ServerOptions
        from rig.worker.engines.official import OfficialEngine
        W = np.arange(16, dtype=np.float32).reshape(4, 4)
        e = OfficialEngine({runtime.core_library!r})
        e.start(ServerOptions(**{opts!r}))
        deadline = time.monotonic() + 120
        while not e.is_ready() or ({options.get("model_control") != "explicit"} and not e.model_ready("simple")):
            assert time.monotonic() < deadline, "not ready"
            time.sleep(0.02)
        def body():
    """) + textwrap.indent(textwrap.dedent(body), "    ") + textwrap.dedent("""
        try:
            body()
            print("ok", flush=True)
        except BaseException:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # a request the core still holds can make the exit itself wait
    """)
    p = _in_child(runtime, code)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("ok"), p.stdout + p.stderr[-3000:] + _log(repo)
    return p.stdout


@official
def test_del_of_response_and_array_is_the_fix(repo, runtime):
    _engine_script(runtime, repo, """
        meta = e.model_metadata("simple")
        assert [(t.name, t.datatype, t.shape) for t in meta.inputs] == [("INPUT", "FP32", (4,))]
        x = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
        resp = e.infer("simple", {"INPUT": x})
        np.testing.assert_allclose(resp.outputs()["OUTPUT"], x @ W, rtol=1e-6)
        view = resp.output_view("OUTPUT")  # over the response's memory, as np.from_dlpack gives
        np.testing.assert_allclose(np.asarray(view), x @ W, rtol=1e-6)
        del view
        resp.release()
        del resp
        t0 = time.monotonic()
        assert e.stop() is None
        assert time.monotonic() - t0 < 5  # before the exit timeout (exit_timeout_s=5): nothing held the model
    """)


@official
def test_errors_keep_nothing(repo, runtime):
    _engine_script(runtime, repo, """
        try:
            e.infer("no_such_model", {"INPUT": np.zeros(4, np.float32)})
            raise AssertionError("no error")
        except EngineError as err:
            assert err.code == "NOT_FOUND" and err.__context__ is None, (err.code, str(err))
        # An error response: the bindings tie it into a cycle with its error; the engine cuts
        # it, so stop() is clean without the cyclic GC's help.
        gc.disable()
        try:
            e.infer("simple", {"INPUT": np.array([-1e7, 0, 0, 0], np.float32)})
            raise AssertionError("no error")
        except EngineError as err:
            assert "asked for an error" in str(err) and err.__context__ is None
        assert e.stop() is None
    """)


@official
def test_a_request_refused_at_submission_keeps_its_model_loaded(repo, runtime):
    """Found here, in the bindings themselves (plain ``Model.infer`` does the same): a request
    the core refuses at submission (an unknown input name) is never deleted, so it holds its
    model and ``stop()`` waits out exit_timeout, as in server#8755. The engine passes that on
    (it is what a user's process sees); the capi engine deletes such a request and stops clean."""
    _engine_script(runtime, repo, """
        try:
            e.infer("simple", {"WRONG": np.zeros(4, np.float32)})
            raise AssertionError("no error")
        except EngineError as err:
            assert err.code == "INVALID_ARG" and "WRONG" in str(err) and err.__context__ is None
        gc.collect()
        message = e.stop()
        assert message and "Exit timeout expired" in message, message
    """, exit_timeout_s=2)


@official
def test_explicit_load_unload(repo, runtime):
    _engine_script(runtime, repo, """
        assert e.model_states().get("simple") != "READY"
        e.load_model("simple")
        assert e.model_ready("simple") and e.model_states()["simple"] == "READY"
        e.unload_model("simple")
        deadline = time.monotonic() + 30
        while e.model_states()["simple"] in ("READY", "UNLOADING"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert e.stop() is None
    """, model_control="explicit")


@official
def test_lane_keeps_requests_in_flight_under_gevent(runtime, repo):
    """With Locust's monkey-patching in force, the lane's requests overlap (not one at a time),
    every completion is counted, and the server stops cleanly after the lane."""
    code = textwrap.dedent(f"""
        import locust, gevent, time, numpy as np
        from rig.worker.engines.base import ServerOptions
        from rig.worker.engines.official import OfficialEngine
        e = OfficialEngine({runtime.core_library!r})
        e.start(ServerOptions(model_repository={str(repo / 'models')!r}, backend_directory={runtime.backend_dir!r},
                              exit_timeout_s=5))
        while not e.model_ready("simple"):
            time.sleep(0.01)
        lane = e.lane("simple", {{"INPUT": np.ones(4, np.float32)}}, in_flight=4)
        peak = 0
        lane.start_closed()
        got, errors = 0, 0
        end = time.monotonic() + 2
        gap, last = 0.0, time.monotonic()
        while time.monotonic() < end:
            if lane.stats()["completed"] == got:
                try:  # a busy machine may hold every request past the wait: look again
                    gevent.socket.wait_read(lane.fileno(), timeout=0.05)
                except OSError:
                    pass
            peak = max(peak, lane.stats()["in_flight"])
            lat, err = lane.drain()
            got += lat.size; errors += err
            if lat.size or err:
                gap, last = max(gap, time.monotonic() - last), time.monotonic()
        assert lane.stop(30)
        lat, err = lane.drain()
        got += lat.size; errors += err
        s = lane.stats()
        assert s["completed"] == got and errors == 0 and s["in_flight"] == 0, (s, got)
        assert peak >= 2, peak
        lane.close()
        assert e.stop() is None
        print("ok", got, peak, f"longest gap {{gap * 1000:.0f}} ms")
    """)
    p = _in_child(runtime, code)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr[-3000:]
    print(p.stdout.strip().splitlines()[-1])


@official
def test_bindings_that_do_not_fit_the_core_are_refused_in_one_line(tmp_path, runtime):
    """A real shared library that exports one C API function stands in for a core too old."""
    src = tmp_path / "core.c"
    src.write_text("#include <stdint.h>\n"
                   "void* TRITONSERVER_ApiVersion(uint32_t* a, uint32_t* b) { *a = 1; *b = 1; return 0; }\n")
    lib = tmp_path / "libtritonserver.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    code = ("from rig.worker.engines.official import loader\n"
            f"try:\n    loader.load({str(lib)!r})\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    p = _in_child(runtime, code)
    print(p.stdout)
    assert p.stdout.startswith("EngineError"), p.stdout + p.stderr
    assert ("do not fit" in p.stdout and "C API 1.1" in p.stdout) or "placeholder" in p.stdout
