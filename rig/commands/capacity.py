"""`rig capacity RESULTS --target-throughput N --p99-ms X`: from the bench sweeps a results folder
holds, the most throughput a node sustains with p99 under the bound (per Triton version, engine,
model, node share, neighbour and instance count), a scaling model fitted to the sweep (the Universal
Scalability Law, with bootstrap intervals over the repeats, beside the linear baseline), and the
nodes each target needs with headroom, with its interval. `--check` compares the predictions with
the measured `rig fleet` runs in the store. Exit 0 with a plain statement where no point met the
bound; 2 for bad input (a missing folder, no bench windows, a filter that matches nothing, a
target or bound that is not a positive number, --check over a store without fleet runs)."""

from __future__ import annotations

import math


def add_parser(sub) -> None:
    p = sub.add_parser(
        "capacity",
        help="nodes needed for a throughput under a p99 bound, from bench sweeps",
        description="From `rig bench` sweeps (the rig's windows; --instances 1,2,4 sweeps instance counts; "
        "--cpus holds a node to a share of the machine, --neighbour runs it beside a busy neighbour): per Triton "
        "version, engine, model, node share, neighbour and instance count, the best point whose p99 (merged "
        "histograms of its repeats) stays within --p99-ms without errors; the Universal Scalability Law fitted "
        "to the sweep with bootstrap intervals over the repeats; and the nodes --target-throughput needs when "
        "each node runs at (1 - headroom) of its throughput at the bound, with an interval, by the model that "
        "fits (the USL, or the linear baseline). --check compares the predictions with the `rig fleet` runs "
        "in the store.",
    )
    p.add_argument("results", help="results folder (the --results of rig bench, and of rig fleet for --check)")
    p.add_argument(
        "--target-throughput",
        metavar="N[,N...]",
        help="infer/s to serve, or several (e.g. 5000,50000,500000); required unless --check",
    )
    p.add_argument("--p99-ms", type=float, required=True, metavar="X", help="p99 latency bound in ms")
    p.add_argument(
        "--headroom",
        type=float,
        default=0.3,
        metavar="H",
        help="fraction of each node's best throughput held in reserve (default 0.3)",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep windows where a column (of windows, or of runs) equals VALUE, or one of "
        "V1,V2,... (repeatable: all must hold), e.g. engine=capi, run_id=A,B, instances=1,2, cpu_share=1",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="compare each prediction with the measured `rig fleet` runs in RESULTS of the same Triton "
        "version, engine, model and node share (every bench neighbour's, each labelled): throughput and p99 "
        "at the fleet's load, errors in %%",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="B",
        help="resamples of the repeats for the intervals (default 1000; 0: no intervals)",
    )
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="also draw throughput and p99 against load and nodes, measured and predicted, as a PNG",
    )
    p.set_defaults(func=run)


def targets(text: str | None) -> list[float]:
    """``--target-throughput 5000,50000``: positive infer/s, in the order given."""
    from rig.common.errors import RigError

    try:
        vals = [float(v) for v in str(text).split(",") if v.strip()] if text is not None else []
    except ValueError:
        vals = []
    if not vals or not all(_finite_positive(v) for v in vals):
        raise RigError(
            f"--target-throughput must be a positive number of infer/s, or several joined with commas (got {text!r})"
        )
    return vals


def _finite_positive(v: float) -> bool:
    return v is not None and math.isfinite(v) and v > 0


def select(windows, runs, where: list[str]):
    """Windows kept by the ``--where`` clauses (``rig.store.where``): a column of windows, else of
    runs (through the run ids)."""
    from rig.common.errors import RigError
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
    from rig.common.errors import RigError
    from rig.common.text import redact

    goals = targets(args.target_throughput) if args.target_throughput is not None or not args.check else []
    if not _finite_positive(args.p99_ms):
        raise RigError("--p99-ms must be a positive number of milliseconds")
    if not (math.isfinite(args.headroom) and 0 <= args.headroom < 1):
        raise RigError("--headroom is a fraction from 0 up to (not including) 1, e.g. 0.3")
    if args.bootstrap < 0:
        raise RigError("--bootstrap is a number of resamples >= 0 (0: no intervals)")
    if args.plot is not None and not args.plot.endswith(".png"):
        raise RigError(f"--plot {args.plot}: give a .png file")
    from rig.store import Store

    root = redact(str(args.results))
    store = Store.open(args.results)
    runs = store.read("runs")
    fleet = store.read("fleet") if args.check else None
    if args.check and (fleet is None or fleet.empty):
        raise RigError(
            f"{root} holds no `rig fleet` runs to check against: run `rig fleet --results RESULTS` "
            "with nodes held to the bench's share (rig soak --locust-master ... --cpus ...) first"
        )
    bench_ids = set(runs[runs["command"] == "bench"]["run_id"]) if len(runs) else set()
    every = store.read("windows")
    windows = every[every["run_id"].isin(bench_ids) & (every["tool"] == "rig")] if len(every) else every
    if windows.empty:
        raise RigError(f"{root} holds no windows of `rig bench` runs: run `rig bench --results RESULTS` first")
    windows = select(windows, runs, args.where)

    from rig.analysis.capacity import fleet as capacity_fleet
    from rig.analysis.capacity import plan as capacity
    from rig.analysis.capacity import sweep as capacity_sweep
    from rig.analysis.capacity import tags as capacity_tags
    from rig.analysis.capacity import text as capacity_text

    windows = capacity_tags.with_shares(windows, runs)
    if goals:
        plan = capacity.plan(windows, goals[0], args.p99_ms, args.headroom)
        print(capacity.format_plan(plan, goals[0], args.p99_ms, args.headroom))
    models = capacity.model(windows, args.p99_ms, n_boot=args.bootstrap)
    checked = []
    if args.check:
        fleets = capacity_fleet.fleet_runs(fleet, runs, every)
        checked = capacity_fleet.check(models, fleets)
    laws = {id(m): capacity_fleet.node_law(checked, m) for m in models}
    for m in models:
        print()
        print(
            capacity_tags.node_title(
                m["triton_version"], m["engine"], m["model"], m["cpu_share"], m["cpus"], m["neighbour"]
            )
            + (f", {m['instances']} instance(s)" if m["instances"] is not None else "")
            + ":"
        )
        print(capacity_text.format_model(m, goals, args.headroom, laws[id(m)]))
    for law in capacity.instance_laws(models):
        print()
        version, engine, model, share, beside = (law[k] for k in capacity_sweep.NODE)
        print(capacity_tags.node_title(version, engine, model, share, neighbour=beside) + ", across instance counts:")
        print(capacity_text.format_instance_law(law))
    if args.check:
        print()
        print(capacity_text.format_check(checked, args.p99_ms))
    if args.plot:
        from rig.analysis.capacity import plot as capacity_plot

        print(f"plot: {capacity_plot.figure(models, checked, laws, goals, args.headroom, args.plot)}")
    return 0
