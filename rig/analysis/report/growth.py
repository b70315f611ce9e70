"""`rig report`'s "Growth and slowdown" section: per run, the growth verdicts (``growth_outcome``,
``rig.contract.verdicts.GROWTH_OUTCOMES``) counted, each process kind's median growth per 1,000 requests
with the median of its intervals (``growth_by_process``, else the worker's and the stubs'
columns), the median slowdown within a cycle's load, and the trend across the run's cycles
(``rig.common.trends.run_trend`` over the load run so far, each cycle's throughput and its windows'
median p50); then a figure per run: every process's memory against the requests completed (the
``memory`` table) and the windows' p50/p99 against them, for a few of its cycles (``plotted``).

Stores before schema 11 have neither the columns nor the ``memory`` table: the section then says
there is nothing to show. Pure over frames, but for ``memory``, which reads the table for the
cycles plotted only.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rig.analysis import plots
from rig.analysis.report.html import Figure, Section, Table
from rig.common import trends

TITLE = "Growth and slowdown"
# The cycles' columns the section reads (rig.analysis.report.page reads them beside its own).
COLUMNS = [
    "run_id",
    "cycle",
    "started_at",
    "growth_outcome",
    "memory_samples",
    "worker_growth_per_1k_b",
    "worker_growth_low_b",
    "worker_growth_high_b",
    "stub_growth_per_1k_b",
    "stub_growth_low_b",
    "stub_growth_high_b",
    "stub_growth_model",
    "gpu_growth_per_1k_b",
    "growth_requests",
    "growth_by_process",
    "slowdown_pct",
    "slowdown_low_pct",
    "workload_s",
    "throughput",
]
MEMORY_COLUMNS = ["run_id", "cycle", "sample", "requests", "process", "model", "instance", "rss_bytes"]
MAX_RUNS_PLOTTED = 6  # the latest runs with memory samples
ALL_CYCLES_UNDER = 3  # a run of this many cycles or fewer has every cycle plotted
NOTHING = (
    "Nothing to show: no cycle here recorded a growth verdict (stores before schema 11 have no memory "
    "samples; a soak samples each process's memory through its load unless told not to)."
)


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[col], errors="coerce")


def _counts(s: pd.Series) -> str:
    return ", ".join(f"{k} {n}" for k, n in s.dropna().value_counts().sort_index().items()) or "-"


def _in_order(c: pd.DataFrame) -> pd.DataFrame:
    keys = [k for k in ("started_at", "cycle") if k in c]
    return c.sort_values(keys, kind="stable") if keys else c


def by_process(c: pd.DataFrame) -> pd.DataFrame:
    """One row per cycle and process kind: ``run_id``, ``cycle``, ``process`` (``worker``, ``stub
    <model>``, ``gpu``), ``per_1k``, ``low``, ``high`` (bytes per 1,000 requests); from
    ``growth_by_process`` where stored, else the worker's and the largest stub's columns."""
    out = []
    for r in c.to_dict("records"):
        text = r.get("growth_by_process")
        kinds = {}
        if isinstance(text, str) and text:
            try:
                kinds = {k: v for k, v in json.loads(text).items() if isinstance(v, list) and len(v) == 3}
            except ValueError:
                kinds = {}
        if not kinds:
            for label, key in (("worker", "worker_growth"), (f"stub {r.get('stub_growth_model')}", "stub_growth")):
                v = r.get(f"{key}_per_1k_b")
                if v is not None and v == v:
                    kinds[label] = [v, r.get(f"{key}_low_b"), r.get(f"{key}_high_b")]
            gpu = r.get("gpu_growth_per_1k_b")
            if gpu is not None and gpu == gpu:
                kinds["gpu"] = [gpu, None, None]
        for k, (v, lo, hi) in kinds.items():
            out.append({"run_id": r["run_id"], "cycle": r["cycle"], "process": k, "per_1k": v, "low": lo, "high": hi})
    frame = pd.DataFrame(out, columns=["run_id", "cycle", "process", "per_1k", "low", "high"])
    for col in ("per_1k", "low", "high"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def cycle_p50(windows: pd.DataFrame) -> pd.DataFrame:
    """Each cycle's median window p50 (``run_id``, ``cycle``, ``p50_us``)."""
    if windows is None or not len(windows) or "p50_us" not in windows:
        return pd.DataFrame(columns=["run_id", "cycle", "p50_us"])
    w = windows[windows["tool"].fillna("rig") == "rig"] if "tool" in windows else windows
    return w.groupby(["run_id", "cycle"], as_index=False)["p50_us"].median()


