"""Streaming (decoupled) models, measured per response through both engines.

The model (``tests/corpus/streams_tokens``, written the way a team writes a token streamer)
answers each request with 3 responses 30 ms apart, the first 30 ms after the request arrives,
then the final flag alone; a variant of it (``tokens`` 0, built here) thinks for 30 ms and ends
with the final flag alone, no data: answered all the same. The rig must show, per window, the
time to the first response, the gaps between responses, and the responses per request; the
latency (``histogram``) stays the time to the final flag. Soaked as a user would:

    rig soak --model-repository R --workload steady --users 2 --workload-seconds 2 --cycles 1

through ``--engine capi`` here, and the official engine's runs marked ``official`` (CI runs
them in the sandbox: ``bash tests/sandbox/official.sh -- tests/e2e/test_streaming.py``). The lanes
are also driven directly (native, PyLane), and the store, report and gate read the result.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import pandas as pd
import pytest

from helpers import ROOT, cycles, rig
from rig.worker.engines.official import loader

CORPUS = ROOT / "tests" / "corpus"
MODEL = CORPUS / "streams_tokens" / "streams_tokens"
DELAY_US = 30_000  # the model's token_delay_ms, in us
AT_LEAST = 7  # requests each lane case ends before it stops (the entries case: two rounds and one)
SOAK = ("--workload", "steady", "--users", "2", "--workload-seconds", "2", "--cycles", "1")

_OFFICIAL = loader.bindings_library() is not None
_NO_BINDINGS = ("the tritonserver bindings are not installed here; run these tests in the sandbox: "
                "bash tests/sandbox/official.sh -- tests/e2e/test_streaming.py")
ENGINES = [pytest.param("capi", marks=pytest.mark.slow),
           pytest.param("tritonserver", marks=[pytest.mark.slow, pytest.mark.official,
                                               pytest.mark.skipif(not _OFFICIAL, reason=_NO_BINDINGS)])]
LANES = {"capi": "native", "tritonserver": "asyncio"}


def repository(root, name: str = "streams_tokens", tokens: int = 3):
    """A repository holding the streamer as ``name``, sending ``tokens`` responses a request."""
    target = root / name
    shutil.copytree(MODEL, target, ignore=shutil.ignore_patterns("__pycache__"))
    config = (target / "config.pbtxt").read_text()
    config = config.replace('name: "streams_tokens"', f'name: "{name}"')
    config = config.replace('key: "tokens" value: { string_value: "3" }',
                            f'key: "tokens" value: {{ string_value: "{tokens}" }}')
    (target / "config.pbtxt").write_text(config)
    return root


def soak(tmp_path, engine: str, repo, results) -> tuple[pd.Series, pd.DataFrame]:
    p = rig("soak", "--model-repository", str(repo), "--engine", engine, *SOAK, "--results", str(results),
            timeout=400)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    c = cycles(results)
    run = c.sort_values("started_at").iloc[-1]
    w = pd.read_parquet(results / "windows")
    print(p.stdout.splitlines()[-12:])
    return run, w[w.run_id == run.run_id]


def merged(w: pd.DataFrame) -> dict:
    """The windows' streaming figures, merged exactly (``frames.streaming``: one point here)."""
    from rig.analysis import frames

    s = frames.streaming(w, by=[])
    assert len(s) == 1, s
    return s.iloc[0].to_dict()


def within(value, target) -> bool:
    """A measured delay of the model's: not below it (less a tenth, for the jitter of a gap between
    two arrivals), and under twice it (what the rig and a busy host add)."""
    return value is not None and 0.9 * target <= value < 2 * target


# ---------------------------------------------------------------- soaks, both engines

