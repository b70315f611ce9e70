#!/usr/bin/env python3
"""Client-side lifecycle scenarios of issue 28, measured through the rig's engines driven by a
script (no cycle code), each trial a fresh process in a process group of its own.

* ``stop-while-loading`` (core#324): explicit model control, the model's ``initialize`` sleeps
  ``--load-sleep`` s; its load runs in a thread and ``stop()`` is called once ``initialize``
  has begun. (In ``none`` mode ``start()`` itself, ``TRITONSERVER_ServerNew``, blocks until the
  model is loaded: there is no server to stop yet.)
* ``stop-in-flight`` (L0_lifecycle test_shutdown_dynamic): one instance that sleeps
  ``--delay-ms`` per execute, ``--in-flight`` requests submitted at once, ``stop()`` while the
  first executes; each request answered, failed (its message) or lost (no callback at all).
* ``refused-request`` (found here): ``--refused`` requests with an unknown input name, memory
  before and after (tracemalloc, RSS, live objects by type), then ``stop()``; ``--refused 0`` is
  the negative control.
* ``reload`` (server#6223): the server stays up (explicit control); the model is unloaded and
  loaded ``--reloads`` times, one request each; worker RSS, fds, threads, stubs, stub RSS,
  backend regions, /dev/shm bytes and the host's Shmem per reload, with least-squares slopes.
  ``--leak shm`` writes a 1 MiB /dev/shm file in each ``initialize``; ``--leak heap`` keeps
  1 MiB on the model object (it dies with the stub).
* ``memory`` (server#8218): ``--requests`` sequential ``infer()``, tracemalloc and RSS every
  1,000; slope per 1,000 requests after the first 2,000.

Each prints a table row per trial (the stubs see the clock the client sees: markers carry
CLOCK_MONOTONIC). Examples::

    python benchmarks/scenarios_client.py stop-while-loading --runtime 0.5.10
    bash tests/sandbox/official.sh --run python benchmarks/scenarios_client.py reload --engine tritonserver
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from scenarios_client_trial import LEAK_PREFIX, MODEL, Trial, markers, slope


def stop_while_loading(t: Trial) -> dict:
    from rig.common import probes

    t.start(explicit=True, load_sleep_s=t.a.load_sleep)
    box: dict = {}

    def load():
        try:
            t.eng.load_model(MODEL)
            box["load"] = "ok"
        except Exception as e:  # noqa: BLE001
            box["load"] = f"error: {e}"
        box["load_end"] = time.monotonic()

    th = threading.Thread(target=load, daemon=True)
    th.start()
    deadline = time.monotonic() + 60
    while not markers(t.marks, "init_start") and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    regions = t.regions()
    t0 = time.monotonic()
    err = t.raw_stop()
    t1 = time.monotonic()
    r = {"stop_s": round(t1 - t0, 3), "stop_error": err, "load_running_at_stop_return": th.is_alive(),
         "stubs_after_stop": len(t.stubs())}
    th.join(t.a.load_sleep + t.a.exit_timeout + 10)
    r["load"] = box.get("load", "never returned")
    r["load_end_vs_stop_s"] = round(box["load_end"] - t1, 3) if "load_end" in box else None
    deadline = time.monotonic() + t.a.load_sleep + 10
    while (t.stubs() or not markers(t.marks, "finalize")) and time.monotonic() < deadline:
        time.sleep(0.05)
    ie, fin = markers(t.marks, "init_end"), markers(t.marks, "finalize")
    r.update(init_end_vs_stop=[round(v - t1, 2) for v in ie], finalize_vs_stop=[round(v - t1, 2) for v in fin],
             stubs_later=len(t.stubs()), shm_left=len(probes.shm_regions_present(regions)))
    return r


def stop_in_flight(t: Trial) -> dict:
    t.start(explicit=False, delay_ms=t.a.delay_ms)
    done: dict[int, tuple[float, str | None]] = {}

    def cb(i):
        def f(resp, err):
            if resp is not None:
                resp.release()
            done[i] = (time.monotonic(), None if err is None else str(err))
        return f

    refused = 0
    for i in range(t.a.in_flight):
        try:
            t.eng.infer_async(MODEL, t.x(), cb(i))
        except Exception as e:  # noqa: BLE001
            done[i] = (time.monotonic(), f"refused: {e}")
            refused += 1
    time.sleep(min(0.25, t.a.delay_ms / 2000))
    t0 = time.monotonic()
    err = t.raw_stop()
    t1 = time.monotonic()
    at_return = dict(done)
    deadline = t1 + t.a.in_flight * t.a.delay_ms / 1000 + 5
    while len(done) < t.a.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    msgs: dict[str, int] = {}
    for _, m in done.values():
        if m:
            msgs[m[:120]] = msgs.get(m[:120], 0) + 1
    fin = markers(t.marks, "finalize")
    return {"stop_s": round(t1 - t0, 3), "stop_error": err,
            "answered_before_return": sum(1 for v in at_return.values() if v[1] is None),
            "failed_before_return": sum(1 for v in at_return.values() if v[1]),
            "answered": sum(1 for v in done.values() if v[1] is None),
            "failed": sum(1 for v in done.values() if v[1]), "lost": t.a.in_flight - len(done),
            "messages": msgs, "finalize_vs_stop": [round(v - t1, 2) for v in fin],
            "stubs_after": len(t.stubs())}


def _objects() -> dict[str, int]:
    import gc

    counts: dict[str, int] = {}
    for o in gc.get_objects():
        n = type(o).__name__
        if "Request" in n or "Response" in n or "Tensor" in n:
            counts[n] = counts.get(n, 0) + 1
    return counts


def refused_request(t: Trial) -> dict:
    import gc
    import tracemalloc

    import numpy as np

    from rig.common import probes
    from rig.worker.engines.base import EngineError

    t.start(explicit=False)
    t.eng.infer(MODEL, t.x()).release()
    bad = {"BOGUS": np.ones(4, np.float32)}
    tracemalloc.start()
    gc.collect()
    obj0, samples = _objects(), []
    msgs: dict[str, int] = {}
    step = max(t.a.refused // 10, 1)
    for i in range(t.a.refused + 1):
        if i % step == 0:
            gc.collect()
            samples.append((i, tracemalloc.get_traced_memory()[0], probes.process_stats()["rss_bytes"]))
        if i == t.a.refused:
            break
        try:
            t.eng.infer(MODEL, bad, 10).release()
            msgs["accepted"] = msgs.get("accepted", 0) + 1
        except EngineError as e:
            msgs[str(e)[:120]] = msgs.get(str(e)[:120], 0) + 1
    obj1 = _objects()
    tracemalloc.stop()
    grown = {k: obj1.get(k, 0) - obj0.get(k, 0) for k in set(obj0) | set(obj1) if obj1.get(k, 0) != obj0.get(k, 0)}
    xs = [s[0] for s in samples]
    t0 = time.monotonic()
    err = t.raw_stop()
    t1 = time.monotonic()
    fin = markers(t.marks, "finalize")
    return {"refused": t.a.refused, "messages": msgs, "traced_per_request_b": _r(slope(xs, [s[1] for s in samples])),
            "rss_per_request_b": _r(slope(xs, [s[2] for s in samples])), "objects_grown": grown,
            "stop_s": round(t1 - t0, 3), "stop_error": err,
            "finalize_before_return": sum(1 for v in fin if v <= t1)}


def _r(v):
    return None if v is None else round(v, 1)


def _shm_bytes(pattern: str) -> int:
    return sum(p.stat().st_size for p in Path("/dev/shm").glob(pattern) if p.is_file())


def _ours_present(seen: set[str], now: set[str]) -> set[str]:
    """Backend regions this trial's processes ever mapped that are still in /dev/shm."""
    from rig.common import probes

    seen |= now
    return probes.shm_regions_present(seen)


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def reload(t: Trial) -> dict:
    from rig.common import probes

    t.start(explicit=True, leak=t.a.leak)
    rows, seen = [], set()
    for k in range(t.a.reloads + 1):
        if k:
            t.eng.unload_model(MODEL)
            deadline = time.monotonic() + 60
            while (t.stubs() or t.eng.model_states().get(MODEL) in ("READY", "UNLOADING")) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
        t.eng.load_model(MODEL)
        t.eng.infer(MODEL, t.x()).release()
        st, stubs = probes.process_stats(), t.stubs()
        rows.append({"rss": st["rss_bytes"], "fds": st["fds"], "threads": st["threads"], "stubs": len(stubs),
                     "stub_rss": probes.total_rss(stubs), "regions": len(t.regions()),
                     "regions_present": len(_ours_present(seen, t.regions())),
                     "leak_files_bytes": _shm_bytes(LEAK_PREFIX + "*"), "host_shmem": _meminfo("Shmem")})
    t0 = time.monotonic()
    err = t.raw_stop()
    stop_s = time.monotonic() - t0
    xs = list(range(len(rows)))[1:]  # the first load is the baseline
    out = {f"slope_{key}": _r(slope(xs, [r[key] for r in rows[1:]])) for key in rows[0]}
    out.update(first=rows[0], last=rows[-1], stop_s=round(stop_s, 3), stop_error=err,
               finalize=len(markers(t.marks, "finalize")), loads=len(markers(t.marks, "init_end")))
    return out


