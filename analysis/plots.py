"""Plots from the store's tables: pure functions from DataFrames to figures (usable in a notebook)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bench_points(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (tool, point): median throughput and latency over the point's last 3 windows."""
    if windows.empty:
        return pd.DataFrame()
    w = windows.copy()
    w["point"] = w["concurrency"].where(w["mode"] == "closed", w["rate"])
    out = []
    for (tool, point), g in w.groupby(["tool", "point"]):
        g = g.sort_values("window")
        g = g.iloc[1:] if len(g) > 3 else g
        g = g.tail(3)
        out.append({"tool": tool, "point": point, "throughput": g.throughput.median(),
                    "p50_us": g.p50_us.median(), "p99_us": g.p99_us.median()})
    return pd.DataFrame(out).sort_values(["tool", "point"]).reset_index(drop=True)


def bench_figure(windows: pd.DataFrame, path: str | Path) -> Path:
    """Throughput and latency against load, the rig beside perf_analyzer where both were run."""
    plt = _plt()
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
    return _save(fig, (a, b), path)


def soak_figure(cycles: pd.DataFrame, path: str | Path) -> Path:
    """Stop latency per cycle coloured by outcome, finalize success, and worker/stub RSS."""
    plt = _plt()
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
    return _save(fig, (a, b, d), path)


def _save(fig, axes, path) -> Path:
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path