@pytest.mark.parametrize("engine", ENGINES)
def test_a_streaming_model_is_measured_per_response(tmp_path, engine):
    repo = repository(tmp_path / "repo")
    row, w = soak(tmp_path, engine, repo, tmp_path / "results")
    assert row.outcome == "clean" and row.load_outcome == "ok", row.detail
    assert row.lane == LANES[engine]
    assert int(w.errors.sum()) == 0 and int(w.requests.sum()) == row.requests > 0  # each request in a window
    s = merged(w)
    print({k: s[k] for k in ("first_p50_us", "first_p99_us", "gap_p50_us", "gap_p99_us", "responses_per_request")})
    # The first token comes 30 ms after the request, each next one 30 ms after the last.
    assert within(s["first_p50_us"], DELAY_US), s
    assert within(s["gap_p50_us"], DELAY_US), s
    assert s["first_from"].startswith("HDR") and s["gap_from"].startswith("HDR")
    # Every request: 3 responses with data, then the final flag; each window's count is its own.
    assert (w.responses_per_request == 3.0).all(), w.responses_per_request.tolist()
    assert (w.responses == 3 * w.requests).all()
    assert s["responses_per_request"] == 3.0
    # The latency is still the time to the final flag: three tokens' worth.
    assert (w.p50_us > 2.5 * DELAY_US).all(), w.p50_us.tolist()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_request_answered_by_the_final_flag_alone_counts_as_answered(tmp_path, engine):
    repo = repository(tmp_path / "repo", "ends_quietly", tokens=0)
    row, w = soak(tmp_path, engine, repo, tmp_path / "results")
    assert row.outcome == "clean", row.detail
    # Answered: no error, no timeout, no wrong output under load.
    assert int(w.errors.sum()) == 0 and int(w.timeouts.fillna(0).sum()) == 0
    assert int(w.requests.sum()) == row.requests > 0 and int(w.bad_outputs.fillna(0).sum()) == 0
    assert row.errors == 0 and row.timeouts == 0
    # The reference request before the load has no output to hold the load to: its verdict is
    # rig.worker.outputs' (see the report of this change), never a failed or unanswered request.
    assert row.load_outcome == "ok", row.detail
    assert (w.responses == 0).all() and (w.responses_per_request == 0.0).all()
    assert w.gap_histogram.isna().all() and w.gap_p50_us.isna().all()
    # Its first response is the final flag: 30 ms of thought.
    s = merged(w)
    assert within(s["first_p50_us"], DELAY_US), s
    assert s["responses_per_request"] == 0.0


# ---------------------------------------------------------------- the lanes, directly

