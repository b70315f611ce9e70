#!/usr/bin/env python3
"""The store at a year's scale: builds a synthetic results folder of 100,000 cycles and
1,000,000 windows in the layout the rig writes, compacts it, and prints how long reading takes.

    python benchmarks/store_scale.py [--runs 500] [--cycles-per-run 200] [--windows-per-cycle 10]
                                     [--unit-runs 5] [--out DIR [--reuse]] [--commands [--repeat 3]]

What it builds: ``--runs`` runs over 4 Triton versions and one date per run (a nightly run), each
with ``--cycles-per-run`` cycles of ``--windows-per-cycle`` windows, values drawn like a real soak
(mostly ``clean`` cycles, stop latencies near 2 s, p50 near 100 us, a histogram column of real
size: real HDR histograms, about 600 characters each (``rig.common.hdr``), drawn from 400 so that
compression gains little). ``--unit-runs`` of them are
written the way the rig writes them, one file per unit through ``Store.write`` (400 files per
run), and then compacted by ``Store.compact`` (timed); the others are written already compacted
(one file per table and partition), because writing 100,000 tiny files only to merge them again
would take most of an hour here and measures nothing new.

``--commands`` also times ``rig report DIR`` and ``rig gate DIR --baseline V1 --candidate V2``
(where those commands are built), ``--repeat`` times each (the median, and every run). Prints
the figures; the store stays in DIR with ``--out``, and ``--reuse`` times a store built there
before instead of building it again.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from rig.store import MERGED, TABLES, Store, arrow_schema

from rig.contract.rows import CycleRow, RunRow, WindowRow

VERSIONS = ["2.48.0", "2.49.0", "2.50.0", "2.51.0"]
OUTCOMES = np.array(["clean", "exit_timeout", "finalize_missing", "hung", "infer_error"])
OUTCOME_P = [0.95, 0.02, 0.015, 0.01, 0.005]


def histogram_pool(slowdown: float, n: int, rng) -> dict[str, np.ndarray]:
    """``n`` real windows' latency histograms (HDR, as the rig stores them: ``rig.common.hdr``; about 600
    characters each) and their percentiles, drawn around a p50 of 100 us times ``slowdown``."""
    from rig.common import hdr

    out: dict[str, list] = {k: [] for k in ("histogram", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us")}
    for _ in range(n):
        h = hdr.new()
        values = rng.lognormal(np.log(100 * slowdown), 0.6, 700).astype(int) + 1
        for v, c in zip(values, rng.integers(1, 80, len(values))):
            h.record_value(int(v), int(c))
        out["histogram"].append(hdr.encode(h))
        for q, k in ((50, "p50_us"), (90, "p90_us"), (99, "p99_us"), (99.9, "p999_us"), (100, "max_us")):
            out[k].append(float(h.get_value_at_percentile(q)))
        out["mean_us"].append(float(h.get_mean_value()))
    return {k: np.array(v, dtype=object if k == "histogram" else float) for k, v in out.items()}


def run_tables(k: int, run_id: str, date: str, cycles: int, windows: int, pool: dict, rng) -> dict[str, pa.Table]:
    """One run's rows, as the rig stores them, as Arrow tables."""
    version_slowdown = 1.0 + 0.05 * (k % len(VERSIONS))
    run = RunRow(run_id=run_id, started_at=f"{date}T02:00:00+00:00", command="soak", host="gpu-node-3",
                 cpu="AMD EPYC 7763 64-Core Processor", gpu="NVIDIA H100 80GB HBM3", engine="capi",
                 runtime="container", model="numpy", config=f'cycles = {cycles}\nworkload = "steady"\nusers = 4\n',
                 rig_version="0.1.0", python_version="3.11.9")
    runs = pa.Table.from_pylist([dataclasses.asdict(run)], schema=arrow_schema(RunRow))
    c = np.arange(1, cycles + 1)
    outcome = rng.choice(OUTCOMES, cycles, p=OUTCOME_P)
    clean = outcome == "clean"
    stop = np.where(outcome == "exit_timeout", 30.0, rng.normal(2.0, 0.01, cycles))
    req = rng.integers(60_000, 70_000, cycles)
    col = {f.name: [None] * cycles for f in dataclasses.fields(CycleRow)}
    col.update(run_id=[run_id] * cycles, cycle=c, engine=["capi"] * cycles, model=["numpy"] * cycles,
               retain=["none"] * cycles, outcome=outcome, restart=["fresh-process"] * cycles,
               stop_strategy=["stop"] * cycles, started_at=[f"{date}T02:00:00+00:00"] * cycles,
               start_latency_s=rng.normal(0.19, 0.01, cycles), stop_latency_s=stop,
               finalize_expected=np.ones(cycles, int), finalize_before_stop=clean.astype(int),
               finalize_after_stop=(~clean).astype(int), finalize_errors=np.zeros(cycles, int),
               stubs_alive_after_stop=np.zeros(cycles, int), stubs_killed=np.zeros(cycles, int),
               shm_regions_leaked=np.zeros(cycles, int), requests=req, errors=np.zeros(cycles, int),
               outputs_ok=clean, throughput=req / 5.0 / version_slowdown, workload_s=np.full(cycles, 5.0),
               worker_pid=rng.integers(1000, 60000, cycles), worker_rss_bytes=rng.integers(95, 99, cycles) << 20,
               worker_fds=np.full(cycles, 9), worker_threads=np.full(cycles, 42),
               stub_rss_bytes=rng.integers(40, 44, cycles) << 20, cycle_wall_s=stop + 5.5,
               overhead_s=rng.normal(0.3, 0.02, cycles), cleanup=["ok"] * cycles, bad_outputs=np.zeros(cycles, int),
               lane=["native"] * cycles, schema_version=np.full(cycles, 2))
    cyc = pa.Table.from_pydict(col, schema=arrow_schema(CycleRow))
    n = cycles * windows
    pick = rng.integers(0, len(pool["histogram"]), n)  # distinct enough that compression gains little
    wcol = {f.name: [None] * n for f in dataclasses.fields(WindowRow)}
    wcol.update(run_id=[run_id] * n, cycle=np.repeat(c, windows), window=np.tile(np.arange(1, windows + 1), cycles),
                engine=["capi"] * n, model=["numpy"] * n, tool=["rig"] * n,
                start_s=np.tile(np.arange(windows, dtype=float), cycles), length_s=np.full(n, 1.0),
                mode=["closed"] * n, concurrency=np.full(n, 4), requests=rng.integers(13_000, 16_000, n),
                errors=np.zeros(n, int), throughput=rng.normal(14_000 / version_slowdown, 300, n),
                **{k: v[pick] for k, v in pool.items()},
                hub_block_max_ms=rng.exponential(3.0, n), worker_rss_bytes=rng.integers(95, 99, n) << 20,
                bad_outputs=np.zeros(n, int), lost_samples=np.zeros(n, int), clipped=np.zeros(n, int),
                lane=["native"] * n, schema_version=np.full(n, 2))
    win = pa.Table.from_pydict(wcol, schema=arrow_schema(WindowRow))
    return {"runs": runs, "cycles": cyc, "windows": win}


