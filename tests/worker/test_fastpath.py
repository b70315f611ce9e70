"""Tests of the native load generator (rig.worker.engines.capi.lane) on the real core and real stubs.

The core must be loaded by a process whose LD_LIBRARY_PATH was set before it started, so each
case runs in a child interpreter (``runtime.worker_env()``) that prints one JSON line of
observations; the assertions stay here. Skipped, with the reason printed, where there is no C
compiler or no installed runtime.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

from rig.parent import runtime
from rig.worker.engines.capi import lane as fastpath
from rig.common.errors import RigError
from rig.common.procs import kill_group

OK, WHY = fastpath.available()
if not OK:
    print(f"fastpath tests skipped: {WHY}")
pytestmark = pytest.mark.skipif(not OK, reason=f"no native lanes here: {WHY}")


def _runtime():
    try:
        return runtime.resolve(None, auto_install=False)
    except RigError as e:
        print(f"skipped: {e}")
        pytest.skip(f"no Triton runtime installed: {e}")


# The child: starts a server on a fresh repository, runs one scenario, prints "RESULT {json}".
CHILD = textwrap.dedent(r'''
    import json, os, sys, time
    from pathlib import Path
    import numpy as np
    from rig.parent import repository, runtime
    from rig.worker.engines.capi import lane as fastpath
    from rig.worker.engines.base import EngineError, ServerOptions
    from rig.worker.engines.capi import CapiEngine
    from rig.common.procs import group_shm_regions

    scenario, work, exit_timeout = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    from rig.contract.runtime import from_dict as runtime_from_dict
    rt = runtime_from_dict(json.loads(sys.argv[4]))
    repo = work / "repo"
    repo.mkdir()
    repository.render(repository.ModelSpec(), repo)
    if scenario == "errors":
        repository.render(repository.ModelSpec(name="dies", fault="stub-exits"), repo)
    if scenario == "entries":
        (repo / "echo" / "1").mkdir(parents=True)
        (repo / "echo" / "config.pbtxt").write_text(ECHO_CONFIG.replace("LOG", str(work / "seen.txt")))
        (repo / "echo" / "1" / "model.py").write_text(ECHO_MODEL)
    engine = CapiEngine(rt.core_library)
    engine.start(ServerOptions(str(repo), rt.backend_dir, exit_timeout_s=exit_timeout,
                               log_file=str(work / "server.log")))
    out = {"numpy_major": int(np.__version__.split(".")[0])}
    X = np.arange(4, dtype=np.float32)

    out["shm_regions"] = sorted(group_shm_regions(os.getpgid(0)))  # the stubs' regions: the parent removes leaks

    def server_stop():
        t = time.monotonic()
        out["server_stop_error"] = engine.stop()
        out["server_stop_s"] = time.monotonic() - t

    if scenario == "closed":
        try:
            fastpath.NativeLane(engine, "no_such_model", {"INPUT": X})
        except EngineError as e:
            out["missing_model_error"] = str(e)
        lane = fastpath.NativeLane(engine, "numpy", {"INPUT": X}, in_flight=2)
        import gevent.socket
        t = time.monotonic()
        lane.start_closed()
        gevent.socket.wait_read(lane.fileno(), timeout=5)
        out["woke_s"] = time.monotonic() - t
        parts = []
        for _ in range(4):
            time.sleep(0.25)
            lat, err = lane.drain()
            parts.append(lat)
        out["stopped"] = lane.stop(10)
        out["run_ns"] = (time.monotonic() - t) * 1e9  # from the start to the last completion
        lat, err = lane.drain()
        parts.append(lat)
        lat = np.concatenate(parts)
        out["stats"] = lane.stats()
        out["n_lat"] = int(lat.size)
        out["lat_sum_ns"] = int(lat.sum())
        out["lat_min_ns"] = int(lat.min())
        out["lat_max_ns"] = int(lat.max())
        out["lat_p50_ns"] = float(np.percentile(lat, 50))
        out["first_error"] = lane.first_error()
        out["restart"] = True
        lane.start_closed()  # a stopped lane starts again (its requests are rebuilt)
        time.sleep(0.1)
        out["restart_stopped"] = lane.stop(10)
        out["restart_completed"] = lane.stats()["completed"]
        out["closed"] = lane.close()
        server_stop()
    elif scenario == "outputs":
        lane = fastpath.NativeLane(engine, "numpy", {"INPUT": X}, keep_last=True)
        lane.start_closed()
        time.sleep(0.3)
        out["stopped"] = lane.stop(10)
        out["stats"] = lane.stats()
        resp = lane.take_last_response()
        out["taken_twice"] = lane.take_last_response() is not None
        o = resp.outputs()["OUTPUT"]
        out["output"] = o.tolist()
        out["output_dtype"] = str(o.dtype)
        w = (np.arange(16, dtype=np.float32).reshape(4, 4) / 16).astype(np.float32)
        out["expected"] = (X @ w).tolist()
        out["closed"] = lane.close()
        server_stop()  # the kept response holds the model: stop waits out exit_timeout
        resp.release()
        # Let the model unload before the server is freed: on core 2.51 freeing it while the
        # model is still going away crashes the process (the order the rig's cycle follows).
        from rig.common import probes
        deadline = time.monotonic() + 15
        while probes.stubs_of(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.02)
    elif scenario == "open":
        lane = fastpath.NativeLane(engine, "numpy", {"INPUT": X})
        rate, n_late, late_ns = 400, 20, LATE_NS
        now = fastpath.now_ns()
        start = now + 50_000_000
        times = start + (np.arange(rate, dtype=np.int64) * 1_000_000_000) // rate
        late = np.full(n_late, now - late_ns, dtype=np.int64)  # already overdue by late_ns
        lane.start_open(np.concatenate([late, times]))
        while not lane.done():
            time.sleep(0.02)
        out["done_after_last_send_ms"] = (fastpath.now_ns() - int(times[-1])) / 1e6
        lat, err = lane.drain()
        lat = np.sort(lat)
        out["stats"] = lane.stats()
        out["errors"] = err
        out["n_lat"] = int(lat.size)
        out["late_min_ns"] = int(lat[-n_late]) if lat.size >= n_late else None
        out["ontime_p50_ns"] = float(np.percentile(lat[:-n_late], 50))
        out["ontime_max_ns"] = int(lat[-n_late - 1])
        out["stopped"] = lane.stop(10)
        out["closed"] = lane.close()
        server_stop()
    elif scenario == "entries":
        # Three entries of different shapes and values: which the model saw, in order.
        entries = [{"INPUT": np.full(n, v, dtype=np.float32)} for n, v in ((4, 0), (2, 1), (3, 2))]
        seen = work / "seen.txt"

        def until(lane, n):  # the lane has completed n requests (or 60 s have gone by)
            deadline = time.monotonic() + 60
            while lane.stats()["completed"] < n and time.monotonic() < deadline:
                time.sleep(0.01)

        def run(make, k, n=AT_LEAST):
            seen.write_text("")
            lane = make(k)
            lane.start_closed()
            until(lane, n)
            stopped = lane.stop(10)
            lat, err = lane.drain()
            seq = [[int(size), int(float(value))] for size, value in
                   (line.split() for line in seen.read_text().splitlines())]
            lane.close()
            kinds = sorted({tuple(e) for e in seq})
            return {"stopped": stopped, "n_lat": int(lat.size), "errors": err, "n_seen": len(seq),
                    "first": seq[:6], "kinds": kinds, "counts": [seq.count(list(k)) for k in kinds],
                    "cycled": all(seq[k] == seq[k % 3] for k in range(len(seq)))}

        from rig.worker.load.lanes import PyLane
        out["native_1"] = run(lambda k: fastpath.NativeLane(engine, "echo", entries, in_flight=k), 1)
        out["native_3"] = run(lambda k: fastpath.NativeLane(engine, "echo", entries, in_flight=k), 3)
        out["native_dict"] = run(lambda k: fastpath.NativeLane(engine, "echo", entries[1], in_flight=k), 2, 1)
        out["python_1"] = run(lambda k: PyLane(engine, "echo", entries, in_flight=k), 1)
        keep = fastpath.NativeLane(engine, "echo", entries[:2], keep_last=True)
        keep.start_closed()
        until(keep, 1)
        keep.stop(10)
        out["keep_completed"] = keep.stats()["completed"]
        r = keep.take_last_response()
        out["keep_last_output"] = r.outputs()["OUTPUT"].tolist()
        r.release()
        keep.close()
        server_stop()
    elif scenario == "errors":
        lane = fastpath.NativeLane(engine, "dies", {"INPUT": X}, in_flight=2)
        lane.start_closed()
        time.sleep(1.6)  # the stub dies at its 3rd execute; the backend notices within ~1 s
        t = time.monotonic()
        out["stopped"] = lane.stop(10)
        out["stop_s"] = time.monotonic() - t
        lat, err = lane.drain()
        out["errors"] = err
        out["n_lat"] = int(lat.size)
        out["stats"] = lane.stats()
        out["first_error"] = lane.first_error()
        out["closed"] = lane.close()
        server_stop()
    engine.close()
    print("RESULT " + json.dumps(out), flush=True)
''')


# A model that answers with its input and notes each request's size and first value in a file
# (the parameter "log"): what it saw, in the order it saw it.
ECHO_CONFIG = textwrap.dedent('''
    name: "echo"
    backend: "python"
    max_batch_size: 0
    input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
    parameters [ { key: "log" value: { string_value: "LOG" } } ]
''')
ECHO_MODEL = textwrap.dedent('''
    import json

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            config = json.loads(args["model_config"])
            self.log = config["parameters"]["log"]["string_value"]

        def execute(self, requests):
            responses = []
            with open(self.log, "a") as f:
                for request in requests:
                    x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
                    f.write(f"{x.size} {x[0]}\\n")
                    responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", x)]))
            return responses
''')
LATE_NS = 1_000_000_000  # how overdue the open loop's late requests are (longer than any on-time latency)
AT_LEAST = 7  # requests each entries case completes: two rounds of its three entries and one more
CHILD = (CHILD.replace("ECHO_CONFIG", repr(ECHO_CONFIG)).replace("ECHO_MODEL", repr(ECHO_MODEL))
         .replace("LATE_NS", str(LATE_NS)).replace("AT_LEAST", str(AT_LEAST)))


def _child(tmp_path, scenario: str, exit_timeout: int = 5, source: str = CHILD) -> dict:
    """Run ``source`` (a script like CHILD: argv scenario, work folder, exit_timeout, runtime;
    prints "RESULT {json}" with the stub regions it saw) in a child; its observations."""
    rt = _runtime()
    script = tmp_path / "child.py"
    script.write_text(source)
    work = tmp_path / scenario
    work.mkdir()
    output = work / "child.out"
    # Output to a file, not a pipe: an orphaned stub would keep a pipe open past the child.
    with open(output, "w") as f:
        proc = subprocess.Popen([sys.executable, str(script), scenario, str(work), str(exit_timeout),
                                 json.dumps(rt.to_dict())], env=rt.worker_env(), stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            text = output.read_text()
            results = [json.loads(line[len("RESULT "):]) for line in text.splitlines()
                       if line.startswith("RESULT ")]
            # what the child left in its group (a stub orphaned by a stop that ran into
            # exit_timeout), and those stubs' shared memory (a stub killed does not remove its own)
            kill_group(proc.pid, proc, set(results[0]["shm_regions"]) if results else set())
    if results:
        print(scenario, results[0])
        return results[0]
    log = work / "server.log"
    tail = log.read_text()[-2000:] if log.exists() else ""
    raise AssertionError(f"child {scenario} failed (exit {proc.returncode}):\n{text[-3000:]}\n{tail}")


# ---------------------------------------------------------------- no core needed

def test_build_is_cached():
    path = fastpath.build(log=lambda msg: None)
    assert path == fastpath.build(log=lambda msg: None)
    assert path.startswith(str(fastpath.build_dir()))
    ok, where = fastpath.available()
    assert ok and where == path


def test_build_without_a_compiler_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("RIG_HOME", str(tmp_path))  # an empty cache: it must compile
    monkeypatch.setattr(fastpath, "_compiler", lambda: None)
    with pytest.raises(RigError, match="no C compiler"):
        fastpath.build(log=lambda msg: None)


def test_bytes_inputs_are_refused():
    engine = types.SimpleNamespace(server=None)
    with pytest.raises(RigError, match="BYTES"):
        fastpath.NativeLane(engine, "m", {"TEXT": np.array([b"a", b"bc"], dtype=np.object_)})


def test_lane_needs_a_running_server():
    engine = types.SimpleNamespace(server=None)
    with pytest.raises(RigError, match="no running server"):
        fastpath.NativeLane(engine, "m", {"INPUT": np.zeros(4, dtype=np.float32)})


# ---------------------------------------------------------------- real core, real stubs

@pytest.mark.slow
def test_closed_loop(tmp_path):
    exit_timeout, in_flight = 5, 2
    out = _child(tmp_path, "closed", exit_timeout=exit_timeout)
    assert "no_such_model" in out["missing_model_error"]
    s = out["stats"]
    assert out["stopped"] is True
    assert s["in_flight"] == 0 and s["errors"] == 0 and out["first_error"] is None
    assert s["completed"] > 0
    assert s["submitted"] == s["completed"] == out["n_lat"], "every completion drained once"
    assert s["slots"] == in_flight
    # latencies in nanoseconds, each within the run; two slots are busy at most the whole run
    assert 0 < out["lat_min_ns"] <= out["lat_p50_ns"] <= out["lat_max_ns"] <= out["run_ns"]
    assert out["lat_sum_ns"] <= in_flight * out["run_ns"]
    assert out["woke_s"] < 5, "the eventfd must wake a gevent waiter (before the wait's 5 s timeout)"
    assert out["restart_stopped"] is True and out["restart_completed"] > s["completed"]
    assert out["closed"] is True
    # Nothing of the lane holds the model: the server stops without waiting out exit_timeout.
    assert out["server_stop_error"] is None
    assert out["server_stop_s"] < exit_timeout


@pytest.mark.slow
def test_outputs_delivered_and_keep_last(tmp_path):
    out = _child(tmp_path, "outputs", exit_timeout=1)
    assert out["stopped"] is True and out["stats"]["in_flight"] == 0
    assert out["taken_twice"] is False, "take_last_response hands the response over once"
    assert out["output_dtype"] == "float32" and len(out["output"]) == 4
    # The kept response holds its model: the server's stop runs into exit_timeout.
    assert out["server_stop_error"] and "timeout" in out["server_stop_error"].lower()
    # numpy 2 in these stubs returns empty outputs; the runtime gives them numpy<2 (RIG_STUB_SITE)
    assert out["stats"]["output_bytes"] == 16 * out["stats"]["completed"]
    np.testing.assert_allclose(out["output"], out["expected"], rtol=1e-6)


@pytest.mark.slow
def test_open_loop_keeps_the_schedule(tmp_path):
    out = _child(tmp_path, "open")
    s = out["stats"]
    assert out["stopped"] is True and s["in_flight"] == 0
    assert s["issued"] == s["submitted"] == s["completed"] == out["n_lat"] == 400 + 20
    assert out["errors"] == 0
    # The 20 sent late count from their scheduled time (no coordinated omission) ...
    assert out["late_min_ns"] >= LATE_NS
    # ... and the on-time ones from theirs: none carries that lateness, and the lane finished
    # its second's schedule without falling that far behind it.
    assert out["ontime_p50_ns"] <= out["ontime_max_ns"] < LATE_NS
    assert out["done_after_last_send_ms"] < LATE_NS / 1e6
    assert s["slots"] >= 2, "a free request object is made when none is free"


@pytest.mark.slow
def test_a_lane_cycles_its_entries_request_by_request(tmp_path):
    """Request k carries entry k mod N, whatever its shape: in order at one in flight, evenly at
    three (the lane hands out entries in one sequence, whichever slot sends), through the native
    lane and PyLane; one dict is one entry, sent every time."""
    out = _child(tmp_path, "entries")
    entries = [[2, 1], [3, 2], [4, 0]]  # [size, value], sorted
    for key in ("native_1", "python_1"):
        r = out[key]
        assert r["stopped"] is True and r["errors"] == 0
        assert r["n_seen"] == r["n_lat"] >= AT_LEAST, key
        assert r["first"] == [[4, 0], [2, 1], [3, 2]] * 2 and r["cycled"], key
    r = out["native_3"]
    assert r["stopped"] is True and r["errors"] == 0 and r["n_seen"] == r["n_lat"] >= AT_LEAST
    assert r["kinds"] == entries and max(r["counts"]) - min(r["counts"]) <= 1, r["counts"]
    r = out["native_dict"]
    assert r["errors"] == 0 and r["n_seen"] == r["n_lat"] > 0 and r["kinds"] == [[2, 1]]
    # The answers are the entries' own: the last one kept is of the entry its request carried.
    last = out["keep_completed"] - 1
    assert out["keep_last_output"] == [[0.0] * 4, [1.0] * 2][last % 2]


@pytest.mark.slow
def test_errors_are_counted_when_the_stub_dies(tmp_path):
    out = _child(tmp_path, "errors", exit_timeout=1)
    assert out["errors"] >= 1
    assert out["first_error"]
    assert out["stopped"] is True and out["stats"]["in_flight"] == 0
    assert out["stop_s"] < 10, "the stop's own timeout"
    assert out["closed"] is True