CHILD = textwrap.dedent(r'''
    import json, os, shutil, sys, time
    from pathlib import Path
    import numpy as np
    from rig.parent import repository, runtime
    from rig.worker.engines.capi import lane as fastpath
    from rig.worker.engines.base import ServerOptions
    from rig.worker.engines.capi import CapiEngine
    from rig.worker.load.lanes import PyLane

    scenario, work, exit_timeout = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    from rig.contract.runtime import from_dict as runtime_from_dict
    rt = runtime_from_dict(json.loads(sys.argv[4]))
    repo = work / "repo"
    repo.mkdir()
    repository.render(repository.ModelSpec(), repo)
    for name, tokens in (("streams_tokens", 3), ("ends_quietly", 0)):
        shutil.copytree(MODEL_DIR, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        config = (repo / name / "config.pbtxt").read_text()
        config = config.replace('"streams_tokens"', f'"{name}"').replace('string_value: "3"', f'string_value: "{tokens}"')
        (repo / name / "config.pbtxt").write_text(config)
    engine = CapiEngine(rt.core_library)
    engine.start(ServerOptions(str(repo), rt.backend_dir, exit_timeout_s=exit_timeout,
                               log_file=str(work / "server.log")))
    out = {"shm_regions": []}
    X = np.arange(4, dtype=np.float32)

    def run(lane, n=AT_LEAST):  # a closed loop until n requests have ended (60 s at most)
        lane.start_closed()
        deadline = time.monotonic() + 60
        while sum(lane.stats()[k] for k in ("completed", "errors")) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped = lane.stop(10)
        lat, errors = lane.drain()
        got = lane.stream()
        r = {"stopped": stopped, "n_lat": int(lat.size), "errors": errors, "stream": got is not None}
        if got is not None:
            first, gaps, counts = got
            r.update(n_first=int(first.size), n_gaps=int(gaps.size), counts=sorted(set(counts.tolist())),
                     first_p50_ms=float(np.median(first)) / 1e6 if first.size else None,
                     gap_p50_ms=float(np.median(gaps)) / 1e6 if gaps.size else None,
                     lat_p50_ms=float(np.median(lat)) / 1e6)
        r["again"] = lane.stream()  # taken once
        lane.close()
        return r

    out["decoupled"] = [engine.decoupled(m) for m in ("streams_tokens", "numpy")]
    out["native"] = run(fastpath.NativeLane(engine, "streams_tokens", {"INPUT0": X}, in_flight=2))
    out["native_quiet"] = run(fastpath.NativeLane(engine, "ends_quietly", {"INPUT0": X}, in_flight=2))
    out["native_numpy"] = run(fastpath.NativeLane(engine, "numpy", {"INPUT": X}, in_flight=2))
    out["python"] = run(PyLane(engine, "streams_tokens", {"INPUT0": X}, in_flight=2))
    out["python_quiet"] = run(PyLane(engine, "ends_quietly", {"INPUT0": X}, in_flight=2))
    r = engine.infer("ends_quietly", {"INPUT0": X})
    out["infer_quiet"] = {"type": type(r).__name__, "outputs": r.outputs()}
    r = engine.infer("streams_tokens", {"INPUT0": X})
    out["infer_tokens"] = r.outputs()["OUTPUT0"].tolist()  # the latest response: the third token
    r.release()
    out["server_stop_error"] = engine.stop()
    engine.close()
    print("RESULT " + json.dumps(out), flush=True)
''').replace("MODEL_DIR", repr(str(MODEL))).replace("AT_LEAST", str(AT_LEAST))


@pytest.mark.slow
def test_lanes_time_each_response_of_a_stream(tmp_path):
    from test_fastpath import OK, WHY, _child

    if not OK:
        pytest.skip(f"no native lanes here: {WHY}")
    out = _child(tmp_path, "lanes", source=CHILD)
    assert out["decoupled"] == [True, False]
    for key in ("native", "python"):
        r = out[key]
        assert r["stopped"] is True and r["errors"] == 0 and r["stream"], r
        # one first response and one count per answered request, two gaps each (every request
        # ended before the stop returned)
        assert r["n_first"] == r["n_lat"] >= AT_LEAST and r["n_gaps"] == 2 * r["n_lat"], r
        assert r["counts"] == [3], r
        assert within(r["first_p50_ms"], 30) and within(r["gap_p50_ms"], 30), r
        assert r["lat_p50_ms"] >= 3 * 0.9 * DELAY_US / 1000, r  # three tokens' worth
        assert r["again"] is None
    for key in ("native_quiet", "python_quiet"):
        r = out[key]
        assert r["stopped"] is True and r["errors"] == 0 and r["n_lat"] >= AT_LEAST, r
        assert r["n_first"] == r["n_lat"] and r["n_gaps"] == 0 and r["counts"] == [0], r
        assert within(r["first_p50_ms"], 30), r
    # A model that does not stream: latencies only, nothing more kept.
    r = out["native_numpy"]
    assert r["n_lat"] >= AT_LEAST and r["errors"] == 0 and r["stream"] is False
    assert out["infer_quiet"] == {"type": "EmptyResponse", "outputs": {}}
    assert out["infer_tokens"] == [2.0, 3.0, 4.0, 5.0]
    assert out["server_stop_error"] is None


