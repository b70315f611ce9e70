"""The engine over the official ``tritonserver`` package, on the real embedded core.

The tests marked ``official`` need the PyPI bindings (CPython 3.12, glibc 2.39+): CI runs them
inside the Debian 13 sandbox (``bash tests/sandbox/official.sh``); elsewhere they skip with the
reason. They cover what the capi engine's tests cover: the server#8755 mechanism under every
retention policy and ``del`` as its fix, fault models, bad input, workloads (closed and open
loop, shapes, same-process restarts, unload-then-stop), and the pairing of bindings and core.
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
from rig.engines.official import loader

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
    ok, why = loader.probe(runtime)
    print(f"probe over {runtime.name}: ok={ok}: {why}")
    assert why.strip() and "\n" not in why
    if loader.bindings_library() is None:
        assert ok is False and "tritonserver" in why


@pytest.mark.slow
def test_asking_for_the_engine_where_it_cannot_load_is_one_line(tmp_path, runtime):
    if loader.probe(runtime)[0]:
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
        from rig.engines.official.loop import LoopThread, Signal
        loop = LoopThread()
        seen, done = {}, Signal()
        async def work():
            seen["thread"] = threading.get_native_id()
            await asyncio.sleep(0.2)
            done.set(42)
        ticks = []
        ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(10)])
        loop.submit(work())
        assert done.wait(5) and done.value == 42
        # the ticker (100 ms) ran to its end during the 200 ms wait: the wait yielded to the hub
        assert ticker.ready() and len(ticks) == 10, f"the hub was blocked while waiting ({len(ticks)} ticks)"
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
    res = tmp_path / "r"
    p = rig("cycle", *ENGINE, "--retain", retain, "--exit-timeout", "3", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(res).iloc[0]
    print(p.stdout)
    assert r.engine == "tritonserver" and r.outcome == outcome, r.detail
    assert r.finalize_expected == 1 and r.finalize_before_stop == before
    assert str(r.triton_version) == runtime.triton_version  # the core's own word
    assert r.outputs_ok
    if outcome == "exit_timeout":
        assert "Exit timeout expired" in r.stop_error
        assert 2.9 <= r.stop_latency_s
        assert r.finalize_after_stop == 1  # dropping the reference lets finalize run
    else:
        assert pd.isna(r.stop_error) and r.stop_latency_s < 3


def _engine_script(runtime, repo, body: str, **options) -> str:
    """Run ``body`` in a child process (the runtime's environment, as the rig's worker has it)
    with ``e``, an official engine started on ``repo`` and ready; returns its stdout."""
    opts = {"model_repository": str(repo / "models"), "backend_directory": runtime.backend_dir,
            "exit_timeout_s": 5, "log_file": str(repo / "server.log"), **options}
    code = textwrap.dedent(f"""
        import gc, os, sys, time, traceback
        import numpy as np
        from rig.engines.base import EngineError, ServerOptions
        from rig.engines.official import OfficialEngine
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
        assert time.monotonic() - t0 < 5
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
        from rig.engines.base import ServerOptions
        from rig.engines.official import OfficialEngine
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
    code = ("from rig.engines.official import loader\n"
            f"try:\n    loader.load({str(lib)!r})\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    p = _in_child(runtime, code)
    print(p.stdout)
    assert p.stdout.startswith("EngineError"), p.stdout + p.stderr
    assert ("do not fit" in p.stdout and "C API 1.1" in p.stdout) or "placeholder" in p.stdout


@official
def test_bad_input_is_one_line(tmp_path):
    p = rig("cycle", *ENGINE, "--model-repository", str(tmp_path / "nope"), "--results", str(tmp_path / "r"))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("fault, outcome", [
    ("finalize-raises", "finalize_error"), ("finalize-sleeps", "exit_timeout"),
    ("stub-exits", "exit_timeout"), ("load-fails", "load_failed")])
@official
def test_fault_models_yield_their_outcome(tmp_path, runtime, fault, outcome):
    res = tmp_path / "r"
    p = rig("cycle", *ENGINE, "--fault", fault, "--exit-timeout", "2", "--request-timeout", "5",
            "--startup-timeout", "20", "--results", str(res), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(res).iloc[0]
    assert r.outcome == outcome, (r.outcome, r.detail)
    assert r.load_outcome == ("errors" if fault == "stub-exits" else "not_measured" if fault == "load-fails" else "ok")
    if fault == "finalize-raises":
        assert r.finalize_errors == 1


def _soak(res, *args):
    p = rig("soak", "--workload", "steady", "--users", "2", "--cycles", "3", "--results", str(res), *args,
            timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return cycles(res), pd.read_parquet(res / "windows")


@official
def test_soak_with_a_workload_is_clean_and_stops_like_capi(tmp_path, runtime):
    ours, windows = _soak(tmp_path / "official", *ENGINE)
    theirs, _ = _soak(tmp_path / "capi", "--engine", "capi")
    print(ours[["cycle", "outcome", "stop_latency_s", "throughput", "detail"]].to_string())
    assert (ours.outcome == "clean").all(), ours[["outcome", "detail"]].to_string()
    assert (ours.engine == "tritonserver").all() and (ours.errors == 0).all()
    assert sorted(windows.cycle.unique()) == [1, 2, 3]
    assert (windows.requests > 0).all() and (windows.errors == 0).all()
    # the same core's stop, through either binding: within 10 %
    ratio = ours.stop_latency_s.median() / theirs.stop_latency_s.median()
    print(f"stop latency official/capi: {ratio:.3f}")
    assert 0.9 <= ratio <= 1.1


@pytest.mark.parametrize("args, outcome", [
    (("--restart", "same-process"), "clean"),
    (("--stop-strategy", "unload-then-stop"), "clean"),
    (("--retain", "last-response", "--exit-timeout", "2"), "exit_timeout"),
    (("--workload", "ramp"), "clean"),
    (("--workload", "spike"), "clean"),
])
@official
def test_workloads_restarts_and_strategies(tmp_path, runtime, args, outcome):
    p = rig("soak", *ENGINE, "--workload", "steady", "--users", "2", "--cycles", "2", "--workload-seconds", "2",
            "--allow-outcomes", outcome, "--results", str(tmp_path), *args, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    df = cycles(tmp_path)
    assert (df.outcome == outcome).all(), df[["outcome", "detail"]].to_string()
    w = pd.read_parquet(tmp_path / "windows")
    assert set(w.cycle) == {1, 2} and w.requests.sum() > 0


@official
def test_open_loop_sends_on_schedule(tmp_path, runtime):
    p = rig("soak", *ENGINE, "--workload", "steady", "--rate", "200", "--arrivals", "constant",
            "--workload-seconds", "2", "--cycles", "1", "--results", str(tmp_path), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    w = pd.read_parquet(tmp_path / "windows")
    assert (w["mode"] == "open").all() and w.requests.sum() > 0
    # 200/s for 2 s against a model that serves thousands: 400 requests, none lost
    from rig import Store

    r = Store(tmp_path).read("cycles").iloc[0]
    assert r.outcome == "clean" and 399 <= r.requests <= 401 and r.errors == 0, (r.requests, r.errors, r.workload_s)
    assert r.scheduled == r.requests and r.dropped == 0 and r.lane == "asyncio"


@official
def test_the_same_on_a_second_core(tmp_path):
    """Bindings 2.70/2.71 over Triton 2.48 as well as the default 2.51."""
    p = rig("runtime", "install", "0.5.10")
    assert p.returncode == 0, p.stderr
    p = rig("cycle", *ENGINE, "--runtime", "0.5.10", "--retain", "last-response", "--exit-timeout", "2",
            "--results", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(tmp_path).iloc[0]
    assert str(r.triton_version) == "2.48.0" and r.outcome == "exit_timeout"
    assert r.finalize_before_stop == 0 and r.finalize_after_stop == 1


def _steady_cycle(tmp_path, name: str, model: str, config_extra: str = ""):
    """``rig cycle`` on the official engine with a steady workload (2 users, 2 s) over one model
    of test_accounting's shape; returns its cycle row and its windows."""
    from test_accounting import repository

    from rig import Store

    repo = repository(tmp_path, name, model)
    if config_extra:
        cfg = repo / name / "config.pbtxt"
        cfg.write_text(cfg.read_text() + config_extra)
    res = tmp_path / "r"
    p = rig("cycle", *ENGINE, "--model-repository", str(repo), "--workload", "steady", "--users", "2",
            "--workload-seconds", "2", "--results", str(res), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    store = Store(res)
    return store.read("cycles").iloc[0], store.read("windows")


@official
def test_failed_requests_keep_their_latency_and_message_on_the_asyncio_lane(tmp_path, runtime):
    import json

    from hdrh.histogram import HdrHistogram
    from test_accounting import FAILS_EVERY_4TH_SLOWLY

    c, w = _steady_cycle(tmp_path, "quarter", FAILS_EVERY_4TH_SLOWLY)
    assert c.load_outcome == "errors" and c.errors > 0 and c.lane == "asyncio"
    (top, count), = list(json.loads(c.error_messages).items())[:1]
    assert "quarter failure" in top and count == c.errors
    failed = sum(HdrHistogram.decode(h).get_total_count() for h in w.error_histogram.dropna())
    assert failed == w.errors.sum() == c.errors and w.error_max_us.max() >= 15_000


@official
def test_outputs_are_held_to_the_models_metadata_on_the_asyncio_lane(tmp_path, runtime):
    from test_accounting import SAME_BYTES_WRONG_KIND

    c, _ = _steady_cycle(tmp_path, "kind", SAME_BYTES_WRONG_KIND)
    assert (c.outcome, c.load_outcome) == ("clean", "wrong_outputs") and c.lane == "asyncio" and c.errors == 0, c.detail
    assert 0.15 * c.requests <= c.bad_outputs <= 0.25 * c.requests


DECOUPLED = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.n = 0

    def execute(self, requests):
        for r in requests:
            self.n += 1
            sender = r.get_response_sender()
            y = pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy() * 2
            response = pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", y)])
            if self.n % 2:  # the answer, then an empty response that only says FINAL
                sender.send(response)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:  # the answer flagged FINAL itself
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


@official
def test_a_decoupled_model_is_answered_once_per_request_on_the_asyncio_lane(tmp_path, runtime):
    """The lane ends a request at the response flagged final: a separate empty final response
    must not count as a second answer, nor as a wrong one (it has no output)."""
    c, w = _steady_cycle(tmp_path, "split", DECOUPLED, "model_transaction_policy { decoupled: true }\n")
    assert c.outcome == "clean" and c.lane == "asyncio", c.detail
    assert c.requests > 100 and c.errors == 0 and c.bad_outputs == 0
    assert w.requests.sum() == c.requests