def _rows(tbl: pa.Table, row_type):
    return [row_type(**r) for r in tbl.to_pylist()]


def build(store: Store, runs: int, cycles: int, windows: int, unit_runs: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    pools = [histogram_pool(1.0 + 0.05 * i, 100, rng) for i in range(len(VERSIONS))]
    print(f"  {len(VERSIONS)} x 100 real HDR histograms drawn ({time.perf_counter() - t0:.0f} s)", flush=True)
    for k in range(runs):
        date = f"2026-{1 + (k // 28) % 12:02d}-{1 + k % 28:02d}"
        version = VERSIONS[k % len(VERSIONS)]
        run_id = f"{date.replace('-', '')}T020000-{k:06x}"
        tables = run_tables(k, run_id, date, cycles, windows, pools[k % len(VERSIONS)], rng)
        if k < unit_runs:  # as the rig writes: a run row, then per cycle its windows, then its row
            store.write("runs", _rows(tables["runs"], RunRow), version, "run", date=date)
            for c in range(cycles):
                unit = f"c{c + 1:06d}"
                store.write("windows", _rows(tables["windows"].slice(c * windows, windows), WindowRow), version,
                            unit, date=date)
                store.write("cycles", _rows(tables["cycles"].slice(c, 1), CycleRow), version, unit, date=date)
        else:
            for table, tbl in tables.items():
                store.put(tbl, store._partition_dir(table, version, date), f"{run_id}-{MERGED}.parquet")
        if (k + 1) % 50 == 0 or k + 1 == runs:
            print(f"  built {k + 1}/{runs} runs ({time.perf_counter() - t0:.0f} s)", flush=True)


def timed(label: str, fn, repeat: int = 3):
    best, out = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    rows = f"{len(out):,} rows" if hasattr(out, "__len__") else ""
    print(f"{label:<58} {best:7.3f} s  {rows}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--cycles-per-run", type=int, default=200)
    ap.add_argument("--windows-per-cycle", type=int, default=10)
    ap.add_argument("--unit-runs", type=int, default=5, help="runs written as unit files, then compacted")
    ap.add_argument("--out", help="build the store here and keep it (default: a temporary folder, removed)")
    ap.add_argument("--commands", action="store_true", help="also time `rig report` and `rig gate` over it")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (--commands): the median is shown")
    ap.add_argument("--reuse", action="store_true", help="with --out: time the store already there, do not build")
    a = ap.parse_args()
    if a.reuse and not (a.out and (Path(a.out) / "cycles").is_dir()):
        ap.error("--reuse needs --out DIR holding a store this script built")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="rig-store-scale-"))
    try:
        store = Store(out)
        if a.reuse:
            print(f"reusing the store in {out}", flush=True)
        else:
            print(f"building {a.runs} runs x {a.cycles_per_run} cycles x {a.windows_per_cycle} windows in {out} "
                  f"({a.unit_runs} run(s) as unit files)", flush=True)
            build(store, a.runs, a.cycles_per_run, a.windows_per_cycle, a.unit_runs)
            units = sum(1 for t in TABLES for f in store.files(t) if not f.endswith(f"-{MERGED}.parquet"))
            print(f"unit files before compaction: {units:,}")
            timed("read cycles, uncompacted units present", lambda: Store(out).read("cycles"), repeat=1)
            t0 = time.perf_counter()
            summary = Store(out).compact()
            took = time.perf_counter() - t0
            merged = sum(m[1] for ms in summary["compacted"].values() for m in ms)
            print(f"{'compaction of ' + str(len(summary['compacted'])) + ' run(s), ' + f'{merged:,} unit files':<58} "
                  f"{took:7.3f} s  ({took / max(1, len(summary['compacted'])):.2f} s per run)")
        files = sum(len(store.files(t)) for t in TABLES)
        size = sum(p.stat().st_size for p in out.rglob("*.parquet"))
        print(f"after compaction: {files:,} files, {size / 2**20:,.0f} MiB")
        timed("read cycles (Store.read)", lambda: Store(out).read("cycles"))
        timed("read runs", lambda: Store(out).read("runs"))
        timed(f"read cycles, triton_version={VERSIONS[-1]}", lambda: Store(out).read("cycles", triton_version=VERSIONS[-1]))
        timed("read cycles, one month (date filter)",
              lambda: Store(out).read("cycles", date=[f"2026-03-{d:02d}" for d in range(1, 32)]))
        run_id = Store(out).read("runs", columns=["run_id"]).run_id.iloc[-1]
        timed("read one run's windows (run_id)", lambda: Store(out).read("windows", run_id))
        timed("read windows without the histogram column", lambda: Store(out).read(
            "windows", columns=[f.name for f in dataclasses.fields(WindowRow) if f.name != "histogram"]))
        timed("read windows, every column", lambda: Store(out).read("windows"), repeat=1)
        if a.commands:
            page = Path(tempfile.mkdtemp(prefix="rig-store-scale-report-")) / "report.html"
            for cmd in (["report", str(out), "--out", str(page)],
                        ["gate", str(out), "--baseline", VERSIONS[0], "--candidate", VERSIONS[-1]]):
                took = []
                for _ in range(max(1, a.repeat)):
                    t0 = time.perf_counter()
                    p = subprocess.run([sys.executable, "-m", "rig", *cmd], capture_output=True, text=True)
                    took.append(time.perf_counter() - t0)
                if "not built yet" in p.stderr:
                    print(f"rig {cmd[0]}: not built yet")
                else:
                    shown = " ".join(cmd[:2]).replace(str(out), "DIR") + " " + " ".join(cmd[2:] if cmd[0] == "gate" else [])
                    runs = ", ".join(f"{t:.2f}" for t in took)
                    print(f"{'rig ' + shown.strip():<58} {statistics.median(took):7.3f} s  median of {len(took)} "
                          f"({runs}; exit {p.returncode})")
            shutil.rmtree(page.parent, ignore_errors=True)
    finally:
        if not a.out:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
