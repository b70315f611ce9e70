#!/usr/bin/env python3
"""How Triton itself treats a model that raises in ``execute`` or never answers, with no rig code
between the API and the core: the figures behind the notes a cycle's ``detail`` carries.

Each trial starts a server in a fresh process over one model of ``tests/corpus/``, sends requests
in one way for a while, then calls ``stop()`` (exit_timeout 5 s) and prints how the stop went:

* ``capi-next-at-once``: the C API (ctypes), one request at a time, the next sent as soon as
  the previous one's final response and release are both in;
* ``capi-next-after-50us``: the same with a 50 us pause after each release;
* ``official-1``, ``official-2``: the official ``tritonserver`` API, ``async_infer`` from
  asyncio with 1 or 2 requests in flight (in the sandbox only: CPython 3.12, glibc 2.39+);
* ``*-unanswered``: one request to a model that returns None, waited for 1 s, let go, then stop.

Run on the host (the C API rows) and in the sandbox (all rows)::

    python benchmarks/plain_api_faults.py
    bash tests/sandbox/official.sh --run python benchmarks/plain_api_faults.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
EXIT_TIMEOUT = 5


def _capi(model: str, seconds: float, gap_s: float | None, unanswered: bool) -> dict:
    import numpy as np

    from rig.parent import runtime
    from rig.worker.engines.base import EngineError, ServerOptions
    from rig.worker.engines.capi import CapiEngine

    rt = runtime.resolve(None)
    eng = CapiEngine(rt.core_library)
    eng.start(ServerOptions(model_repository=str(CORPUS / model), backend_directory=rt.backend_dir,
                            exit_timeout_s=EXIT_TIMEOUT))
    while not (eng.is_ready() and eng.model_ready(model)):
        time.sleep(0.01)
    x = {"INPUT0": np.ones(4, np.float32)}
    sent = failed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sent += 1
        try:
            eng.infer(model, x, 1.0 if unanswered else 10.0).release()
        except EngineError:
            failed += 1
            if unanswered:
                break
        while eng._pending:  # the previous request released by the core: nothing of it in the server
            time.sleep(0)
        if gap_s:
            time.sleep(gap_s)
    t = time.monotonic()
    err = eng.stop()
    return {"requests": sent, "failed": failed, "stop_s": round(time.monotonic() - t, 3), "stop_error": err}


def _official(model: str, seconds: float, in_flight: int, unanswered: bool) -> dict:
    import asyncio
    import gc

    import numpy as np

    from rig.parent import runtime
    from rig.worker.engines.official import loader

    rt = runtime.resolve(None)
    loader.preload(rt.core_library)
    import tritonserver as ts

    server = ts.Server(ts.Options(model_repository=str(CORPUS / model), exit_timeout=EXIT_TIMEOUT,
                                  backend_directory=rt.backend_dir, log_info=False)).start(wait_until_ready=True)
    handle = server.model(model)
    x = np.ones(4, np.float32)
    counts = {"requests": 0, "failed": 0}

    async def one():
        counts["requests"] += 1
        async for r in handle.async_infer(inputs={"INPUT0": x}):
            if r.error is not None:
                counts["failed"] += 1
            if r.final:
                return

    async def slot(end):
        while time.monotonic() < end:
            try:
                await one()
            except Exception:  # noqa: BLE001 - older bindings raise the response's error
                counts["failed"] += 1

    async def main():
        if unanswered:
            try:
                await asyncio.wait_for(one(), 1.0)
            except asyncio.TimeoutError:
                counts["failed"] += 1
            return
        end = time.monotonic() + seconds
        await asyncio.gather(*(slot(end) for _ in range(in_flight)))

    asyncio.run(main())
    gc.collect()
    t = time.monotonic()
    try:
        server.stop()
        err = None
    except Exception as e:  # noqa: BLE001 - "Exit timeout expired. Exiting immediately."
        err = str(e)
    return {**counts, "stop_s": round(time.monotonic() - t, 3), "stop_error": err}


TRIALS = {
    "capi-next-at-once": ("raises_value_error_some", lambda m, s: _capi(m, s, None, False)),
    "capi-next-after-50us": ("raises_value_error_some", lambda m, s: _capi(m, s, 50e-6, False)),
    "official-1": ("raises_value_error_some", lambda m, s: _official(m, s, 1, False)),
    "official-2": ("raises_value_error_some", lambda m, s: _official(m, s, 2, False)),
    "capi-unanswered": ("returns_none", lambda m, s: _capi(m, s, None, True)),
    "official-unanswered": ("returns_none", lambda m, s: _official(m, s, 1, True)),
}


def _trial(name: str, seconds: float, env: dict) -> tuple[str, str]:
    """One trial in a process group of its own, killed whole afterwards: a stub left behind by a
    stop that failed must not hold the output open, nor outlive the trial."""
    import signal
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, __file__, "--child", name, "--seconds", str(seconds)],
                             stdout=out, stderr=err, env=env, start_new_session=True)
        try:
            p.wait(120)
            why = ""
        except subprocess.TimeoutExpired:
            why = "the trial's process did not end within 120 s"
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        from rig.common import probes

        probes.remove_shm_regions(probes.orphaned_shm_regions())  # what the killed stubs left
        out.seek(0)
        err.seek(0)
        return out.read(), why or err.read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", default=",".join(TRIALS), help="comma-separated, of: " + ", ".join(TRIALS))
    ap.add_argument("--seconds", type=float, default=2.0, help="load per trial (default 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        model, fn = TRIALS[a.child]
        print(json.dumps(fn(model, a.seconds)), flush=True)
        os._exit(0)  # a server whose stop failed may hang the interpreter's exit: the figure is out
    from rig.parent import runtime
    from rig.worker.engines.official import loader

    rt = runtime.resolve(None, log=print)
    official = loader.bindings_library() is not None
    env = rt.worker_env()
    print(f"Triton {rt.triton_version} ({rt.name}); exit_timeout {EXIT_TIMEOUT} s; {a.seconds:g} s of load a trial")
    print("| trial | model | run | requests | failed | stop (s) | stop error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in a.trials.split(","):
        if name.startswith("official") and not official:
            print(f"| {name} | - | - | - | - | - | skipped: no tritonserver bindings here (run it in the sandbox) |")
            continue
        for k in range(a.repeats):
            out, err = _trial(name, a.seconds, env)
            last = (out.strip().splitlines() or ["{}"])[-1]
            try:
                r = json.loads(last)
            except ValueError:
                print(f"| {name} | {TRIALS[name][0]} | {k + 1} | - | - | - | trial failed: {err.strip()[-200:]} |")
                continue
            print(f"| {name} | {TRIALS[name][0]} | {k + 1} | {r['requests']} | {r['failed']} | {r['stop_s']} | "
                  f"{(r['stop_error'] or 'none')[:60]} |")
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # each row as it is measured, also into a file
    sys.exit(main())
