"""In flight, exactly: what the server holds at once, and requests it never answers.

A lane at in_flight K must never have more than K requests inside the server (from
ServerInferAsync to the request's release), nor may the capi engine's Python paths (``infer``,
``infer_async`` under PyLane); a request that is never answered must count, once, as a timeout.
Real core and stubs, in a child per scenario (see tests/worker/test_fastpath.py, whose helpers run it).
"""

from __future__ import annotations

import textwrap

import pytest

from test_fastpath import OK, WHY, _child

pytestmark = pytest.mark.skipif(not OK, reason=f"no native lanes here: {WHY}")

# Python backend, core 2.51: an execute that returns None sends no response at all.
RETURNS_NONE = {
    "config.pbtxt": textwrap.dedent('''
        name: "returns_none"
        backend: "python"
        max_batch_size: 0
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    '''),
    "1/model.py": textwrap.dedent('''
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                for request in requests:
                    pb_utils.get_input_tensor_by_name(request, "INPUT0")
    '''),
}

CHILD = textwrap.dedent(r'''
    import json, os, sys, threading, time
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
    extra = EXTRA_MODELS = {}  # _run fills it in: files of a model "returns_none"
    repo = work / "repo"
    repo.mkdir()
    repository.render(repository.ModelSpec(), repo)
    repository.render(repository.ModelSpec(name="slow", execute_delay_ms=20), repo)
    repository.render(repository.ModelSpec(name="late", execute_delay_ms=300), repo)
    for rel, text in extra.items():
        (repo / "returns_none" / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / "returns_none" / rel).write_text(text)


    class CountingEngine(CapiEngine):
        """Counts requests from submission to the core's release of them: an upper bound of what
        the server holds (it counts from before InferenceRequestNew)."""

        def __init__(self, lib):
            super().__init__(lib)
            self.count_lock = threading.Lock()
            self.in_server = 0
            self.peak = 0

        def _submit(self, model, inputs, done, times=None, sequence=None):
            with self.count_lock:
                self.in_server += 1
                self.peak = max(self.peak, self.in_server)
            try:
                super()._submit(model, inputs, done, times, sequence)
            except EngineError:
                with self.count_lock:
                    self.in_server -= 1
                raise

        def _request_released(self, request, flags, userp):
            with self.count_lock:
                self.in_server -= 1
            super()._request_released(request, flags, userp)

        def reset_peak(self):
            with self.count_lock:
                self.peak = self.in_server


    engine = CountingEngine(rt.core_library)
    engine.start(ServerOptions(str(repo), rt.backend_dir, exit_timeout_s=exit_timeout,
                               log_file=str(work / "server.log")))
    X = np.arange(4, dtype=np.float32)
    out = {}

    out["shm_regions"] = sorted(group_shm_regions(os.getpgid(0)))

    def until(done):  # a condition the core's answers make true (60 s at most)
        deadline = time.monotonic() + 60
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)

    def lane_run(model, k, n, timeout_s=0):
        """A closed loop at in_flight k until n requests have ended (answered or not)."""
        lane = fastpath.NativeLane(engine, model, {"INPUT": X}, in_flight=k)
        lane.set_request_timeout(timeout_s)
        t = time.monotonic()
        lane.start_closed()
        until(lambda: lane.stats()["completed"] + lane.stats()["errors"] >= n)
        stopped = lane.stop(10)
        run_s = time.monotonic() - t
        lat, errors = lane.drain()
        r = {"stopped": stopped, "run_s": run_s, "stats": lane.stats(), "counters": lane.counters(),
             "n_lat": int(lat.size), "errors": errors, "messages": lane.error_messages(),
             "closed": lane.close()}
        return r

    if scenario == "peak":
        for model in ("slow", "numpy"):
            for k in (1, 2, 4):
                out[f"native_{model}_{k}"] = lane_run(model, k, AT_LEAST, timeout_s=5 if k == 4 else 0)
        # The capi engine's own paths: one infer after another, and PyLane's closed loop.
        engine.reset_peak()
        for n in range(AT_LEAST):
            engine.infer("numpy", {"INPUT": X}).release()
        out["infer"] = {"n": n + 1, "peak": engine.peak}
        from rig.worker.load.lanes import PyLane
        for k in (1, 2):
            engine.reset_peak()
            lane = PyLane(engine, "numpy", {"INPUT": X}, in_flight=k)
            lane.start_closed()
            until(lambda: lane.stats()["completed"] + lane.stats()["errors"] >= AT_LEAST)
            stopped = lane.stop(10)
            lat, errors = lane.drain()
            out[f"pylane_{k}"] = {"stopped": stopped, "n_lat": int(lat.size), "errors": errors,
                                  "peak": engine.peak}
        try:
            engine.infer("no_such_model", {"INPUT": X})
            out["refused"] = None
        except EngineError as e:
            out["refused"] = str(e)
        o = engine.infer("numpy", {"INPUT": X})
        out["infer_output"] = o.outputs()["OUTPUT"].tolist()
        o.release()
        out["pending_left"] = len(engine._pending)
        out["in_server_left"] = engine.in_server
    elif scenario == "late":
        # Every request answers after 300 ms, long past its 100 ms timeout.
        out["closed"] = lane_run("late", 1, 2, timeout_s=0.1)
        lane = fastpath.NativeLane(engine, "late", {"INPUT": X})
        lane.set_request_timeout(0.1)
        t = fastpath.now_ns()
        lane.start_open(np.array([t + 50_000_000, t + 100_000_000], dtype=np.int64))
        deadline = time.monotonic() + 10
        while not lane.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        lat, errors = lane.drain()
        out["open"] = {"stats": lane.stats(), "lat": lat.tolist(), "errors": errors,
                       "messages": lane.error_messages(), "stopped": lane.stop(10),
                       "closed": lane.close()}
    elif scenario == "unanswered":
        lane = fastpath.NativeLane(engine, "returns_none", {"INPUT0": X}, in_flight=2)
        lane.set_request_timeout(0.2)
        lane.start_closed()
        time.sleep(0.6)  # time for a wrong third send, had a timeout freed a slot
        until(lambda: lane.stats()["timeouts"] >= 2)
        lat, errors = lane.drain()
        out["closed"] = {"stats": lane.stats(), "counters": lane.counters(), "lat": lat.tolist(),
                         "errors": errors, "messages": lane.error_messages(),
                         "first_error": lane.first_error()}
        t = time.monotonic()
        out["closed"]["stopped"] = lane.stop(STOP_S)
        out["closed"]["stop_s"] = time.monotonic() - t
        out["closed"]["after_stop"] = lane.stats()
        out["closed"]["closed"] = lane.close(0.1)  # leaked: the core still holds its requests
        # Open loop: the timeout counts from the actual send, not the schedule (this one is
        # sent five seconds late: past its timeout at once, had it counted from the schedule).
        lane = fastpath.NativeLane(engine, "returns_none", {"INPUT0": X})
        lane.set_request_timeout(1.0)
        lane.start_open(np.array([fastpath.now_ns() - 5_000_000_000], dtype=np.int64))
        until(lambda: lane.stats()["submitted"] >= 1)
        time.sleep(0.1)
        out["open_early"] = lane.stats()
        until(lambda: lane.stats()["timeouts"] >= 1)
        lat, errors = lane.drain()
        out["open"] = {"stats": lane.stats(), "lat": lat.tolist(), "errors": errors,
                       "messages": lane.error_messages()}
        t = time.monotonic()
        out["open"]["stopped"] = lane.stop(STOP_S)
        out["open"]["stop_s"] = time.monotonic() - t
        out["open"]["closed"] = lane.close(0.1)
    t = time.monotonic()
    out["server_stop_error"] = engine.stop()
    out["server_stop_s"] = time.monotonic() - t
    if scenario == "unanswered":
        # The lanes leaked above hold requests the core may yet release: never free the server
        # under them (the process ends instead).
        print("RESULT " + json.dumps(out), flush=True)
        os._exit(0)
    engine.close()
    print("RESULT " + json.dumps(out), flush=True)
''')


