#!/usr/bin/env python3
"""Whether Triton's Python backend calls ``finalize`` for a stub that gets no CPU for a while
across the unload: the figures behind the note a ``finalize_missing`` cycle carries.

At the unload each instance's destructor (python_backend ``~ModelInstanceState``) clears the
stub's health flag in shared memory, sleeps 1 s and reads it back; the stub's health thread sets
it every 300 ms. A stub that has not set it by then is taken for dead: it is killed (SIGKILL) and
its ``finalize`` never runs, while ``stop()`` returns within the exit timeout as from a clean
stop. A node so busy that a stub waits over a second for a CPU is one way there.

Each trial starts a server (the C API, no rig code between it and the core) in a fresh process
over one model in two instances whose ``finalize`` writes a file, sends 20 requests, pauses
every stub (SIGSTOP) for the given time (0: not at all), calls ``stop()`` (exit_timeout 5 s) and
counts the files::

    python benchmarks/stub_paused_at_stop.py --runtimes 0.3.1,0.7.0,2.67.0 --pauses 0,0.5,1.5,3
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXIT_TIMEOUT = 5
INSTANCES = 2
CONFIG = f"""name: "m"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
instance_group [ {{ count: {INSTANCES} kind: KIND_CPU }} ]
"""
MODEL = '''import os
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]

    def finalize(self):
        open(os.path.join(os.environ["PAUSED_FINALIZED"], f"{self.name}-{os.getpid()}"), "w").close()
'''


def _child(version: str, pause_s: float, repository: str, finalized: str) -> dict:
    import numpy as np

    from rig.common import probes
    from rig.parent import runtime
    from rig.worker.engines.base import ServerOptions
    from rig.worker.engines.capi import CapiEngine

    rt = runtime.resolve(version, auto_install=False)
    eng = CapiEngine(rt.core_library)
    eng.start(ServerOptions(model_repository=repository, backend_directory=rt.backend_dir,
                            exit_timeout_s=EXIT_TIMEOUT))
    while not (eng.is_ready() and eng.model_ready("m")):
        time.sleep(0.01)
    for _ in range(20):
        eng.infer("m", {"INPUT0": np.ones(4, np.float32)}, 10.0).release()
    stubs = probes.stubs_of(os.getpid())
    if pause_s:
        for p in stubs:
            os.kill(p.pid, signal.SIGSTOP)
        threading.Timer(pause_s, lambda: [os.kill(p.pid, signal.SIGCONT) for p in stubs if p.is_running()]).start()
    t = time.monotonic()
    err = eng.stop()
    stop_s = time.monotonic() - t
    time.sleep(pause_s + 0.5)  # a stub let go after the stop may still finalize: it is counted too
    return {"stubs": len(stubs), "finalized": len(os.listdir(finalized)), "stop_s": round(stop_s, 3),
            "stop_error": err, "alive_after": len(probes.stubs_of(os.getpid()))}


def _trial(version: str, pause_s: float) -> dict | str:
    """One trial in a process group of its own (with the core's environment), killed whole after
    with the shared memory it mapped (``rig.common.procs.kill_group``): nobody else's."""
    from rig.common import procs
    from rig.parent import runtime

    env = runtime.resolve(version, auto_install=False).worker_env()
    with tempfile.TemporaryDirectory() as tmp:
        repo, finalized = Path(tmp) / "repo", Path(tmp) / "finalized"
        (repo / "m" / "1").mkdir(parents=True)
        finalized.mkdir()
        (repo / "m" / "config.pbtxt").write_text(CONFIG)
        (repo / "m" / "1" / "model.py").write_text(MODEL)
        env["PAUSED_FINALIZED"] = str(finalized)
        p = subprocess.Popen([sys.executable, __file__, "--child", version, str(pause_s), str(repo), str(finalized)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            out, err = "", "the trial did not end within 120 s"
        procs.kill_group(p.pid, p)
        try:
            return json.loads((out.strip().splitlines() or [""])[-1])
        except ValueError:
            return (err.strip().splitlines() or ["no output"])[-1][:200]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtimes", default="0.7.0", help="comma-separated runtimes (rig runtime list)")
    ap.add_argument("--pauses", default="0,0.5,1.5,3", help="comma-separated seconds each stub is paused")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        version, pause, repo, finalized = a.child
        print(json.dumps(_child(version, float(pause), repo, finalized)), flush=True)
        os._exit(0)
    print(f"{INSTANCES} instances, exit_timeout {EXIT_TIMEOUT} s, every stub paused (SIGSTOP) for the time given")
    print("| core | pause (s) | run | stop (s) | stop error | finalized | stubs alive after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    from rig.parent import runtime

    for version in a.runtimes.split(","):
        core = runtime.resolve(version, auto_install=False).triton_version
        for pause in (float(x) for x in a.pauses.split(",")):
            for k in range(a.repeats):
                r = _trial(version, pause)
                if isinstance(r, str):
                    print(f"| {core} | {pause:g} | {k + 1} | - | - | trial failed: {r} | - |")
                    continue
                print(f"| {core} | {pause:g} | {k + 1} | {r['stop_s']:.2f} | {r['stop_error'] or 'none'} | "
                      f"{r['finalized']} of {r['stubs']} | {r['alive_after']} |")
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
