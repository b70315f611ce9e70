#!/usr/bin/env python3
"""Which embedded Triton cores the PyPI ``tritonserver`` bindings work over, measured.

For each bindings release (unpacked with ``pip install --target`` into the rig's cache) and each
installed embedded runtime that has a stub for this Python, runs two real cycles through the
official engine: every reference released (expect ``clean``), and the last response kept
(expect ``exit_timeout``: server#8755). Prints a Markdown table. Needs CPython 3.12 on glibc
2.39+: run it inside the sandbox,

    bash tests/sandbox/official.sh --run python benchmarks/official_compat.py

(install the runtimes first: ``rig runtime install 0.5.4`` ... ``0.7.0``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from rig.parent import runtime

ROOT = Path(__file__).resolve().parent.parent


def bindings(version: str) -> Path:
    target = runtime.cache_dir().parent / "bindings" / f"tritonserver-{version}"
    if not (target / "tritonserver").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        str(target), f"tritonserver=={version}"], check=True)
    return target


def cycle(path: Path, rt: str, retain: str, results: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(path))
    proc = subprocess.run([sys.executable, "-m", "rig", "cycle", "--engine", "tritonserver",
                           "--runtime", rt, "--retain", retain, "--exit-timeout", "3",
                           "--results", results], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        line = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return "refused: " + (line.split("it lacks ", 1)[-1].split(";")[0] if "it lacks " in line else line[:120])
    cycles = pd.read_parquet(Path(results) / "cycles")
    row = cycles.sort_values("started_at").iloc[-1]
    fin = f"{int(row.finalize_before_stop or 0)}/{int(row.finalize_expected or 0)}"
    return f"{row.outcome} {row.stop_latency_s:.1f} s, fin {fin}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bindings", default="2.70.0,2.71.0,2.72.0,2.73.0")
    ap.add_argument("--runtimes", default="", help="default: every installed runtime with a stub for this Python")
    args = ap.parse_args()
    rts = [r for r in runtime.list_embedded() if runtime.python_tag() in r["stubs"]]
    if args.runtimes:
        rts = [r for r in rts if r["package_version"] in args.runtimes.split(",")]
    rts.sort(key=lambda r: tuple(int(x) for x in r["triton_version"].split(".")))
    print("| bindings | core | released: outcome, stop, finalize before stop | last response kept |")
    print("| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as results:
        for version in args.bindings.split(","):
            path = bindings(version)
            for r in rts:
                cells = [cycle(path, r["package_version"], retain, results)
                         for retain in ("none", "last-response")]
                print(f"| {version} | {r['triton_version']} ({r['package_version']}) | {cells[0]} | {cells[1]} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
