"""Plots from the store's tables: pure functions from DataFrames to figures (usable in a notebook)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bench_points(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (tool, point): each repeat's figures (the medians over its last 3 windows,
    the first being warm-up when there are more; a repeat is one ``cycle``), then the median
    over the repeats: the figures bench prints."""
    if windows.empty:
        return pd.DataFrame()
    from rig.analysis.sweeps import summarize

    w = windows.copy()
    w["point"] = w["concurrency"].where(w["mode"] == "closed", w["rate"])
    repeats = []
    for (tool, point, _cycle), g in w.groupby(["tool", "point", "cycle"]):
        repeats.append({"tool": tool, "point": point, **summarize(g.sort_values("window").to_dict("records"))})
    r = pd.DataFrame(repeats)
    out = r.groupby(["tool", "point"], as_index=False)[["throughput", "p50_us", "p99_us"]].median()
    return out.sort_values(["tool", "point"]).reset_index(drop=True)


def bench_figure(windows: pd.DataFrame, path: str | Path) -> Path:
    """Throughput and latency against load, the rig beside perf_analyzer where both were run."""
    plt = pyplot()
    pts = bench_points(windows)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for k, (tool, g) in enumerate(pts.groupby("tool")):
        color = f"C{k}"
        a.plot(g.point, g.throughput, marker="o", label=tool, color=color)
        b.plot(g.point, g.p50_us, marker="o", label=f"{tool} p50", color=color)
        b.plot(g.point, g.p99_us, marker="x", linestyle="--", label=f"{tool} p99", color=color)
    xlabel = "concurrency" if (windows["mode"] == "closed").all() else "load point"
    a.set(xlabel=xlabel, ylabel="infer/s", title="Throughput")
    b.set(xlabel=xlabel, ylabel="latency (µs)", title="Latency", yscale="log")
    a.legend()
    b.legend(fontsize=8)
    return save(fig, (a, b), path)


def soak_figure(cycles: pd.DataFrame, path: str | Path) -> Path:
    """Stop latency per cycle coloured by outcome, finalize success, and worker/stub RSS."""
    plt = pyplot()
    c = cycles.sort_values("cycle")
    fig, (a, b, d) = plt.subplots(1, 3, figsize=(15, 4))
    for outcome, g in c.groupby("outcome"):
        a.scatter(g.cycle, g.stop_latency_s, label=outcome, s=14)
    a.set(xlabel="cycle", ylabel="stop latency (s)", title="Stop latency by outcome")
    a.set_ylim(bottom=0, top=max(1.0, float(c.stop_latency_s.max() or 0) * 1.15))
    a.legend(fontsize=8)
    exp = c.finalize_expected.fillna(0).cumsum()
    seen = c.finalize_before_stop.fillna(0).cumsum()
    b.plot(c.cycle, (seen / exp.where(exp > 0)).fillna(0) * 100)
    b.set(xlabel="cycle", ylabel="%", title="Finalize before stop returned (cumulative)", ylim=(-5, 105))
    d.plot(c.cycle, c.worker_rss_bytes / 2**20, label="worker")
    if c.stub_rss_bytes.notna().any():
        d.plot(c.cycle, c.stub_rss_bytes / 2**20, label="stubs")
    d.set(xlabel="cycle", ylabel="MiB", title="RSS before stop")
    d.set_ylim(bottom=0)
    d.legend(fontsize=8)
    return save(fig, (a, b, d), path)


def save(fig, axes, path) -> Path:
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


# Figures of `rig report`: each returns a matplotlib Figure; ``png`` turns one into bytes,
# ``render`` does both, in a process of its own while ``start_renderer``'s runs.

RENDER_TIMEOUT_S = 120  # a figure the renderer has not drawn by then is drawn here
_renderer = None  # the figure process (a ProcessPoolExecutor of one), or None: figures render here


def _warm() -> None:
    """Matplotlib imported, its fonts loaded: the renderer's first task."""
    png(pyplot().figure(figsize=(1, 1)), dpi=10)


def _render(name: str, args: tuple, kwargs: dict) -> bytes:
    return png(globals()[name](*args, **kwargs))


class Pending:
    """A figure the renderer draws meanwhile; ``result()`` is its PNG bytes (drawn here
    instead should the renderer have failed)."""

    def __init__(self, future, name: str, args: tuple, kwargs: dict):
        self.future, self.recipe = future, (name, args, kwargs)

    def result(self) -> bytes:
        try:
            return self.future.result(timeout=RENDER_TIMEOUT_S)
        except Exception:  # the renderer died, hangs or could not take the data: draw it here  # noqa: BLE001
            stop_renderer()  # (a hung one is killed: the figures after this one fail fast)
            return _render(*self.recipe)


def submit(fn, *args):
    """``fn(*args)`` (a module-level function) in the renderer's process, as a future; None
    where no renderer runs. It starts before any reading: it reads a store afresh."""
    if _renderer is None:
        return None
    try:
        return _renderer.submit(fn, *args)
    except Exception:  # noqa: BLE001
        return None


