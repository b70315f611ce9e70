"""`rig capacity RESULTS --target-throughput N --p99-ms X`: from the bench sweeps a results folder
holds, the most throughput a node sustains with p99 under the bound (per Triton version, engine,
model, node share, neighbour and instance count), a scaling model fitted to the sweep (the Universal
Scalability Law, with bootstrap intervals over the repeats, beside the linear baseline), and the
nodes each target needs with headroom, with its interval. The fleets in the store fit how nodes add up
in a fleet (the node law), what the fleet's master costs them and p99's bias (``--master``: where the
plan puts the master); `--check` compares the predictions with each measured `rig fleet` run, judged by
a plan fitted over the others. Exit 0 with a plain statement where no point met the
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
        "at the fleet's load, errors in %%, each fleet judged by a plan that did not see it (the node law, the "
        "master's cost and p99's bias fitted over the other fleets: leave one out; the prior without one)",
    )
    p.add_argument(
        "--master",
        choices=("auto", "shares", "elsewhere"),
        default="auto",
        help="where the plan puts the fleet's master (rig fleet's Locust master): shares (on the nodes' host and "
        "CPUs, as on one machine: its CPU time a request, measured in the fleets, is taken from the nodes) or "
        "elsewhere (a cluster: not counted); default auto: as the fleets in RESULTS recorded, else elsewhere. "
        "--check judges a fleet that recorded where its master ran by that record",
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
    from rig.analysis.capacity import study
    from rig.store import Store

    root = redact(str(args.results))
    tables = study.read(Store.open(args.results), root, args.where, args.check)
    pieces = study.text(
        tables,
        goals,
        args.p99_ms,
        args.headroom,
        args.bootstrap,
        args.check,
        args.plot,
        getattr(args, "master", "auto"),
    )
    for piece in pieces:
        print(piece)
    return 0
