#!/usr/bin/env python3
"""The rig's native load generator (rig.worker.engines.capi.lane) against perf_analyzer, side by side.

For each concurrency, in one run and alternating so both share the machine's noise:
perf_analyzer in C API mode (its own process, its own server), then a worker process of this
script that hosts the same core and model and measures, closed loop,
  * ``1 lane``: one lane with in_flight = c,
  * ``c lanes``: c lanes of in_flight 1.
Throughput is completions per second over the measurement; p50/p99 are per-request latencies
(submission to final response), perf_analyzer's over its stable windows.

    python benchmarks/fastpath_vs_pa.py [--concurrency 1,2,4,8] [--measurement-ms 2000]
        [--rounds 1] [--runtime SPEC] [--stub-bin DIR] [--json OUT]

``--stub-bin DIR`` puts DIR first on PATH of both servers, so the Python-backend stub runs with
that interpreter's packages (e.g. a venv with numpy<2, which the pytriton stubs are built for).
The goal held to: throughput ratio >= 0.9 at every concurrency, p50 ratio <= 1.25 at c=1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GOAL_THROUGHPUT = 0.9
GOAL_P50_C1 = 1.25


# ---------------------------------------------------------------- worker (hosts the core)

def _measure(engine, model, inputs, lanes_in_flight, warmup_s, measure_s):
    from rig.worker.engines.capi import lane as fastpath

    lanes = [fastpath.Lane(engine, model, inputs, in_flight=k) for k in lanes_in_flight]
    try:
        for lane in lanes:
            lane.start_closed()
        time.sleep(warmup_s)
        for lane in lanes:
            lane.drain()
        t0 = time.monotonic()
        time.sleep(measure_s)
        parts, errors = [], 0
        for lane in lanes:
            lat, err = lane.drain()
            parts.append(lat)
            errors += err
        elapsed = time.monotonic() - t0
        for lane in lanes:
            lane.stop(10)
    finally:
        for lane in lanes:
            lane.close()
    lat = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    if not lat.size:
        return {"throughput": 0.0, "p50_us": None, "p99_us": None, "errors": errors}
    return {"throughput": lat.size / elapsed,
            "p50_us": float(np.percentile(lat, 50)) / 1e3,
            "p99_us": float(np.percentile(lat, 99)) / 1e3,
            "errors": errors}


def worker(args) -> int:
    from rig.parent import runtime
    from rig.worker.engines.base import ServerOptions
    from rig.worker.engines.capi import CapiEngine

    from rig.contract.runtime import from_dict as runtime_from_dict

    rt = runtime_from_dict(json.loads(args.worker_runtime))
    c = args.worker
    engine = CapiEngine(rt.core_library)
    engine.start(ServerOptions(args.repo, rt.backend_dir, exit_timeout_s=5,
                               log_file=os.path.join(args.workdir, f"server-c{c}.log")))
    try:
        deadline = time.monotonic() + 60
        while not engine.model_ready(args.model):
            if time.monotonic() > deadline:
                raise SystemExit(f"model {args.model} not ready after 60 s")
            time.sleep(0.05)
        inputs = {"INPUT": np.arange(4, dtype=np.float32)}
        measure_s = 3 * args.measurement_ms / 1000  # perf_analyzer's three stable windows
        out = {"single": _measure(engine, args.model, inputs, [c], 1.0, measure_s)}
        out["multi"] = (out["single"] if c == 1 else
                        _measure(engine, args.model, inputs, [1] * c, 1.0, measure_s))
    finally:
        engine.stop()
        engine.close()
    print("RESULT " + json.dumps(out), flush=True)
    return 0


# ---------------------------------------------------------------- parent (hosts nothing)

class _Runtime:
    """The runtime with DIR first on PATH for the servers (and so for their stubs)."""

    def __init__(self, rt, stub_bin: str | None):
        self._rt = rt
        self._stub_bin = stub_bin
        self.server_dir = rt.server_dir

    def worker_env(self) -> dict:
        env = self._rt.worker_env()
        if self._stub_bin:
            env["PATH"] = self._stub_bin + os.pathsep + env["PATH"]
        return env


def _run_worker(rt, wrt, c, args, repo, workdir) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(c),
           "--worker-runtime", json.dumps(rt.to_dict()), "--repo", str(repo), "--workdir",
           str(workdir), "--model", args.model, "--measurement-ms", str(args.measurement_ms)]
    proc = subprocess.run(cmd, env=wrt.worker_env(), capture_output=True, text=True, timeout=300)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    raise RuntimeError(f"worker at c={c} failed (exit {proc.returncode}): {tail}")


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def _ratio(a, b):
    return None if a is None or not b else a / b


def _f(v, fmt="{:,.0f}"):
    return "-" if v is None else fmt.format(v)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="1,2,4,8")
    p.add_argument("--measurement-ms", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=1, help="repeat the sweep; medians are shown")
    p.add_argument("--stability-pct", type=float, default=10,
                   help="perf_analyzer's -s (its windows must agree within this)")
    p.add_argument("--max-trials", type=int, default=10, help="perf_analyzer's -r")
    p.add_argument("--runtime", default=None)
    p.add_argument("--model", default="numpy")
    p.add_argument("--stub-bin", default=None)
    p.add_argument("--json", default=None)
    # worker side
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker-runtime", default=None, help=argparse.SUPPRESS)
    p.add_argument("--repo", default=None, help=argparse.SUPPRESS)
    p.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    return p


def _rows(conc: list[int], samples: dict) -> list[dict]:
    """Each concurrency's medians over the rounds, and the lanes' ratios to perf_analyzer."""
    rows = []
    for c in conc:
        s = samples[c]
        row = {"concurrency": c}
        for key in ("pa", "single", "multi"):
            for m in ("throughput", "p50_us", "p99_us"):
                row[f"{key}_{m}"] = _median([x.get(m) for x in s[key]])
        row["errors"] = sum(x["errors"] for k in ("single", "multi") for x in s[k])
        for key in ("single", "multi"):
            row[f"{key}_throughput_ratio"] = _ratio(row[f"{key}_throughput"], row["pa_throughput"])
            row[f"{key}_p50_ratio"] = _ratio(row[f"{key}_p50_us"], row["pa_p50_us"])
        rows.append(row)

    return rows


def _print_table(rows: list[dict]) -> None:
    print()
    print(f"{'c':>2} | {'perf_analyzer':^24} | {'1 lane, in_flight=c':^38} | {'c lanes, in_flight=1':^38}")
    print(f"{'':>2} | {'infer/s':>8} {'p50':>6} {'p99':>7} | {'infer/s':>8} {'p50':>6} {'p99':>7} "
          f"{'x thr':>6} {'x p50':>6} | {'infer/s':>8} {'p50':>6} {'p99':>7} {'x thr':>6} {'x p50':>6}")
    for row in rows:
        line = (f"{row['concurrency']:>2} | {_f(row['pa_throughput']):>8} {_f(row['pa_p50_us']):>6} "
                f"{_f(row['pa_p99_us']):>7}")
        for key in ("single", "multi"):
            line += (f" | {_f(row[key + '_throughput']):>8} {_f(row[key + '_p50_us']):>6} "
                     f"{_f(row[key + '_p99_us']):>7} {_f(row[key + '_throughput_ratio'], '{:.2f}'):>6} "
                     f"{_f(row[key + '_p50_ratio'], '{:.2f}'):>6}")
        print(line)
    print("(latencies in us; x thr = lane/PA throughput, x p50 = lane/PA p50)")


def _verdict(rows: list[dict]) -> list[str]:
    """The goals met or not, a line per lane kind."""
    verdict = []
    for key, label in (("single", "1 lane"), ("multi", "c lanes")):
        thr = [r[key + "_throughput_ratio"] for r in rows]
        ok_thr = all(x is not None and x >= GOAL_THROUGHPUT for x in thr)
        p50 = next((r[key + "_p50_ratio"] for r in rows if r["concurrency"] == 1), None)
        ok_p50 = p50 is None or p50 <= GOAL_P50_C1
        verdict.append(f"{label}: throughput >= {GOAL_THROUGHPUT}x PA at every c: "
                       f"{'yes' if ok_thr else 'NO'}; p50 at c=1 <= {GOAL_P50_C1}x PA: "
                       f"{'yes' if ok_p50 else 'NO'}")
    return verdict


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.worker is not None:
        return worker(args)

    from rig.parent import repository, runtime
    from rig.worker.engines.capi import lane as fastpath
    from rig.parent.perf_analyzer import PerfAnalyzerError, ensure_perf_analyzer, run_perf_analyzer

    ok, why = fastpath.available()
    if not ok:
        print(f"lanes unavailable: {why}", file=sys.stderr)
        return 2
    rt = runtime.resolve(args.runtime, log=print)
    wrt = _Runtime(rt, args.stub_bin)
    ensure_perf_analyzer(log=print)
    conc = [int(x) for x in args.concurrency.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="rig-fastpath-bench-"))
    repo = workdir / "repo"
    repo.mkdir()
    repository.render(repository.ModelSpec(kind="numpy", name=args.model), repo)
    print(f"core {rt.triton_version} ({rt.name}); model {args.model}; {os.cpu_count()} CPUs; "
          f"measurement {args.measurement_ms} ms x 3; rounds {args.rounds}; work {workdir}")

    samples = {c: {"pa": [], "single": [], "multi": []} for c in conc}
    for r in range(args.rounds):
        for c in conc:
            try:
                pa = run_perf_analyzer(wrt, repo, args.model, concurrency=[c],
                                       shapes={"INPUT": [4]}, measurement_ms=args.measurement_ms,
                                       stability_pct=args.stability_pct,
                                       max_trials=args.max_trials, timeout_s=300)[0]
            except PerfAnalyzerError as e:
                print(f"  round {r + 1} c={c}: perf_analyzer: {e}")
                pa = None
            rig = _run_worker(rt, wrt, c, args, repo, workdir)
            if pa is not None:
                samples[c]["pa"].append(pa)
            samples[c]["single"].append(rig["single"])
            samples[c]["multi"].append(rig["multi"])
            print(f"  round {r + 1} c={c}: PA {_f(pa and pa['throughput'])}/s "
                  f"p50 {_f(pa and pa['p50_us'])} us | 1 lane {_f(rig['single']['throughput'])}/s "
                  f"p50 {_f(rig['single']['p50_us'])} us | {c} lanes "
                  f"{_f(rig['multi']['throughput'])}/s p50 {_f(rig['multi']['p50_us'])} us",
                  flush=True)

    rows = _rows(conc, samples)
    _print_table(rows)
    print("\n".join(_verdict(rows)))
    if any(r["errors"] for r in rows):
        print(f"errors seen by lanes: {sum(r['errors'] for r in rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "samples": samples}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
