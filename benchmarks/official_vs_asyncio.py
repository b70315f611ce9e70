#!/usr/bin/env python3
"""The rig's workload through the official engine against a plain asyncio loop over
``Model.async_infer``: same core, model and concurrency, side by side in one run.

    bash tests/sandbox/official.sh --run python benchmarks/official_vs_asyncio.py [--concurrency 1,4]

Two modes.

``--mode slices`` (the default): two processes, each with its own server over the same core and
model, take turns in short slices (``--slice-seconds``, 2 s), in alternating order, so that the
host's speed, which on a shared VM swings for seconds at a time, falls on both alike:
- a plain process, as a user writes it (no Locust, no gevent, nothing checked): for each slice
  ``asyncio.run`` over C coroutines, each ``async for response in model.async_infer(...)``,
  once with ``inputs=`` and once over an ``InferenceRequest`` built once
  (``inference_request=``, the way the rig's lane sends);
- a process like the rig's worker (Locust imported, so gevent-patched), where each slice is
  the rig's workload itself: ``rig.worker.load.runner.run_locust``, the function the worker runs,
  with its Locust users, lanes, sink, windows and the check of every response against the
  reference answer; its figure is what the rig would store (requests / the windows' time).
The one idle meanwhile does nothing: its server waits.

``--mode runs``: whole runs back to back, the plain loops each in a fresh process and
``rig bench --engine tritonserver`` end to end (its worker process and orchestrator included).
Slower, and each run falls in whatever spell of the host it meets.

Both print the figures, the medians of the paired ratios (rig / each plain loop, taken side by
side: the figure that noisy neighbours disturb least), and the rig's median over each plain
loop's best. The CPUs idle as the kernel lets them; ``--cpu-idle hold`` keeps them out of idle
for the whole run, for all alike (``rig.common.cpuidle``).
Needs the tritonserver bindings (CPython 3.12, glibc 2.39+): run it inside the sandbox.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLAIN_SLICES = r"""
import asyncio, json, sys, time
import numpy as np
from rig.worker.engines.official import loader
core, backends, repo, size = sys.argv[1:5]
ts = loader.load(core)
server = ts.Server(ts.Options(model_repository=repo, backend_directory=backends, exit_timeout=10))
server.start(wait_until_ready=True)
model = server.model("numpy")
inputs = {"INPUT": np.ones(int(size), dtype=np.float32)}
request = ts.InferenceRequest(model=model, inputs={"INPUT": ts.Tensor.from_dlpack(inputs["INPUT"])})

async def user(style, until, counts):
    while time.monotonic() < until:
        if style == "prebuilt":
            async for response in model.async_infer(inference_request=request):
                pass
        else:
            async for response in model.async_infer(inputs=inputs):
                pass
        response = None
        counts[0] += 1

async def run(style, conc, seconds):
    counts = [0]
    t0, c0 = time.monotonic(), time.process_time()
    await asyncio.gather(*(user(style, t0 + seconds, counts) for _ in range(conc)))
    return counts[0] / (time.monotonic() - t0), (time.process_time() - c0) / max(1, counts[0])

print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    rate, cpu = asyncio.run(run(cmd["style"], cmd["conc"], cmd["seconds"]))
    print(json.dumps({"throughput": rate, "cpu_s": cpu}), flush=True)
server.stop()
"""

RIG_SLICES = r"""
import json, sys, time
from rig.contract.spec import ClosedLoop
from rig.worker.load.runner import run_locust  # imports Locust: gevent patches this process, as the worker's
from rig.worker.engines.base import ServerOptions
from rig.worker.engines.official.engine import OfficialEngine
from rig.contract.inputs import inputs_for
from rig.worker.outputs import reference_output
core, backends, repo, size = sys.argv[1:5]
engine = OfficialEngine(core)
engine.start(ServerOptions(model_repository=repo, backend_directory=backends, exit_timeout_s=10))
deadline = time.monotonic() + 120
while not (engine.is_ready() and engine.model_ready("numpy")):
    if time.monotonic() > deadline:
        raise SystemExit("the rig's server was not ready within 120 s")
    time.sleep(0.01)
meta = engine.model_metadata("numpy")
inputs = inputs_for(meta)
ok, note, check = reference_output(engine, "numpy", inputs, int(size), 30, meta=meta)
if not ok:
    raise SystemExit(f"the reference answer: {note}")
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    c0 = time.process_time()
    load = ClosedLoop("steady", seconds=cmd["seconds"], users=cmd["conc"], in_flight=1, window_seconds=cmd["seconds"])
    out = run_locust(engine, ["numpy"], {"numpy": inputs}, load, emit=lambda row: None, tags={},
                     checks={"numpy": check}, request_timeout=30.0, server_stats=True)
    print(json.dumps({"throughput": out["throughput"], "errors": out["errors"], "bad_outputs": out["bad_outputs"],
                      "cpu_s": (time.process_time() - c0) / max(1, out["requests"])}), flush=True)
