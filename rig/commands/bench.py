"""`rig bench`: sweep concurrency or arrival rate, every window stored. The sweep itself (its points,
perf_analyzer's side, the table) is ``rig.workflows.bench``'s."""

from __future__ import annotations

import argparse
import functools

from rig.common import cpuidle
from rig.contract.cell import BenchSettings
from rig.contract.option_table import LIFECYCLE, WHAT_RUNS
from rig.parent.options import add_option, add_run_options, run_config

COMPARE_WITH = ("perf-analyzer",)
_log = functools.partial(print, flush=True)


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="sweep concurrency or arrival rate; store every window")
    _bench_options(b)
    b.set_defaults(func=run)


def _bench_options(p: argparse.ArgumentParser) -> None:
    """Bench runs each point in a fresh worker for --windows windows; it has no cycles,
    retention, restart mode or thresholds, and its points replace --users and --rate."""
    add_run_options(
        p,
        "bench",
        groups=(WHAT_RUNS, LIFECYCLE),
        titles={LIFECYCLE: "server"},
        changed={  # a list here: each count is a sweep of its own
            "instances": dict(
                type=str, help="model instances, or counts to sweep: 1,2,4 (a fresh server each; default 1)"
            )
        },
    )
    b = p.add_argument_group("sweep")
    b.add_argument(
        "--concurrency", help="closed loop points (requests in flight), e.g. 1,2,4,8 (default 1,2,4,8 when no --rates)"
    )
    b.add_argument("--rates", "--rate", dest="rates", help="open loop points (infer/s), e.g. 1000,2000,4000")
    add_option(
        b,
        "workload.name",
        help="closed loop: steady (default) or a locustfile whose users "
        "have no tasks of their own and no LoadTestShape (a point holds its concurrency: "
        "ramp, step and spike are refused)",
    )
    add_option(b, "workload.in_flight", help="requests in flight per user (default 1)")
    add_option(b, "workload.arrivals")
    add_option(b, "workload.seed")
    b.add_argument("--windows", type=int, default=BenchSettings.windows, help="windows per point (default 3)")
    add_option(
        b,
        "workload.window_seconds",
        help="seconds per window (default 5, perf_analyzer's measurement interval, unless the "
        "config file sets workload.window_seconds)",
    )
    b.add_argument(
        "--p99-bound-ms", type=float, help="stop the sweep once p99 exceeds this (judged in its first round)"
    )
    b.add_argument("--compare", choices=COMPARE_WITH, help="also run perf_analyzer at the same points")
    b.add_argument(
        "--repeats",
        type=int,
        default=BenchSettings.repeats,
        help="measurements per point (default 3), taken in rounds: each round sweeps every point once, so a "
        "point's repeats are a sweep apart in time and rig capacity's intervals cover the drift between them; "
        "with --compare, the rig and perf_analyzer alternate in order; the table gives medians over repeats",
    )
    b.add_argument(
        "--cpu-idle",
        choices=cpuidle.MODES,
        default=BenchSettings.cpu_idle,
        help="hold (default): keep the CPUs out of idle while measuring, for every tool, so that "
        "wake-up costs do not decide the figures; os: leave idle to the kernel",
    )
    b.add_argument(
        "--neighbour",
        default=BenchSettings.neighbour,
        metavar="none|burn:PCT",
        help="what shares the node's CPUs for the whole sweep: none (default), or burn:PCT, a burner process "
        "pinned to each of its CPUs (--cpus) busy PCT %% (1-100) of every 10 ms; the run's row records it",
    )
    b.add_argument(
        "--target-model",
        help="the model the load goes to (default the repository's first, the one perf_analyzer measures)",
    )
    b.add_argument(
        "--all-models",
        action="store_true",
        default=None,
        help="spread the closed loop over every model of the repository (not with --compare)",
    )


def run(args) -> int:
    from rig.commands.soak import skipped
    from rig.workflows import bench

    counts = bench.instance_counts(args.instances)
    args.instances = counts[0] if counts else None
    cfg = run_config(args)
    if cfg is None:
        return skipped(args)
    settings = BenchSettings(
        concurrency=args.concurrency,
        rates=args.rates,
        windows=args.windows,
        window_seconds=args.window_seconds,
        repeats=args.repeats,
        p99_bound_ms=args.p99_bound_ms,
        compare=args.compare,
        cpu_idle=args.cpu_idle,
        neighbour=args.neighbour,
        target_model=args.target_model,
        all_models=args.all_models,
        instances=tuple(counts),
        config_file=args.config,
    )
    return bench.run(cfg, settings, log=_log)
