"""`rig capacity RESULTS --target-throughput N --p99-ms X`: from the bench sweeps a results folder
holds, the most throughput a node sustains with p99 under the bound (per Triton version, engine,
model and instance count), and the nodes the target needs with headroom. Exit 0 with a plain
statement where no point met the bound; 2 for bad input (a missing folder, no bench windows, a
filter that matches nothing, a target or bound that is not a positive number)."""

from __future__ import annotations

import math


def add_parser(sub) -> None:
    p = sub.add_parser("capacity", help="nodes needed for a throughput under a p99 bound, from bench sweeps",
                       description="From `rig bench` sweeps (the rig's windows; --instances 1,2,4 sweeps "
                       "instance counts): per Triton version, engine, model and instance count, the best point "
                       "whose p99 (merged histograms of its repeats) stays within --p99-ms without errors, its "
                       "throughput per node and per instance, the scaling with instances, and the nodes "
                       "--target-throughput needs when each node runs at (1 - headroom) of that best.")
    p.add_argument("results", help="results folder (the --results of rig bench)")
    p.add_argument("--target-throughput", type=float, required=True, metavar="N", help="infer/s to serve")
    p.add_argument("--p99-ms", type=float, required=True, metavar="X", help="p99 latency bound in ms")
    p.add_argument("--headroom", type=float, default=0.3, metavar="H",
                   help="fraction of each node's best throughput held in reserve (default 0.3)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep windows where a column (of windows, or of runs) equals VALUE, or one of "
                   "V1,V2,... (repeatable: all must hold), e.g. engine=capi, run_id=A,B, instances=1,2")
    p.set_defaults(func=run)


def _finite_positive(v: float) -> bool:
    return v is not None and math.isfinite(v) and v > 0


def select(windows, runs, where: list[str]):
    """Windows kept by the ``--where`` clauses (``rig.store.where``): a column of windows, else of
    runs (through the run ids)."""
    from rig.errors import RigError
    from rig.store import where as wh

    for key, values in wh.parse(where):
        wh.check(key, {c for c in (*windows.columns, *runs.columns) if not c.endswith("histogram")})
        if key in windows.columns:
            windows = windows[wh.match(windows[key], values)]
        else:
            ids = set(runs[wh.match(runs[key], values)]["run_id"])
            windows = windows[windows["run_id"].isin(ids)]
        if windows.empty:
            raise RigError(f"--where {key}={','.join(values)} matches no bench window in the results")
    return windows


def run(args) -> int:
    from rig.errors import RigError
    from rig.text import redact

    if not _finite_positive(args.target_throughput):
        raise RigError("--target-throughput must be a positive number of infer/s")
    if not _finite_positive(args.p99_ms):
        raise RigError("--p99-ms must be a positive number of milliseconds")
    if not (math.isfinite(args.headroom) and 0 <= args.headroom < 1):
        raise RigError("--headroom is a fraction from 0 up to (not including) 1, e.g. 0.3")
    from rig.store import Store

    root = redact(str(args.results))
    store = Store.open(args.results)
    runs = store.read("runs")
    bench_ids = set(runs[runs["command"] == "bench"]["run_id"]) if len(runs) else set()
    windows = store.read("windows")
    windows = windows[windows["run_id"].isin(bench_ids) & (windows["tool"] == "rig")] if len(windows) else windows
    if windows.empty:
        raise RigError(f"{root} holds no windows of `rig bench` runs: run `rig bench --results RESULTS` first")
    windows = select(windows, runs, args.where)

    from rig.analysis import capacity

    plan = capacity.plan(windows, args.target_throughput, args.p99_ms, args.headroom)
    print(capacity.format_plan(plan, args.target_throughput, args.p99_ms, args.headroom))
    return 0
