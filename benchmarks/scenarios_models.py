#!/usr/bin/env python3
"""The model-side lifecycle scenarios of issue 28 (``models/scenarios/``), each soaked through
the rig with its fault on (the positive control) and off (the negative control), and one table
of what the cycles recorded: the figures of ``docs/measurements/scenarios.md``.

Every scenario is a model repository whose models read a config parameter ``fault`` ("on" as
written); the control is a copy of it with ``fault`` "off". Each cell is one run of

    rig soak --model-repository REPO --cycles 3 --exit-timeout 3 --request-timeout 5 \\
        --workload steady --workload-seconds 2 --users 2 [--engine E] [--runtime X]

and its rows are read back from the results with pandas. ``stub_segfaults`` counts the kernel's
lines (``dmesg``) about Python-backend stubs killed by SIGSEGV during the cell ("n/a" where the
kernel log cannot be read): a stub that crashes at its own exit leaves no other trace. On the host (the C API)::

    python benchmarks/scenarios_models.py                    # core 2.51.0 (embedded 0.7.0)
    python benchmarks/scenarios_models.py --runtime 0.5.10   # core 2.48.0

and the official bindings, inside the sandbox::

    bash tests/sandbox/official.sh --run python benchmarks/scenarios_models.py --engine tritonserver [--runtime 0.5.10]
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "models" / "scenarios"
NAMES = ("sender-kept", "sender-after-return", "metrics", "bls-in-flight")
_FAULT = re.compile(r'(key:\s*"fault"\s*value:\s*\{\s*string_value:\s*")(\w+)(")')


def repository(scenario: str, fault: str, into: Path) -> Path:
    """A copy of the scenario's repository with every model's ``fault`` parameter set."""
    repo = into / f"{scenario}-{fault}"
    shutil.copytree(SCENARIOS / scenario, repo)
    for config in repo.glob("*/config.pbtxt"):
        config.write_text(_FAULT.sub(rf"\g<1>{fault}\g<3>", config.read_text()))
    return repo


def soak(repo: Path, results: Path, args: argparse.Namespace) -> subprocess.CompletedProcess:
    cmd = [str(Path(sys.executable).parent / "rig"), "soak", "--model-repository", str(repo),
           "--cycles", str(args.cycles), "--exit-timeout", str(args.exit_timeout),
           "--request-timeout", str(args.request_timeout), "--workload", "steady",
           "--workload-seconds", str(args.workload_seconds), "--users", str(args.users),
           "--engine", args.engine, "--results", str(results)]
    if args.runtime:
        cmd += ["--runtime", args.runtime]
    return subprocess.run(cmd, capture_output=True, text=True)


def stub_segfaults() -> list[str] | None:
    """The kernel's lines about Python-backend stubs that died of a signal (``dmesg``), or None
    where the kernel log cannot be read. A stub that crashes at its own exit, after the model
    unloaded, leaves no other trace: the rig sees a clean stop and no stub left behind."""
    try:
        p = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return [line for line in p.stdout.splitlines() if "triton_python_b" in line and "segfault" in line]


def counts(series: pd.Series, n: int) -> str:
    return ", ".join(f"{k} {v}/{n}" for k, v in series.value_counts().items())


def summary(scenario: str, fault: str, results: Path, p: subprocess.CompletedProcess,
            segfaults: int | None) -> dict:
    if not (results / "cycles").exists():
        tail = (p.stdout + p.stderr).strip().splitlines()[-1:] or ["no output"]
        return {"scenario": scenario, "fault": fault, "outcome": f"no cycles: {tail[0]}"}
    c = pd.read_parquet(results / "cycles")
    n = len(c)
    return {"scenario": scenario, "fault": fault, "core": c.triton_version.iloc[0], "engine": c.engine.iloc[0],
            "outcome": counts(c.outcome, n), "load": counts(c.load_outcome, n),
            "stop_p50_s": round(float(c.stop_latency_s.median()), 3),
            "finalize": f"{int(c.finalize_before_stop.sum())}/{int(c.finalize_expected.sum())}"
                        f" (+{int(c.finalize_after_stop.sum())} after)",
            "stubs_killed": int(c.stubs_killed.sum()), "shm_leaked": int(c.shm_regions_leaked.sum()),
            "cleanup": counts(c.cleanup.fillna("ok"), n),
            "stub_segfaults": "n/a" if segfaults is None else segfaults,
            "detail": (c.detail.dropna().iloc[0][:160] if c.detail.notna().any() else "")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default=",".join(NAMES), help="comma-separated (default all)")
    ap.add_argument("--faults", default="on,off", 
                    help="on (positive control), off (negative), or a scenario's own value "
                         "(sender-after-return: single); default on,off")
    ap.add_argument("--runtime", default=None, help="embedded runtime, e.g. 0.5.10 (default the rig's: 0.7.0)")
    ap.add_argument("--engine", default="capi", choices=("capi", "tritonserver"),
                    help="tritonserver: inside the sandbox only (default capi)")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--exit-timeout", type=float, default=3)
    ap.add_argument("--request-timeout", type=float, default=5)
    ap.add_argument("--workload-seconds", type=float, default=2)
    ap.add_argument("--users", type=int, default=2)
    ap.add_argument("--keep", default=None, help="keep the results under this folder (default: a temp dir)")
    args = ap.parse_args(argv)
    unknown = set(args.scenarios.split(",")) - set(NAMES)
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(sorted(unknown))}; known: {', '.join(NAMES)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="scenarios-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        for scenario in args.scenarios.split(","):
            for fault in args.faults.split(","):
                repo = repository(scenario, fault, Path(tmp))
                results = base / f"results-{scenario}-{fault}-{args.engine}-{args.runtime or 'default'}"
                shutil.rmtree(results, ignore_errors=True)
                before = stub_segfaults()
                p = soak(repo, results, args)
                after = stub_segfaults()
                segfaults = None if before is None or after is None else len(set(after) - set(before))
                rows.append(summary(scenario, fault, results, p, segfaults))
                print(f"{scenario} fault={fault}: {rows[-1].get('outcome')} | load {rows[-1].get('load')}",
                      file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    print(f"# {datetime.date.today()} engine {args.engine}, runtime {args.runtime or 'default'}")
    print(table.drop(columns=["detail"], errors="ignore").to_string(index=False))
    for r in rows:
        if r.get("detail"):
            print(f"{r['scenario']} fault={r['fault']}: {r['detail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