OFFICIAL_CHILD = textwrap.dedent(r'''
    import json, shutil, sys, time
    from pathlib import Path
    import numpy as np
    from rig.worker.engines.base import ServerOptions
    from rig.worker.engines.official import OfficialEngine

    work, core, backends = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    repo = work / "repo"
    repo.mkdir()
    shutil.copytree(MODEL_DIR, repo / "streams_tokens", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "echo" / "1").mkdir(parents=True)
    (repo / "echo" / "config.pbtxt").write_text(ECHO_CONFIG.replace("LOG", str(work / "seen.txt")))
    (repo / "echo" / "1" / "model.py").write_text(ECHO_MODEL)
    e = OfficialEngine(core)
    e.start(ServerOptions(model_repository=str(repo), backend_directory=backends, exit_timeout_s=5))
    deadline = time.monotonic() + 60
    while not (e.model_ready("streams_tokens") and e.model_ready("echo")):
        assert time.monotonic() < deadline, "models not ready"
        time.sleep(0.05)
    out = {"decoupled": [e.decoupled("streams_tokens"), e.decoupled("echo")]}

    def run(lane, n=AT_LEAST):  # a closed loop until n requests have ended (60 s at most)
        lane.start_closed()
        deadline = time.monotonic() + 60
        while sum(lane.stats()[k] for k in ("completed", "errors")) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped = lane.stop(10)
        lat, errors = lane.drain()
        got = lane.stream()
        r = {"stopped": stopped, "n_lat": int(lat.size), "errors": errors, "stream": got is not None}
        if got is not None:
            first, gaps, counts = got
            r.update(n_first=int(first.size), n_gaps=int(gaps.size), counts=sorted(set(counts.tolist())),
                     first_p50_ms=float(np.median(first)) / 1e6, gap_p50_ms=float(np.median(gaps)) / 1e6)
        lane.close()
        return r

    X = np.arange(4, dtype=np.float32)
    out["tokens"] = run(e.lane("streams_tokens", {"INPUT0": X}, in_flight=2))
    entries = [{"INPUT": np.full(n, v, dtype=np.float32)} for n, v in ((4, 0), (2, 1), (3, 2))]
    (work / "seen.txt").write_text("")
    out["entries"] = run(e.lane("echo", entries, in_flight=1))
    seq = [[int(a), int(float(b))] for a, b in (l.split() for l in (work / "seen.txt").read_text().splitlines())]
    out["seen_first"] = seq[:6]
    out["seen_cycled"] = all(seq[k] == seq[k % 3] for k in range(len(seq)))
    out["seen_n"] = len(seq)
    out["stop_error"] = e.stop()
    print("RESULT " + json.dumps(out), flush=True)
''')


@pytest.mark.slow
@pytest.mark.official
@pytest.mark.skipif(not _OFFICIAL, reason=_NO_BINDINGS)
def test_the_official_lane_times_each_response_and_cycles_its_entries(tmp_path, runtime):
    from test_fastpath import ECHO_CONFIG, ECHO_MODEL

    source = (OFFICIAL_CHILD.replace("MODEL_DIR", repr(str(MODEL))).replace("AT_LEAST", str(AT_LEAST))
              .replace("ECHO_CONFIG", repr(ECHO_CONFIG)).replace("ECHO_MODEL", repr(ECHO_MODEL)))
    with tempfile.TemporaryFile("w+") as f:
        proc = subprocess.Popen([sys.executable, "-c", source, str(tmp_path), runtime.core_library,
                                 runtime.backend_dir], stdout=f, stderr=subprocess.STDOUT,
                                env=runtime.worker_env(), start_new_session=True)
        try:
            proc.wait(timeout=300)
        finally:
            try:  # stubs a failed run left behind go with their group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        f.seek(0)
        text = f.read()
    results = [json.loads(line[len("RESULT "):]) for line in text.splitlines() if line.startswith("RESULT ")]
    assert results, text[-4000:]
    out = results[0]
    print(out)
    assert out["decoupled"] == [True, False]
    r = out["tokens"]
    assert r["stopped"] is True and r["errors"] == 0 and r["stream"], r
    assert r["n_first"] == r["n_lat"] >= AT_LEAST and r["n_gaps"] == 2 * r["n_lat"] and r["counts"] == [3], r
    assert within(r["first_p50_ms"], 30) and within(r["gap_p50_ms"], 30), r
    # Request k carries entry k mod 3, whatever its shape; a model that does not stream keeps
    # no stream figures.
    r = out["entries"]
    assert r["stopped"] is True and r["errors"] == 0 and r["stream"] is False
    assert out["seen_n"] == r["n_lat"] >= AT_LEAST
    assert out["seen_first"] == [[4, 0], [2, 1], [3, 2]] * 2 and out["seen_cycled"]
    assert out["stop_error"] is None