def warm() -> None:
    """Have the renderer import matplotlib and load its fonts now, ahead of the first figure."""
    submit(_warm)


def start_renderer() -> bool:
    """Draw the figures ``render`` is asked for in a forked process (importing matplotlib and
    drawing there while this one reads and computes: a second core's worth), where fork is
    the platform's way (Linux). Call it before reading anything (no threads yet: the fork is
    safe); ``stop_renderer`` ends it. False where figures will render here instead."""
    global _renderer
    import multiprocessing as mp
    import sys
    import threading

    if _renderer is not None:
        return True
    if not sys.platform.startswith("linux") or "fork" not in mp.get_all_start_methods():
        return False
    if threading.active_count() > 1:  # another thread may hold a lock the fork would copy held
        return False
    from concurrent.futures import ProcessPoolExecutor

    try:
        _renderer = ProcessPoolExecutor(1, mp_context=mp.get_context("fork"))
        _renderer.submit(int)  # forks now
    except Exception:  # no processes to be had: figures render here  # noqa: BLE001
        _renderer = None
    return _renderer is not None


def stop_renderer() -> None:
    """End the renderer (one that does not end within seconds is killed)."""
    global _renderer
    if _renderer is None:
        return
    procs = list((getattr(_renderer, "_processes", None) or {}).values())
    _renderer.shutdown(wait=False, cancel_futures=True)
    _renderer = None
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join(10)


def render(name: str, *args, **kwargs):
    """``png(<name>(*args, **kwargs))`` of this module's figures: the PNG bytes, or while a
    renderer runs (``start_renderer``) a ``Pending`` whose ``result()`` they are."""
    if _renderer is not None:
        try:
            return Pending(_renderer.submit(_render, name, args, kwargs), name, args, kwargs)
        except Exception:  # a broken renderer: draw here from now on  # noqa: BLE001
            stop_renderer()
    return _render(name, args, kwargs)


def png(fig, dpi: int = 96) -> bytes:
    """The figure as PNG bytes (closed afterwards): what the report embeds as a data URI."""
    import io

    for ax in fig.axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    return buf.getvalue()


def ecdf_figure(series: dict[str, dict], title: str, xlabel: str):
    """One panel per measure (e.g. stop and start latency): the empirical CDF of each group's
    values. ``series`` maps a panel title to {group label: values}."""
    plt = pyplot()
    fig, axes = plt.subplots(1, max(1, len(series)), figsize=(5.5 * max(1, len(series)), 3.6), squeeze=False)
    for ax, (panel, groups) in zip(axes[0], series.items()):
        for k, (label, values) in enumerate(groups.items()):
            v = pd.Series(values, dtype="float64").dropna()
            n = len(v)
            if n > 2000:  # drawn through 1,001 quantiles: the same curve at this size, a fraction of the time
                v = v.quantile([q / 1000 for q in range(1001)]).reset_index(drop=True)
            if n:
                ax.ecdf(v, label=f"{label} (n={n})", color=f"C{k}")
        ax.set(title=panel, xlabel=xlabel, ylabel="fraction of cycles")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def latency_distribution_figure(hists: dict[str, tuple], title: str = "Latency distribution (merged HDR histograms)"):
    """Latency against percentile, HDR style (x: 1/(1-q) on a log axis, so the tail spreads out).
    ``hists`` maps a group label to (percentiles 0..100, latency in µs) arrays."""
    import numpy as np

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.8))
    ticks = np.array([0.0, 90.0, 99.0, 99.9, 99.99])
    for k, (label, (q, us)) in enumerate(hists.items()):
        q = np.clip(np.asarray(q, dtype=float), 0, 99.999)
        ax.plot(1 / (1 - q / 100), np.asarray(us, dtype=float) / 1000, label=label, color=f"C{k}")
    ax.set_xscale("log")
    ax.set_xticks(1 / (1 - ticks / 100), [f"p{t:g}" if t else "p0" for t in ticks])
    ax.set(ylabel="latency (ms)", title=title)
    ax.set_ylim(bottom=0)
    if hists:
        ax.legend(fontsize=7)
    return fig


def sweep_figure(points: pd.DataFrame, group: str = "group", knees: dict | None = None):
    """Throughput (with its interval) and p99 against the load point, one line per group; a
    group's knee is ringed. ``points`` has group, point, throughput, throughput_lo, throughput_hi, p99_us."""
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for k, (label, g) in enumerate(points.groupby(group, sort=False)):
        g = g.sort_values("point")
        c = f"C{k}"
        a.plot(g.point, g.throughput, marker="o", color=c, label=str(label))
        if {"throughput_lo", "throughput_hi"} <= set(g):
            a.fill_between(g.point, g.throughput_lo, g.throughput_hi, color=c, alpha=0.2)
        b.plot(g.point, g.p99_us / 1000, marker="o", color=c, label=str(label))
        if knees and knees.get(label) is not None:
            kp = g[g.point == knees[label]]
            a.scatter(kp.point, kp.throughput, s=160, facecolors="none", edgecolors=c, linewidths=2)
    a.set(xlabel="load point", ylabel="infer/s", title="Throughput (95 % interval; ringed: knee)")
    b.set(xlabel="load point", ylabel="p99 latency (ms)", title="p99 latency", yscale="log")
    a.legend(fontsize=7)
    return fig


