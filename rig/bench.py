"""``rig bench``: sweep concurrency (closed loop) or arrival rate (open loop), as perf_analyzer does.

Each point is one cycle in a fresh worker (start, load for ``windows`` x ``window_seconds``,
stop, verify), so every point is stored like a soak cycle, with its windows. perf_analyzer's
stability rule (the last 3 windows within 10 %) is recorded per window, not enforced. With
``--compare perf-analyzer`` each point is also measured by perf_analyzer in C API mode on the
same runtime and model, right after the rig's, and stored in the same ``windows`` table
(``tool = perf_analyzer``).
"""

from __future__ import annotations

import copy
import dataclasses

from rig import orchestrator
from rig.analysis.sweeps import knee, summarize
from rig.config import RunConfig
from rig.errors import RigError
from rig.store import CycleResult, WindowRow, window_row
from rig.text import num


def _points(text: str | None, kind) -> list:
    if not text:
        return []
    try:
        vals = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise RigError(f"points must be comma-separated numbers (got {text!r})") from None
    if not vals or any(v <= 0 for v in vals):
        raise RigError(f"points must be positive numbers (got {text!r})")
    return vals


def run(cfg: RunConfig, args, log=print) -> int:
    conc = _points(args.concurrency, int)
    rates = _points(args.rates, float)
    if conc and rates:
        raise RigError("give either --concurrency or --rates, not both")
    if not conc and not rates:
        conc = [1, 2, 4, 8]
    in_flight = max(1, cfg.workload.in_flight)
    uneven = [c for c in conc if c % in_flight]
    if uneven:
        raise RigError(f"--in-flight {in_flight} does not divide the point(s) {', '.join(map(str, uneven))}: "
                       "a point is the requests in flight, users x in-flight")
    if args.windows < 1:
        raise RigError("--windows must be >= 1")
    p = orchestrator.prepare(cfg, "bench", log=log)
    orchestrator.write_run_row(p, "bench")
    pa = None
    if args.compare == "perf-analyzer":
        from rig import perf_analyzer as pa

        pa.ensure_perf_analyzer(log=log)
    log(f"bench {p.run_id}: {p.runtime.name} (Triton {p.runtime.triton_version}), engine {p.engine}, "
        f"model {p.model_label}, {args.windows} windows of {cfg.workload.window_seconds} s per point")
    results = []
    header = f"{'point':>8} {'infer/s':>10} {'p50 us':>8} {'p99 us':>8} {'hub ms':>7} {'stable':>6}"
    if pa:
        header += f" | {'PA infer/s':>10} {'PA p50':>7} {'PA p99':>7} | {'tput x':>6} {'p50 x':>6}"
    log(header)
    for i, point in enumerate(conc or rates, start=1):
        c = copy.deepcopy(cfg)
        c.workload.seconds = args.windows * cfg.workload.window_seconds
        if conc:
            c.workload.name = "steady" if cfg.workload.name == "none" else cfg.workload.name
            c.workload.users = max(1, point // max(1, cfg.workload.in_flight))
            c.workload.rate = None
        else:
            c.workload.rate = point
            c.workload.name = "steady"
        c.restart = "fresh-process"
        pi = dataclasses.replace(p, config=c)
        results_of_point: list[CycleResult] = []
        orchestrator.run_cycles(pi, [i], results_of_point.append)
        row = results_of_point[0].row if results_of_point else None
        windows = [dataclasses.asdict(w) for w in results_of_point[0].windows] if results_of_point else []
        if results_of_point:
            orchestrator.record(p, results_of_point[0])
        figures = summarize(windows)
        figures.update(point=point, outcome=row.outcome if row else "missing")
        line = (f"{point:>8} {_f(figures['throughput'], '{:,.0f}'):>10} {_f(figures['p50_us']):>8} "
                f"{_f(figures['p99_us']):>8} {_f(figures['hub_block_max_ms'], '{:.1f}'):>7} "
                f"{'yes' if figures['stable'] else 'no':>6}")
        if pa:
            try:
                kw = {"concurrency": [point]} if conc else {"rate": [point]}
                got = pa.run_perf_analyzer(p.runtime, str(p.repository), p.models[0],
                                           measurement_ms=int(cfg.workload.window_seconds * 1000), **kw)[0]
                figures["pa"] = got
                p.store.write("windows", [_pa_row(pi, i, point, conc != [], got)], p.runtime.triton_version,
                              f"pa-c{i:06d}")
                tx = figures["throughput"] / got["throughput"] if figures["throughput"] and got["throughput"] else None
                px = figures["p50_us"] / got["p50_us"] if figures["p50_us"] and got.get("p50_us") else None
                line += (f" | {_f(got['throughput'], '{:,.0f}'):>10} {_f(got.get('p50_us')):>7} "
                         f"{_f(got.get('p99_us')):>7} | {_f(tx, '{:.2f}'):>6} {_f(px, '{:.2f}'):>6}")
            except RigError as e:
                line += f" | perf_analyzer failed: {e}"
        if row is not None and row.outcome != "clean":
            line += f"   [{row.outcome}: {(row.detail or row.stop_error or '')[:100]}]"
        log(line)
        results.append(figures)
        if args.p99_bound_ms and figures["p99_us"] and figures["p99_us"] > args.p99_bound_ms * 1000:
            log(f"p99 {figures['p99_us']:.0f} us > bound {args.p99_bound_ms} ms: sweep stopped")
            break
    k = knee(results, open_loop=not conc)
    if k:
        log(f"knee: {k['point']} ({_f(k['throughput'], '{:,.0f}')} infer/s, p99 {_f(k['p99_us'])} us)")
    try:
        from rig.analysis import plots

        path = plots.bench_figure(p.store.read("windows", p.run_id), p.store.root / "plots" / f"{p.run_id}-bench.png")
        log(f"plot: {path}")
    except ImportError:
        pass
    log(f"results: {cfg.results}/windows (run_id {p.run_id})")
    return 0


def _pa_row(p, cycle: int, point, closed: bool, got: dict) -> WindowRow:
    return window_row(p.run_id, p.engine, p.model_label, {
        "cycle": cycle, "window": 1, "tool": "perf_analyzer", "mode": "closed" if closed else "open",
        "concurrency": int(point) if closed else None, "rate": None if closed else float(point),
        "requests": 0, "errors": 0, "throughput": got.get("throughput"), "p50_us": got.get("p50_us"),
        "p90_us": got.get("p90_us"), "p99_us": got.get("p99_us"), "mean_us": got.get("avg_us"),
        "start_s": 0.0, "length_s": 0.0})


def _f(v, fmt="{:.0f}") -> str:
    return num(v, fmt)