def memory(t: Trial) -> dict:
    import tracemalloc

    from rig.common import probes

    t.start(explicit=False)
    x = t.x()
    tracemalloc.start()
    samples, t0 = [], time.monotonic()
    for i in range(t.a.requests + 1):
        if i % 1000 == 0:
            samples.append((i / 1000, tracemalloc.get_traced_memory()[0], probes.process_stats()["rss_bytes"]))
        if i < t.a.requests:
            t.eng.infer(MODEL, x).release()
    rate = t.a.requests / (time.monotonic() - t0)
    tracemalloc.stop()
    tail = [s for s in samples if s[0] >= 2]
    t1 = time.monotonic()
    err = t.raw_stop()
    return {"requests": t.a.requests, "infer_per_s": round(rate),
            "traced_per_1k_b": _r(slope([s[0] for s in tail], [s[1] for s in tail])),
            "rss_per_1k_b": _r(slope([s[0] for s in tail], [s[2] for s in tail])),
            "traced_growth_b": samples[-1][1] - samples[2][1], "rss_growth_b": samples[-1][2] - samples[2][2],
            "stop_s": round(time.monotonic() - t1, 3), "stop_error": err}


SCENARIOS = {"stop-while-loading": stop_while_loading, "stop-in-flight": stop_in_flight,
             "refused-request": refused_request, "reload": reload, "memory": memory}


