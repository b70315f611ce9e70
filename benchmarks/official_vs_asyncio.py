#!/usr/bin/env python3
"""The rig's workload through the official engine against a plain asyncio loop over
``Model.async_infer``: same core, model and concurrency, side by side in one run.

    bash tests/sandbox/official.sh --run python benchmarks/official_vs_asyncio.py [--concurrency 1,4]

For each repeat and point, three runs back to back: the plain loop (a fresh process without
Locust: C coroutines, each ``async for response in model.async_infer(inputs=...)`` as a user
writes it, counted over the same seconds after a warm-up), the same loop over an
``InferenceRequest`` built once (``async_infer(inference_request=...)``, the way the rig's lane
sends), and ``rig bench --engine tritonserver`` at that concurrency, in alternating order so
that a drift of the machine falls on all alike. Prints the figures, the medians of the paired
ratios (rig / each plain loop, run back to back: the figure that noisy neighbours disturb
least), and the rig's median over each plain loop's best. The CPUs idle as the kernel lets them, as
under a user's own loop; ``--cpu-idle hold`` keeps them out of idle over the whole run, for all
three alike (``rig.cpuidle``; measured here, it slowed all three, the rig's lanes most).
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

PLAIN = r"""
import asyncio, json, sys, time
import numpy as np
from rig.engines.official import loader
core, backends, repo, conc, seconds, warmup, style = sys.argv[1:8]
ts = loader.load(core)
server = ts.Server(ts.Options(model_repository=repo, backend_directory=backends, exit_timeout=10))
server.start(wait_until_ready=True)
model = server.model("numpy")
inputs = {"INPUT": np.ones(4, dtype=np.float32)}
request = ts.InferenceRequest(model=model, inputs={"INPUT": ts.Tensor.from_dlpack(inputs["INPUT"])})

async def user(until, counts):
    while time.monotonic() < until:
        if style == "prebuilt":
            async for response in model.async_infer(inference_request=request):
                pass
        else:
            async for response in model.async_infer(inputs=inputs):
                pass
        response = None
        counts[0] += 1

async def run(seconds):
    counts = [0]
    t0 = time.monotonic()
    await asyncio.gather(*(user(t0 + seconds, counts) for _ in range(int(conc))))
    return counts[0] / (time.monotonic() - t0)

asyncio.run(run(float(warmup)))
rate = asyncio.run(run(float(seconds)))
server.stop()
print(json.dumps({"throughput": rate}))
"""


def plain(rt, repo: Path, conc: int, seconds: float, warmup: float, style: str = "inputs") -> float:
    proc = subprocess.run([sys.executable, "-c", PLAIN, rt.core_library, rt.backend_dir, str(repo),
                           str(conc), str(seconds), str(warmup), style],
                          capture_output=True, text=True, env=rt.worker_env(), timeout=600)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)["throughput"]
    raise SystemExit(f"the plain loop failed: {proc.stderr.strip()[-2000:]}")


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
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--windows", type=int, default=4, help="rig windows per point (the first is warm-up)")
    ap.add_argument("--window-seconds", type=float, default=2.0)
    ap.add_argument("--runtime", default="0.7.0")
    ap.add_argument("--cpu-idle", choices=["hold", "os"], default="os",
                    help="os (default): idle left to the kernel; hold: the CPUs kept out of idle for all three")
    a = ap.parse_args()
    from rig import cpuidle

    with cpuidle.Hold(a.cpu_idle) as hold:
        print(f"cpu idle: {hold.method}{f' ({hold.detail})' if hold.detail else ''}", flush=True)
        return measure(a, hold.method)


def measure(a, cpu_idle: str) -> int:
    from rig import repository, runtime

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
    print(f"\nTriton {rt.triton_version} ({rt.name}), tritonserver bindings "
          f"{__import__('rig.engines.official.loader', fromlist=['x']).bindings_version()}, "
          f"numpy model, {a.repeats} repeats, cpu idle {cpu_idle}")
    print("| in flight | plain asyncio, inputs=: best / median | plain, pre-built request: best / median "
          "| rig (official engine): best / median | rig / plain: paired median (min–max) · best / best "
          "· median / best | rig / pre-built: the same three |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in points:
        med, top = statistics.median(rates["rig"][c]), max(rates["rig"][c])
        cells = []
        for k in ("plain", "prebuilt"):
            cells.append(f"{max(rates[k][c]):,.0f} / {statistics.median(rates[k][c]):,.0f} infer/s")
        ratios = [f"{statistics.median(pairs[k][c]):.2f} ({min(pairs[k][c]):.2f}–{max(pairs[k][c]):.2f}) · "
                  f"{top / max(rates[k][c]):.2f} · {med / max(rates[k][c]):.2f}" for k in pairs]
        print(f"| {c} | {cells[0]} | {cells[1]} | {top:,.0f} / {med:,.0f} infer/s | {ratios[0]} | {ratios[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