def comparison_figure(rows: pd.DataFrame, title: str):
    """A forest plot: each row's estimate and 95 % interval, one line per (metric, group).
    ``rows`` has label, estimate, lo, hi and significant (bool); significant rows are red."""
    plt = pyplot()
    n = len(rows)
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * max(n, 1)))
    y = list(range(n))[::-1]
    for yi, (_, r) in zip(y, rows.iterrows()):
        color = "C3" if r.get("significant") else "C0"
        lo, hi = r.get("lo"), r.get("hi")
        if pd.notna(lo) and pd.notna(hi):
            ax.plot([lo, hi], [yi, yi], color=color, lw=2)
        ax.plot([r["estimate"]], [yi], "o", color=color)
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(y, [str(s) for s in rows["label"]], fontsize=7)
    ax.set(xlabel="difference from the baseline (%)", title=title)
    return fig


def trend_figure(nightly: pd.DataFrame, metric: str, ylabel: str, changes: dict | None = None):
    """A metric per night, one line per series; a night where a series steps is marked with a
    dashed line. ``nightly`` has series, date, and ``metric``; ``changes`` maps series to dates."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for k, (label, g) in enumerate(nightly.groupby("series", sort=False)):
        g = g.sort_values("date")
        c = f"C{k}"
        x = pd.to_datetime(g.date)
        ax.plot(x, g[metric], marker="o", ms=3, color=c, label=str(label))
        for d in (changes or {}).get(label, []):
            ax.axvline(pd.to_datetime(d), color=c, ls="--", lw=1.2)
            ax.annotate(
                f"step {d}",
                (pd.to_datetime(d), ax.get_ylim()[1]),
                fontsize=7,
                color=c,
                rotation=90,
                va="top",
                ha="right",
            )
    ax.set(ylabel=ylabel, title=f"{ylabel} per night (dashed: change point)")
    fig.autofmt_xdate()
    ax.legend(fontsize=7)
    return fig


def growth_figure(memory: pd.DataFrame, latency: pd.DataFrame, title: str = ""):
    """Two panels over the requests completed in a cycle: each process's memory in MiB (one line
    per process and cycle: ``memory`` has cycle, requests, label, mib), and the windows' p50 and
    p99 (``latency`` has cycle, requests_done, p50_us, p99_us; a panel that says so where it is
    empty). A cycle's lines share a style; a process keeps its colour across cycles."""
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    cycles = sorted(set(memory["cycle"]) | set(latency["cycle"] if len(latency) else ()))
    styles = {c: ("-", "--", ":", "-.")[k % 4] for k, c in enumerate(cycles)}
    colours = {label: f"C{k}" for k, label in enumerate(sorted(set(memory["label"]), key=lambda s: (s != "worker", s)))}
    for (cycle, label), g in memory.groupby(["cycle", "label"], sort=True):
        g = g.dropna(subset=["requests", "mib"]).sort_values("requests")
        if len(g):
            a.plot(
                g["requests"],
                g["mib"],
                ls=styles[cycle],
                color=colours[label],
                marker=".",
                ms=3,
                label=f"{label} (cycle {cycle})" if len(cycles) > 1 else label,
            )
    a.set(xlabel="requests completed", ylabel="RSS, MiB", title="Memory per process")
    if a.get_legend_handles_labels()[0]:
        a.legend(fontsize=7)
    for cycle, g in latency.groupby("cycle", sort=True) if len(latency) else ():
        suffix = f" (cycle {cycle})" if len(cycles) > 1 else ""
        b.plot(
            g["requests_done"],
            g["p50_us"] / 1000,
            ls=styles.get(cycle, "-"),
            color="C0",
            marker="o",
            ms=3,
            label="p50" + suffix,
        )
        b.plot(
            g["requests_done"],
            g["p99_us"] / 1000,
            ls=styles.get(cycle, "-"),
            color="C3",
            marker="x",
            ms=3,
            label="p99" + suffix,
        )
    if len(latency):
        b.set_ylim(bottom=0)
        b.legend(fontsize=7)
    else:
        b.text(
            0.5,
            0.5,
            "no windows stored for these cycles\n(a fixed count of requests, no workload)",
            ha="center",
            va="center",
            transform=b.transAxes,
            fontsize=9,
            color="0.4",
        )
    b.set(xlabel="requests completed", ylabel="latency (ms)", title="Latency over the load (windows)")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
