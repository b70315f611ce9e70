"""The figures of `benchmarks/gpu_check.sh --kit`, read back from its results, in the form of
docs/measurements/gpu.md: one Markdown table per kind of step, printed and written to OUT/gpu.md.

    python benchmarks/gpu_check_figures.py OUT GPU_NAME MODEL

OUT holds selftest.tsv (benchmarks/gpu_selftest.py's line per check: check, status, detail; shown
first, as it ran first), steps.tsv (the script's record of each step) and one results folder per
step (soak-cpu, soak-gpu, retained-response, bench). NVML per process is what the cycles and windows stored
(gpu_memory_bytes: the stubs' and the worker's, or the device's where PIDs cannot match, as
gpu_memory_source says; gpu_utilization per window); per device it is read live here, through
pynvml, where it loads ("no GPU" where it does not)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pandas as pd

from rig.analysis import frames
from rig.common.text import md_cell
from rig.store import Store


def mib(v) -> str:
    return "-" if v is None or pd.isna(v) else f"{v / 2**20:,.0f} MiB"


def pct(v) -> str:
    return "-" if v is None or pd.isna(v) else f"{v:.0f} %"


def num(v, fmt: str = ",.0f") -> str:
    return "-" if v is None or pd.isna(v) else format(v, fmt)


def counts(s: pd.Series) -> str:
    return ", ".join(f"{k} {v}" for k, v in s.fillna("-").value_counts().items()) or "-"


def values(s: pd.Series) -> str:
    return ", ".join(sorted(str(v) for v in s.dropna().unique())) or "-"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |",
            *["| " + " | ".join(r) + " |" for r in rows]]


def read(folder: Path) -> dict[str, pd.DataFrame] | None:
    if not folder.is_dir():
        return None
    store = Store(str(folder))
    return {t: store.read(t) for t in ("runs", "cycles", "windows")}


def soak_row(step: str, data: dict[str, pd.DataFrame]) -> list[str]:
    c, w = data["cycles"], data["windows"]
    done, expected = frames.finalize_counts(c)
    src = values(c["gpu_memory_source"]) if "gpu_memory_source" in c else "-"
    copies = c["input_copies"].sum() if "input_copies" in c and c["input_copies"].notna().any() else None
    return [step, values(c["model"]), values(w["input_memory"]) if "input_memory" in w else "-",
            values(w["output_memory"]) if "output_memory" in w else "-", str(len(c)),
            counts(c["outcome"]), counts(c["load_outcome"]), num(c["throughput"].median()),
            f"{num(c['stop_latency_s'].median(), '.3f')} / {num(c['stop_latency_s'].max(), '.3f')}",
            f"{done}/{expected}", num(copies), f"{mib(c['gpu_memory_bytes'].max())} ({src})",
            pct(w["gpu_utilization"].max())]


def bench_rows(data: dict[str, pd.DataFrame]) -> list[list[str]]:
    w = data["windows"]
    rows = []
    perf = frames.performance(w, by=["model"])
    for _, r in perf.sort_values(["model", "concurrency"]).iterrows():
        g = w[(w["model"] == r["model"]) & (w["concurrency"] == r["concurrency"])]
        rows.append([str(r["model"]), str(r["point"]),
                     values(g["input_memory"]) if "input_memory" in g else "-",
                     f"{r['windows']}", num(r["throughput"]), num(r.get("p50_us")), num(r.get("p99_us")),
                     str(int(r["errors"])), mib(g["gpu_memory_bytes"].max()), pct(g["gpu_utilization"].max())])
    return rows


def selftest(out: Path) -> list[list[str]] | None:
    """The self-test's checks (check, status, detail), as benchmarks/gpu_selftest.py wrote them;
    None where it wrote none."""
    path = out / "selftest.tsv"
    if not path.is_file():
        return None
    rows = [line.split("\t", 2) for line in path.read_text().splitlines() if line.strip()]
    return [[md_cell(c) for c in (r + ["", ""])[:3]] for r in rows]


def devices() -> list[list[str]] | str:
    """Every GPU NVML sees, now: name, memory, utilisation, its compute processes (host PIDs)."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - any failure to load NVML means: no GPU figures here
        return f"no GPU (NVML: {e or type(e).__name__})"
    try:
        rows = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            try:
                util = f"{pynvml.nvmlDeviceGetUtilizationRates(h).gpu} %"
            except pynvml.NVMLError as e:
                util = f"- ({e})"
            try:
                procs = "; ".join(f"pid {p.pid}: {mib(p.usedGpuMemory)}"
                                  for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)) or "none"
            except pynvml.NVMLError as e:
                procs = f"- ({e})"
            rows.append([str(i), name, f"{mib(mem.used)} / {mib(mem.total)}", util, procs])
        return rows or "no GPU (NVML sees no device)"
    finally:
        pynvml.nvmlShutdown()