def run_trend(c: pd.DataFrame, p50: pd.DataFrame) -> dict:
    """``rig.common.trends.run_trend`` of one run's cycles (in the order they ran): each at the load run
    so far (cumulative ``workload_s``), its throughput and its windows' median p50."""
    c = _in_order(c).merge(p50, on=["run_id", "cycle"], how="left") if len(p50) else _in_order(c).assign(p50_us=np.nan)
    load = _num(c, "workload_s").fillna(0).cumsum().to_numpy()
    return trends.run_trend(load, _num(c, "throughput").to_numpy(), _num(c, "p50_us").to_numpy())


def _kb(v) -> float | None:
    return None if v is None or v != v else v / 1000.0


def run_rows(cycles: pd.DataFrame, windows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The section's two tables: per run (verdicts, the worker's and the stubs' median growth,
    slowdown, the trend across its cycles) and per run and process kind (median growth per 1,000
    requests and the medians of its interval's bounds), in KB (1,000 bytes)."""
    c = cycles[cycles["growth_outcome"].notna()] if "growth_outcome" in cycles else cycles.iloc[:0]
    p50 = cycle_p50(windows)
    procs = by_process(c)
    runs, kinds = [], []
    for run, g in c.groupby("run_id", sort=False):
        g = _in_order(g)
        pr = procs[procs["run_id"] == run]
        med = pr.groupby("process", sort=True)[["per_1k", "low", "high"]].median()
        stubs = med[med.index.str.startswith("stub ")]
        top = stubs["per_1k"].idxmax() if len(stubs) and stubs["per_1k"].notna().any() else None
        trend = run_trend(g, p50[p50["run_id"] == run])
        slow = _num(g, "slowdown_pct")
        runs.append(
            {
                "run": run,
                "cycles": len(g),
                "growth": _counts(g["growth_outcome"]),
                "worker KB/1k req": _kb(med.loc["worker", "per_1k"]) if "worker" in med.index else None,
                "stubs KB/1k req": _kb(stubs.loc[top, "per_1k"]) if top else None,
                "stub model": top[len("stub ") :] if top else None,
                "slowdown within a load %": float(slow.median()) if slow.notna().any() else None,
                "across cycles: throughput %": trend.get("throughput_change_pct"),
                "p50 %": trend.get("p50_change_pct"),
                "slowdown %": trend.get("slowdown_pct"),
                "at least %": trend.get("slowdown_low_pct"),
                "% per min of load": trend.get("pct_per_min"),
            }
        )
        for process, m in med.iterrows():
            n = int(pr.loc[pr["process"] == process, "per_1k"].notna().sum())
            kinds.append(
                {
                    "run": run,
                    "process": process,
                    "cycles": n,
                    "KB/1k req (median)": _kb(m["per_1k"]),
                    "low": _kb(m["low"]),
                    "high": _kb(m["high"]),
                }
            )
    return pd.DataFrame(runs), pd.DataFrame(kinds)


def plotted(c: pd.DataFrame) -> list[int]:
    """The cycles of a run drawn: every one of a short run, else the one whose stubs grew most
    per 1,000 requests and the last."""
    c = _in_order(c)
    cycles = [int(x) for x in c["cycle"]]
    if len(cycles) <= ALL_CYCLES_UNDER:
        return cycles
    stub = _num(c, "stub_growth_per_1k_b")
    picked = [int(c.loc[stub.idxmax(), "cycle"])] if stub.notna().any() else []
    return sorted(dict.fromkeys([*picked, cycles[-1]]))


def memory(root: str, run_id: str, cycles: list[int]) -> pd.DataFrame:
    """The ``memory`` rows of those cycles of a run, with ``mib`` (RSS, in MiB) and a
    ``label`` per process (``worker``, ``stub <model>/<instance>``); empty where the store has none."""
    from rig.common.errors import RigError
    from rig.store import Store

    try:
        m = Store(root).read("memory", run_id=run_id, columns=MEMORY_COLUMNS, cycle=cycles)
    except (RigError, OSError, ValueError):
        return pd.DataFrame(columns=[*MEMORY_COLUMNS, "mib", "label"])
    return with_labels(m)


def with_labels(m: pd.DataFrame) -> pd.DataFrame:
    """``memory`` rows with ``mib`` and ``label`` (see ``memory``)."""
    m = m.copy()
    value = _num(m, "rss_bytes")
    m["mib"] = value / 2**20
    m["label"] = [
        "worker" if p == "worker" else f"stub {mod}/{inst}"
        for p, mod, inst in zip(
            m["process"],
            m.get("model", pd.Series(index=m.index, dtype=object)),
            m.get("instance", pd.Series(index=m.index, dtype=object)),
        )
    ]
    return m


def latency(windows: pd.DataFrame, run_id: str, cycles: list[int]) -> pd.DataFrame:
    """The windows of those cycles with ``requests_done`` (cumulative requests within the cycle at
    each window's end), p50 and p99."""
    cols = ["cycle", "window", "requests_done", "p50_us", "p99_us"]
    if windows is None or not len(windows) or "p50_us" not in windows:
        return pd.DataFrame(columns=cols)
    w = windows[(windows["run_id"] == run_id) & windows["cycle"].isin(cycles)]
    if "tool" in w:
        w = w[w["tool"].fillna("rig") == "rig"]
    w = w.sort_values(["cycle", "window"])
    w = w.assign(requests_done=_num(w, "requests").fillna(0).groupby(w["cycle"]).cumsum())
    return w[cols].reset_index(drop=True)


def growth_section(root: str, cycles: pd.DataFrame, windows: pd.DataFrame) -> Section:
    """The section (see the module's docstring); says there is nothing to show where no cycle
    has a growth verdict."""
    sec = Section(TITLE)
    if "growth_outcome" not in cycles or not cycles["growth_outcome"].notna().any():
        return sec.add(NOTHING)
    runs, kinds = run_rows(cycles, windows)
    sec.add(
        Table(
            runs,
            "Per run: the growth verdicts counted; the worker's and the stubs' (the model that grew "
            "most) median growth per 1,000 requests, KB (Theil-Sen over each cycle's load, the warm-up "
            "left out); the median slowdown within a cycle's load (the end against the start: p50's rise "
            "or throughput's fall); across the run's cycles, the Theil-Sen change of throughput and "
            "median p50 from the first cycle to the last against the load run so far, the slowdown it "
            "reads with its interval's lower bound, and per minute of load (- under 4 cycles)",
        ),
        Table(
            kinds,
            "Per run and process kind: the median growth per 1,000 requests, KB, and the medians of "
            "its 95 % intervals' bounds",
        ),
    )
    shown = 0
    for run, g in cycles[cycles["growth_outcome"].notna()].groupby("run_id", sort=False):
        if shown >= MAX_RUNS_PLOTTED:
            sec.add(f"Figures for the first {MAX_RUNS_PLOTTED} runs with memory samples only.")
            break
        picked = plotted(g)
        mem = memory(root, str(run), picked)
        if not len(mem):
            continue
        lat = latency(windows, str(run), picked)
        shown += 1
        which = ", ".join(str(c) for c in picked)
        sec.add(
            Figure(
                plots.render("growth_figure", mem, lat, f"run {run}, cycle(s) {which}"),
                f"Run {run}, cycle(s) {which}: each process's memory (RSS) against the requests "
                "completed in its cycle, and the windows' p50 and p99 against them",
            )
        )
    if not shown:
        sec.add("No memory samples stored for these runs (the memory table is empty or absent): no figure.")
    return sec