# ---------------------------------------------------------------- store, report, gate

@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    """One results folder: a run of the streamer, then one of the quiet variant (capi)."""
    root = tmp_path_factory.mktemp("streamed")
    res = root / "results"
    tokens, _ = soak(root, "capi", repository(root / "tokens"), res)
    quiet, _ = soak(root, "capi", repository(root / "quiet", "ends_quietly", tokens=0), res)
    return {"results": res, "tokens": tokens.run_id, "quiet": quiet.run_id}


@pytest.mark.slow
def test_the_report_shows_the_streams(streamed, tmp_path):
    p = rig("report", str(streamed["results"]), "--out", str(tmp_path / "r.html"), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    section = p.stdout.split("## Streaming", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ") and "---" not in line}
    print(section)
    assert "first response p50 µs" in section and "responses/request" in section
    assert "| 3.000 |" in rows["streams_tokens"] and "| 0 |" in rows["ends_quietly"]
    assert "Streaming" in (tmp_path / "r.html").read_text()


@pytest.mark.slow
def test_the_gate_holds_the_first_response_to_a_bound(streamed):
    res, quiet, tokens = str(streamed["results"]), streamed["quiet"], streamed["tokens"]
    p = rig("gate", res, "--baseline", quiet, "--candidate", tokens, "--max-first-response-p99-us", "20000",
            timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    fails = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and fails[0].startswith("FAIL: first response p99 at concurrency 2: "), p.stdout
    assert "> 20,000 us" in fails[0]
    assert "first response @ concurrency 2" in p.stdout and "3.00 responses/request" in p.stdout
    # the bound at the p99 the gate measured (the model's 30 ms first delay and the host's load in it)
    measured = int(re.search(r"p99 at concurrency 2: ([\d,]+) us", fails[0]).group(1).replace(",", ""))
    assert measured >= 30_000  # no first response before the model's first 30 ms delay
    ok = rig("gate", res, "--baseline", quiet, "--candidate", tokens, "--max-first-response-p99-us",
             str(measured + 1), timeout=120)  # + 1: the line rounds to the microsecond
    assert ok.returncode == 0 and "PASS" in ok.stdout, ok.stdout + ok.stderr
    bad = rig("gate", res, "--baseline", quiet, "--candidate", tokens, "--max-first-response-p99-us", "0")
    assert bad.returncode == 2 and "above 0" in bad.stderr


# ---------------------------------------------------------------- no core needed

@pytest.mark.slow  # a process of its own: the end-to-end tier
def test_windows_sink_frames_and_verdict_in_a_process_of_their_own():
    """``tests/inproc_streaming.py`` imports the load's parts (Locust, which monkey-patches its
    process for gevent): run in a process of its own, as ``test_workloads`` runs inproc_load.py.
    Its tests: a window's stream columns (null unless a request streamed), the sink carrying a
    lane's stream into its window, frames.streaming's exact merge and the gate's bound."""
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "inproc_streaming.py")], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    print(p.stdout[-3000:])
    assert p.returncode == 0 and "3 passed" in p.stdout, p.stdout[-3000:] + p.stderr[-2000:]