def child(a) -> None:
    t = Trial(a)
    r = SCENARIOS[a.scenario](t)
    r["triton"] = t.eng.server_version() if a.engine == "capi" else t.rt.triton_version
    print(json.dumps(r), flush=True)
    if not a.no_close:
        t.eng.close()  # after the figure is out: a teardown crash must not lose it
    print(json.dumps({"teardown": "ok"}), flush=True)
    os._exit(0)


# ---------------------------------------------------------------- the parent: trials in fresh processes

def trial(argv: list[str], env: dict, timeout: float) -> dict:
    from rig.common import probes

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, __file__, *argv, "--child"], stdout=out, stderr=err, env=env,
                             start_new_session=True)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        left = len(probes.stubs_in_group(p.pid))
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        probes.remove_shm_regions(probes.orphaned_shm_regions())
        for f in Path("/dev/shm").glob(LEAK_PREFIX + "*"):
            f.unlink(missing_ok=True)
        out.seek(0)
        err.seek(0)
        r: dict = {}
        for line in out.read().splitlines():
            if line.startswith("{"):
                r.update(json.loads(line))
        r.setdefault("teardown", f"died rc={rc}: {err.read().strip()[-200:]}")
        r["stubs_left_at_exit"] = left
        return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", choices=SCENARIOS)
    ap.add_argument("--engine", default="auto", help="capi, tritonserver or auto (both where the bindings import)")
    ap.add_argument("--runtime", default="0.7.0", help="embedded runtime (0.7.0: Triton 2.51.0; 0.5.10: 2.48.0)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--exit-timeout", type=int, default=5)
    ap.add_argument("--load-sleep", type=float, default=3.0)
    ap.add_argument("--delay-ms", type=float, default=500.0)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--refused", type=int, default=1000)
    ap.add_argument("--reloads", type=int, default=50)
    ap.add_argument("--leak", choices=("none", "shm", "heap"), default="none")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--timeout", type=float, default=400, help="per trial (s)")
    ap.add_argument("--no-close", action="store_true", help="skip the engine's close() (ServerDelete)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
    from rig.parent import runtime
    from rig.worker.engines.official import loader

    rt = runtime.resolve(a.runtime, log=print)
    engines = ["capi", "tritonserver"] if a.engine == "auto" else a.engine.split(",")
    if "tritonserver" in engines and loader.bindings_library() is None:
        print("tritonserver: skipped, no bindings here (run it in the sandbox)")
        engines.remove("tritonserver")
    print(f"# {a.scenario}, runtime {rt.name} (Triton {rt.triton_version}), exit_timeout {a.exit_timeout} s")
    for eng in engines:
        for k in range(a.repeats):
            r = trial([a.scenario, *_own_args(a), "--engine", eng], rt.worker_env(), a.timeout)
            print(f"{eng} run {k + 1}: {json.dumps(r)}")
    return 0


def _own_args(a) -> list[str]:
    out = ["--runtime", a.runtime]
    for key in ("exit_timeout", "load_sleep", "delay_ms", "in_flight", "refused", "reloads", "leak", "requests"):
        out += ["--" + key.replace("_", "-"), str(getattr(a, key))]
    return out + (["--no-close"] if a.no_close else [])


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