def main(out: Path, gpu_name: str, model: str) -> int:
    steps = pd.read_csv(out / "steps.tsv", sep="\t", dtype=str, keep_default_na=False)
    lines = [f"## GPU check: {model} model on {gpu_name if gpu_name != 'none' else 'no GPU'}, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC", ""]
    stored = {d: read(out / d) for d in steps["results"].unique() if d not in ("", "-")}
    runs = pd.concat([s["runs"] for s in stored.values() if s is not None and len(s["runs"])] or [pd.DataFrame()])
    if len(runs):
        lines += [f"Triton {values(runs['triton_version'])}, runtime {values(runs['runtime'])}, "
                  f"engine {values(runs['engine'])}; GPU as the runs record it: {values(runs['gpu'])}; "
                  f"numpy {values(runs['numpy_version'])}, the stubs' numpy {values(runs['stub_numpy_version'])}"
                  + (f"; GPU notes: {values(runs['gpu_notes'])}" if "gpu_notes" in runs else ""), ""]
    checks = selftest(out)
    lines += ["### Self-test (benchmarks/gpu_selftest.py, before any step)", ""]
    lines += table(["check", "status", "detail"], checks) if checks else ["not run (no selftest.tsv)"]
    lines += ["", "### Steps", ""]
    lines += table(["step", "status", "exit", "s", "command or reason"],
                   [[r.step, r.status, r.exit, r.seconds, r.note if r.status == "skipped" else f"`{r.command}`"]
                    for r in steps.itertuples()])
    soaks = [[r.step, stored.get(r.results)] for r in steps.itertuples()
             if r.status != "skipped" and r.step.startswith(("soak", "retained"))]
    rows = [soak_row(step, data) for step, data in soaks if data is not None and len(data["cycles"])]
    lines += ["", "### Soaks (per cycle: outcome, throughput, stop latency, finalize; NVML per process)", ""]
    lines += table(["step", "model", "inputs in", "outputs in", "cycles", "outcomes", "load",
                    "throughput median (infer/s)", "stop latency median / max (s)", "finalize before stop",
                    "input copies", "GPU memory max (source)", "GPU utilisation max"], rows) if rows else ["none ran"]
    bench = stored.get("bench")
    rows = bench_rows(bench) if bench is not None and len(bench["windows"]) else []
    lines += ["", "### Bench (measured windows; latency percentiles of the merged histograms)", ""]
    lines += table(["model", "point", "inputs in", "windows", "throughput (infer/s)", "p50 (us)", "p99 (us)",
                    "errors", "GPU memory max", "GPU utilisation max"], rows) if rows else ["none ran"]
    dev = devices()
    lines += ["", "### GPUs, per device (NVML, read live at the end)", ""]
    lines += [dev] if isinstance(dev, str) else [
        *table(["device", "name", "memory used / total", "utilisation", "compute processes"], dev)]
    failed = steps[steps["status"] == "failed"]
    statuses = pd.Series([c[1] for c in checks or []], dtype=str).value_counts()
    tally = ", ".join(f"{n} {status}" for status, n in statuses.items()) or "not run"
    lines += ["", f"{(steps['status'] == 'passed').sum()} passed, {len(failed)} failed, "
              f"{(steps['status'] == 'skipped').sum()} skipped"
              + (f" (failed: {', '.join(failed['step'])})" if len(failed) else "")
              + f"; self-test: {tally}", ""]
    text = "\n".join(lines)
    (out / "gpu.md").write_text(text)
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
