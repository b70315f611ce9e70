"""What `rig gate` prints of its two sides (``rig.workflows.gate``): each side's figures by row
(``side_lines``), the two side by side (``table``), and the notes under them: a side that mixes
configurations (``mixed_notes``), sides measured under different CPU idle regimes (``idle_note``)."""

from __future__ import annotations

from rig.workflows.gate_sides import MAX_MERGED


def side_lines(label: str, cycles, windows, store=None, streaming=None) -> dict[str, str]:
    """The figures printed for one side, by row name. Latency percentiles come from the merged
    HDR histograms of each point's latest ``MAX_MERGED`` windows (read from ``store`` where
    ``windows`` lacks the histogram column); the line says so when that is not all of them."""
    import numpy as np

    from rig.analysis import frames

    out = {"": label, "runs": str(cycles["run_id"].nunique()), "cycles": str(len(cycles))}
    counts = cycles["outcome"].value_counts()
    out["outcomes"] = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    if "load_outcome" in cycles:
        loads = cycles["load_outcome"].dropna().value_counts()
        out["load"] = ", ".join(f"{k}={v}" for k, v in sorted(loads.items())) or "-"
    if "growth_outcome" in cycles:
        growth = cycles["growth_outcome"].dropna().value_counts()
        out["growth"] = ", ".join(f"{k}={v}" for k, v in sorted(growth.items())) or "-"
    ok, n = frames.finalize_counts(cycles)
    out["finalize"] = f"{ok}/{n} cycles ({ok / n:.0%})" if n else "-"
    lat = cycles["stop_latency_s"].dropna().to_numpy(dtype=float)
    if lat.size:
        out["stop p50/p95"] = f"{np.percentile(lat, 50):.3f} / {np.percentile(lat, 95):.3f} s"
    if len(windows):
        if "histogram" not in windows and store is not None:
            windows = frames.attach_histograms(store, windows, ["tool", *frames.POINT], 2 * MAX_MERGED)
        perf = frames.performance(windows, by=[], max_merged=MAX_MERGED)
        for r in perf.itertuples():
            name = f"{r.point}" + ("" if r.tool == "rig" else f" ({r.tool})")
            p99 = f", p99 {r.p99_us:,.0f} us" if r.p99_us is not None and r.p99_us == r.p99_us else ""
            if p99 and r.merged < r.windows:
                p99 += f" (HDR of the latest {r.merged:,} of {r.windows:,} windows)"
            out[name] = f"{r.throughput:,.0f} infer/s{p99}"
    for r in streaming.itertuples() if streaming is not None else ():
        name = f"first response @ {r.point}" + ("" if r.tool == "rig" else f" ({r.tool})")
        per = (
            "-"
            if r.responses_per_request is None or r.responses_per_request != r.responses_per_request
            else f"{r.responses_per_request:.2f}"
        )
        out[name] = f"p50 {r.first_p50_us:,.0f} / p99 {r.first_p99_us:,.0f} us, {per} responses/request"
    return out


def table(a: dict[str, str], b: dict[str, str]) -> str:
    names = list(dict.fromkeys([*a, *b]))
    w0 = max(len(n) for n in names)
    w1 = max(len(a.get(n, "-")) for n in names)
    return "\n".join(f"{n:<{w0}}  {a.get(n, '-'):<{w1}}  {b.get(n, '-')}".rstrip() for n in names)


def mixed_notes(sides) -> list[str]:
    """A note for each side (``(label, cycles)``) whose cycles mix engines, models, retention, stop
    strategies or restarts."""
    notes = []
    for label, c in sides:
        mixed = [
            f"{k}={','.join(sorted(map(str, c[k].dropna().unique())))}"
            for k in ("engine", "model", "retain", "stop_strategy", "restart")
            if c[k].nunique() > 1
        ]
        if mixed:
            notes.append(f"note: the {label} mixes {'; '.join(mixed)} (pin one with --where)")
    return notes


def idle_regimes(runs, cycles) -> set[str]:
    """How the side's runs (of the ``runs`` frame) left the CPUs to idle (``runs.cpu_idle``;
    unset: ``os``, as every soak and every bench before the column ran)."""
    runs = runs[runs["run_id"].isin(set(cycles["run_id"]))]
    if "cpu_idle" not in runs:
        return {"os"} if len(runs) else set()
    return {"os" if v is None or v != v else str(v) for v in runs["cpu_idle"]}


def idle_note(a: set[str], b: set[str]) -> str:
    """A line when the sides measured under different CPU idle regimes (``rig bench --cpu-idle``)."""
    if not a or not b or a == b:
        return ""
    return (
        f"note: the baseline ran with cpu_idle={','.join(sorted(a))} and the candidate with "
        f"cpu_idle={','.join(sorted(b))}: held CPUs change throughput and latency by tens of per cent "
        'on some machines (README, "CPU idle states"), so those figures do not compare'
    )