AT_LEAST = 20  # requests each in-flight case ends before it stops (enough to fill its K slots)
STOP_S = 1.0  # the stop's timeout where requests are never answered
DELAY_S = {"slow": 0.020, "late": 0.300}  # the models' execute delays
CHILD = CHILD.replace("AT_LEAST", str(AT_LEAST)).replace("STOP_S", str(STOP_S))


def _run(tmp_path, scenario, exit_timeout=5, extra=None):
    source = CHILD.replace("EXTRA_MODELS = {}", f"EXTRA_MODELS = {extra or {}!r}")
    return _child(tmp_path, scenario, exit_timeout=exit_timeout, source=source)


@pytest.fixture(scope="module")
def peak(tmp_path_factory):
    """One server for both in-flight tests."""
    return _run(tmp_path_factory.mktemp("peak"), "peak")


@pytest.mark.slow
def test_lane_holds_exactly_its_in_flight_in_the_server(peak):
    out = peak
    for model in ("slow", "numpy"):
        for k in (1, 2, 4):
            r = out[f"native_{model}_{k}"]
            s = r["stats"]
            assert r["stopped"] is True and r["closed"] is True
            assert s["errors"] == 0 and s["timeouts"] == 0, r["messages"]
            assert s["completed"] == s["submitted"] == r["n_lat"] >= AT_LEAST > k
            assert s["peak_in_server"] == k, f"{model} at in_flight {k}: {s['peak_in_server']}"
            assert r["counters"]["peak_in_server"] == k and r["counters"]["timeouts"] == 0
    # 20 ms a request, one model instance: they queue, whatever K (no more than one per 20 ms)
    for k in (1, 2, 4):
        r = out[f"native_slow_{k}"]
        assert r["stats"]["completed"] * DELAY_S["slow"] <= r["run_s"], (k, r["stats"], r["run_s"])