engine.stop()
"""


class Child:
    """A long-lived process that runs one slice per command line (JSON in, JSON out)."""

    def __init__(self, name: str, script: str, rt, repo: Path, size: int):
        self.name = name
        self.proc = subprocess.Popen([sys.executable, "-c", script, rt.core_library, rt.backend_dir, str(repo),
                                      str(size)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=rt.worker_env(), cwd=ROOT)
        self._answer()

    def _answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise SystemExit(f"the {self.name} process ended (exit {self.proc.wait()}); run it by hand to see why")

    def run(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


def measure_slices(a, cpu_idle: str) -> int:
    from rig.parent import repository, runtime
    from rig.worker.engines.official import loader

    rt = runtime.resolve(a.runtime)
    points = [int(x) for x in a.concurrency.split(",")]
    kinds = ("plain", "prebuilt", "rig")
    rates = {k: {c: [] for c in points} for k in kinds}
    pairs = {k: {c: [] for c in points} for k in kinds[:2]}
    cpu = {k: {c: [] for c in points} for k in ("inputs", "prebuilt", "rig")}  # process CPU s / request
    faults = 0
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "models"
        repository.render(repository.ModelSpec(), repo)
        plain_p = Child("plain", PLAIN_SLICES, rt, repo, 4)
        rig_p = Child("rig", RIG_SLICES, rt, repo, 4)
        try:
            def plain_slice(style, c, s):
                out = plain_p.run(style=style, conc=c, seconds=s)
                cpu[style][c].append(out["cpu_s"])
                return out["throughput"]

            def rig_slice(c, s):
                nonlocal faults
                out = rig_p.run(conc=c, seconds=s)
                faults += (out["errors"] or 0) + (out["bad_outputs"] or 0)
                cpu["rig"][c].append(out["cpu_s"])
                return out["throughput"]

            run = {"plain": lambda c, s: plain_slice("inputs", c, s),
                   "prebuilt": lambda c, s: plain_slice("prebuilt", c, s)}

            run["rig"] = rig_slice
            for c in points:  # warm-up: one short slice of each, not counted
                for k in kinds:
                    run[k](c, min(1.0, a.slice_seconds))
            for r in range(a.repeats):
                for c in points:
                    for k in (kinds if r % 2 == 0 else kinds[::-1]):
                        rates[k][c].append(run[k](c, a.slice_seconds))
                    for k in pairs:
                        pairs[k][c].append(rates["rig"][c][-1] / rates[k][c][-1])
                    print(f"repeat {r + 1} c={c}: plain {rates['plain'][c][-1]:,.0f} infer/s, pre-built "
                          f"{rates['prebuilt'][c][-1]:,.0f}, rig {rates['rig'][c][-1]:,.0f}; rig / plain "
                          f"{pairs['plain'][c][-1]:.2f}, rig / pre-built {pairs['prebuilt'][c][-1]:.2f}", flush=True)
        finally:
            plain_p.close()
            rig_p.close()
    print(f"\nTriton {rt.triton_version} ({rt.name}), tritonserver bindings {loader.bindings_version()}, "
          f"numpy model, slices of {a.slice_seconds:g} s, {a.repeats} repeats, cpu idle {cpu_idle}; "
          f"the rig's failed or wrong responses: {faults}")
    table(points, rates, pairs)
    print("\nCPU time of the client process (all its threads; the stub's apart) per request, median over "
          "the slices after the warm-up: " + "; ".join(
              f"{c} in flight: plain inputs= {statistics.median(cpu['inputs'][c][1:]) * 1e6:.0f} us, pre-built "
              f"{statistics.median(cpu['prebuilt'][c][1:]) * 1e6:.0f} us, rig {statistics.median(cpu['rig'][c][1:]) * 1e6:.0f} us"
              for c in points))
    return 1 if faults else 0


def table(points, rates, pairs) -> None:
    print("| in flight | plain asyncio, inputs=: best / median | plain, pre-built request: best / median "
          "| rig (official engine): best / median | rig / plain: paired median (min–max) · median / best "
          "| rig / pre-built: the same two |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in points:
        med, top = statistics.median(rates["rig"][c]), max(rates["rig"][c])
        cells = [f"{max(rates[k][c]):,.0f} / {statistics.median(rates[k][c]):,.0f} infer/s" for k in pairs]
        ratios = [f"{statistics.median(pairs[k][c]):.2f} ({min(pairs[k][c]):.2f}–{max(pairs[k][c]):.2f}) · "
                  f"{med / max(rates[k][c]):.2f}" for k in pairs]
        print(f"| {c} | {cells[0]} | {cells[1]} | {top:,.0f} / {med:,.0f} infer/s | {ratios[0]} | {ratios[1]} |")


def plain(rt, repo: Path, conc: int, seconds: float, warmup: float, style: str = "inputs") -> float:
    """One whole run of the plain loop in a fresh process: a warm-up, then ``seconds`` counted."""
    child = Child("plain", PLAIN_SLICES, rt, repo, 4)
    try:
        child.run(style=style, conc=conc, seconds=warmup)
        return child.run(style=style, conc=conc, seconds=seconds)["throughput"]
    finally:
        child.close()


def rig_bench(runtime: str, conc: int, windows: int, window_s: float, results: Path) -> float:
    """One point of ``rig bench`` (``--cpu-idle os``: this process already holds, or not, for all)."""
    import pandas as pd

    from rig.analysis.sweeps import summarize

    before = set(pd.read_parquet(results / "windows").run_id) if (results / "windows").exists() else set()
    proc = subprocess.run([sys.executable, "-m", "rig", "bench", "--engine", "tritonserver", "--runtime", runtime,
                           "--concurrency", str(conc), "--in-flight", "1", "--repeats", "1", "--windows", str(windows),
                           "--window-seconds", str(window_s), "--cpu-idle", "os", "--results", str(results)],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"rig bench failed: {proc.stderr.strip()[-2000:]}")
    w = pd.read_parquet(results / "windows")
    w = w[~w.run_id.isin(before)].sort_values("window")
    return summarize(w.to_dict("records"))["throughput"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["slices", "runs"], default="slices",
                    help="slices (default): two processes take turns in short slices; runs: whole runs, "
                         "rig bench end to end")
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--repeats", type=int, default=None, help="default: 12 (slices), 4 (runs)")
    ap.add_argument("--slice-seconds", type=float, default=2.0, help="slices: the length of one slice")
    ap.add_argument("--windows", type=int, default=4, help="runs: rig windows per point (the first is warm-up)")
    ap.add_argument("--window-seconds", type=float, default=2.0, help="runs: the length of one window")
    ap.add_argument("--runtime", default="0.7.0")
    ap.add_argument("--cpu-idle", choices=["hold", "os"], default="os",
                    help="os (default): idle left to the kernel; hold: the CPUs kept out of idle for all")
    a = ap.parse_args()
    if a.repeats is None:
        a.repeats = 12 if a.mode == "slices" else 4
    if a.repeats < 1 or a.slice_seconds <= 0 or a.window_seconds <= 0 or a.windows < 2:
        ap.error("--repeats must be at least 1, --windows at least 2, and the seconds above 0")
    from rig.common import cpuidle

    with cpuidle.Hold(a.cpu_idle) as hold:
        print(f"cpu idle: {hold.method}{f' ({hold.detail})' if hold.detail else ''}", flush=True)
        return (measure_slices if a.mode == "slices" else measure_runs)(a, hold.method)


def measure_runs(a, cpu_idle: str) -> int:
    from rig.parent import repository, runtime
    from rig.worker.engines.official import loader

    rt = runtime.resolve(a.runtime)
    points = [int(x) for x in a.concurrency.split(",")]
    seconds = (a.windows - 1) * a.window_seconds
    kinds = ("plain", "prebuilt", "rig")
    rates = {k: {c: [] for c in points} for k in kinds}
    pairs = {k: {c: [] for c in points} for k in kinds[:2]}  # rig / that plain loop, run back to back
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "models"
        repository.render(repository.ModelSpec(), repo)
        run = {"plain": lambda c: plain(rt, repo, c, seconds, a.window_seconds),
               "prebuilt": lambda c: plain(rt, repo, c, seconds, a.window_seconds, "prebuilt"),
               "rig": lambda c: rig_bench(a.runtime, c, a.windows, a.window_seconds, Path(tmp) / "results")}
        for r in range(a.repeats):
            for c in points:
                for k in (("plain", "rig", "prebuilt") if r % 2 == 0 else ("prebuilt", "rig", "plain")):
                    rates[k][c].append(run[k](c))
                for k in pairs:
                    pairs[k][c].append(rates["rig"][c][-1] / rates[k][c][-1])
                print(f"repeat {r + 1} c={c}: plain {rates['plain'][c][-1]:,.0f} infer/s, plain with a pre-built "
                      f"request {rates['prebuilt'][c][-1]:,.0f}, rig {rates['rig'][c][-1]:,.0f}; rig / plain "
                      f"{pairs['plain'][c][-1]:.2f}, rig / pre-built {pairs['prebuilt'][c][-1]:.2f}", flush=True)
    print(f"\nTriton {rt.triton_version} ({rt.name}), tritonserver bindings {loader.bindings_version()}, "
          f"numpy model, whole runs, {a.repeats} repeats, cpu idle {cpu_idle}")
    table(points, rates, pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
