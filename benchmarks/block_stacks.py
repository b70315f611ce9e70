#!/usr/bin/env python3
"""Where the server's threads and the Python-backend stub wait: the rig beside perf_analyzer.

Throughput alone cannot tell a 5 % difference from this kind of VM's noise; the places where
threads block can. For each tool in turn (the rig's bench point, then perf_analyzer in C API
mode, same runtime, model and concurrency), this runs the load, records one second of
``sched:sched_switch`` events with their call stacks (Linux ``perf``) on the whole process
tree, and prints per busy thread its switches and the user-space stacks it blocked in. The last
lines sum, per tool, the switches spent waiting on the Python backend's shared-memory mutex
(``__pthread_mutex_lock_full``: the stub freeing one request's objects while the backend builds
the next one's), per thousand requests.

    python benchmarks/block_stacks.py [--concurrency 4] [--tools rig,perf-analyzer]
        [--depth 7] [--share 2]

Needs ``perf`` with tracepoint access (root, or kernel.perf_event_paranoid <= 1); it prints
that and exits 3 where it is missing. Each tool's recording is about 0.5-1 GB in a temporary
folder, deleted afterwards.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP_S = 9
MUTEX_FRAME = "__pthread_mutex_lock_full"


def fold(script_lines, depth):
    """``perf script`` text -> {thread: Counter(stack -> switches)}, user-space frames only."""
    stacks: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    thread, frames = None, []

    def flush():
        if thread is not None:
            user = [f for f, dso in frames if not dso.startswith("[kernel")]
            stacks[thread][" <- ".join(user[:depth]) or "(kernel only)"] += 1

    for line in script_lines:
        if not line.strip():
            flush()
            thread, frames = None, []
        elif not line[0].isspace():
            m = re.match(r"\s*(\S+)\s+(\d+)", line)
            thread = f"{m.group(1)}:{m.group(2)}" if m else line[:30]
            frames = []
        else:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                m = re.match(r"(.*) \((.*)\)$", parts[1])
                sym, dso = (m.group(1), m.group(2)) if m else (parts[1], "")
                frames.append((re.sub(r"\+0x[0-9a-f]+$", "", sym)[:70], dso.rsplit("/", 1)[-1]))
    flush()
    return stacks


def _start(tool, conc, work):
    from rig.parent import perf_analyzer, repository, runtime
    rt = runtime.resolve(None)
    repo = Path(work) / "models"
    repository.render(repository.ModelSpec(), repo)
    model = sorted(os.listdir(repo))[0]
    if tool == "perf-analyzer":
        cmd = [perf_analyzer.ensure_perf_analyzer(), "-m", model, "--service-kind=triton_c_api",
               f"--triton-server-directory={rt.server_dir}", f"--model-repository={repo}",
               "-p", "5000", "-s", "100", "-r", "3", "--concurrency-range", str(conc)]
        env = rt.worker_env()
    else:
        cmd = [sys.executable, "-m", "rig", "bench", "--concurrency", str(conc), "--windows", "7",
               "--window-seconds", "2", "--repeats", "1", "--results", f"{work}/results"]
        env = None
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=work)


def _throughput(output):
    m = re.search(r"rig\s+([\d,]+) infer/s", output) or re.search(r"throughput: ([\d.]+) infer/sec", output)
    return float(m.group(1).replace(",", "")) if m else None


def measure(tool, conc, depth):
    import psutil
    with tempfile.TemporaryDirectory(prefix="rig-block-stacks-") as work:
        proc = _start(tool, conc, work)
        time.sleep(WARMUP_S)
        tree = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        data = f"{work}/perf.data"
        subprocess.run(["perf", "record", "-q", "-o", data, "-e", "sched:sched_switch",
                        "--call-graph", "dwarf,16384", "-p", ",".join(map(str, tree)),
                        "--", "sleep", "1"], check=False, stdout=subprocess.DEVNULL)
        script = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True)
        output = proc.communicate()[0]
    return fold(script.stdout.splitlines(), depth), _throughput(output)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--tools", default="rig,perf-analyzer")
    ap.add_argument("--depth", type=int, default=7, help="user-space frames shown per stack")
    ap.add_argument("--share", type=float, default=2.0, help="show stacks from this %% of a thread's switches")
    args = ap.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if bad := [t for t in tools if t not in ("rig", "perf-analyzer")]:
        ap.error(f"unknown tool(s) {bad}: use rig and/or perf-analyzer")
    if not shutil.which("perf"):
        print("block_stacks: skipped: Linux perf is not installed (apt-get install linux-perf)")
        return 3
    probe = subprocess.run(["perf", "record", "-q", "-o", "/dev/null", "-e", "sched:sched_switch",
                            "--", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"block_stacks: skipped: perf cannot record sched:sched_switch here "
              f"({probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else 'no reason given'})")
        return 3
    summary = []
    for tool in tools:
        stacks, tput = measure(tool, args.concurrency, args.depth)
        print(f"\n=== {tool} at {args.concurrency} in flight: {tput or '?'} infer/s over its run")
        busiest = sorted(stacks.items(), key=lambda kv: -sum(kv[1].values()))[:6]
        mutex = 0
        for thread, counter in busiest:
            n = sum(counter.values())
            if n < 200:
                continue
            print(f"-- {thread}: {n} switches in 1 s")
            for stack, k in counter.most_common():
                if 100 * k / n >= args.share:
                    print(f"   {k:6d} {100 * k / n:5.1f} %  {stack}")
        for counter in stacks.values():
            mutex += sum(k for stack, k in counter.items() if stack.startswith(f"futex_wait <- {MUTEX_FRAME}"))
        summary.append((tool, tput, mutex))
    print()
    for tool, tput, mutex in summary:
        per_k = f"{1000 * mutex / tput:.0f} per 1,000 requests at the run's rate" if tput else "?"
        print(f"{tool:14s} shared-memory mutex waits in 1 s: {mutex:6d} ({per_k})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