@pytest.mark.slow
def test_capi_engine_paths_hold_exactly_their_in_flight(peak):
    out = peak
    assert out["infer"]["n"] == AT_LEAST and out["infer"]["peak"] == 1
    for k in (1, 2):
        r = out[f"pylane_{k}"]
        assert r["stopped"] is True and r["errors"] == 0 and r["n_lat"] >= AT_LEAST
        assert r["peak"] == k, f"PyLane at in_flight {k} had {r['peak']} in the server"
    # A request the core refuses still raises, and leaves nothing behind.
    assert out["refused"] and "no_such_model" in out["refused"]
    assert len(out["infer_output"]) == 4
    assert out["pending_left"] == 0 and out["in_server_left"] == 0
    assert out["server_stop_error"] is None


@pytest.mark.slow
def test_late_responses_count_once_as_timeouts(tmp_path):
    out = _run(tmp_path, "late")
    r = out["closed"]
    s = r["stats"]
    assert r["stopped"] is True and r["closed"] is True and s["in_flight"] == 0
    # Each request timed out at 100 ms, then came back at ~300 ms: counted once, as a timeout;
    # its slot was sent again only then (one at a time, 300 ms each).
    assert s["submitted"] >= 2 and s["submitted"] * DELAY_S["late"] <= r["run_s"], (s, r["run_s"])
    assert s["timeouts"] == s["errors"] == r["errors"] == s["submitted"]
    assert s["completed"] == 0 and s["peak_in_server"] == 1
    assert r["counters"]["timeouts"] == s["timeouts"]
    assert r["messages"] == {"no response within 0.1 s (request timeout)": s["timeouts"]}
    assert r["n_lat"] == s["timeouts"]
    o = out["open"]
    assert o["stopped"] is True and o["closed"] is True
    assert o["stats"]["submitted"] == o["stats"]["timeouts"] == o["errors"] == 2
    assert o["stats"]["completed"] == 0
    assert o["lat"] == [-100_000_000, -100_000_000], "a timed-out request's latency: minus the timeout"
    assert o["messages"] == {"no response within 0.1 s (request timeout)": 2}


@pytest.mark.slow
def test_unanswered_requests_time_out(tmp_path):
    out = _run(tmp_path, "unanswered", exit_timeout=1, extra=RETURNS_NONE)
    c = out["closed"]
    s = c["stats"]
    # Two slots, both stuck: two sends, no more (the lane never holds more than in_flight).
    assert s["submitted"] == 2 and s["completed"] == 0 and s["in_flight"] == 2
    assert s["timeouts"] == s["errors"] == c["errors"] == 2
    assert c["counters"]["timeouts"] == 2
    assert c["lat"] == [-200_000_000, -200_000_000]
    assert c["messages"] == {"no response within 0.2 s (request timeout)": 2}
    assert c["first_error"] == "no response within 0.2 s (request timeout)"
    # the stop waits out its own timeout, no longer: the stuck requests do not hold it
    assert c["stopped"] is False and 0.9 * STOP_S <= c["stop_s"] < 2 * STOP_S
    assert c["after_stop"]["timeouts"] == 2 and c["after_stop"]["errors"] == 2
    assert c["closed"] is False
    # Open loop, sent five seconds behind its schedule: not timed out 0.1 s after the send.
    assert out["open_early"]["submitted"] == 1 and out["open_early"]["timeouts"] == 0
    o = out["open"]
    assert o["stats"]["timeouts"] == o["errors"] == 1
    assert o["lat"] == [-1_000_000_000]
    assert o["messages"] == {"no response within 1 s (request timeout)": 1}
    assert o["stopped"] is False and 0.9 * STOP_S <= o["stop_s"] < 2 * STOP_S
