"""What ``rig bench`` does (its command: ``rig.commands.bench``): sweep concurrency (closed loop) or
arrival rate (open loop), as perf_analyzer does.

Each measurement is one cycle in a fresh worker (start, load for ``windows`` x ``window_seconds``,
stop, verify), stored like a soak cycle, with its windows. A point holds its concurrency steady
(users x in-flight, no shape) on one model: the repository's first, the one perf_analyzer measures,
unless ``--target-model`` names another or ``--all-models`` spreads the load. ``--repeats N``
measures each point N times, in N rounds of the whole sweep (a point's repeats are a sweep apart in
time, so what drifts over minutes falls between them, not only within); with ``--compare perf-
analyzer``, perf_analyzer (C API mode, same runtime, repository and model) runs beside each repeat,
in alternating order (rig then perf_analyzer, then the other way round), so drift falls on both.
``--instances 1,2,4`` runs the whole sweep again for each count of model instances (a fresh
repository and server). ``--cpu-idle hold`` (the default) keeps the CPUs out of idle for the whole
sweep, both tools alike (``rig.common.cpuidle``); the run's row stores how (``runs.cpu_idle``).
Windows last 5 s unless ``--window-seconds`` or the config file says otherwise (``BENCH_WINDOW_S``).
``--cpus 0`` holds the sweep to a share of the machine, a node of ``rig capacity``
(``rig.common.cpushare``: the worker, its load and its stubs, and the pollers of the hold;
``runs.cpu_share`` records it). ``--neighbour burn:PCT`` runs a burner pinned to each of those CPUs for
the whole sweep, outside the measured processes (``rig.common.neighbour``; ``runs.neighbour``).

In the ``windows`` table a repeat is one ``cycle`` number, shared by the rig's windows and
perf_analyzer's windows of that repeat (``tool`` tells them apart); ``instances`` holds the
instance count. perf_analyzer's rows are its own last (stable) windows, with their real request
counts, lengths and HDR histograms, read from its profile export. A point's figure per repeat is
the median over its last 3 windows; the table gives medians over repeats.
"""

from __future__ import annotations

import dataclasses
import shlex
import statistics

from rig.analysis.sweeps import knee, measured, summarize
from rig.common import cpuidle, cpushare, neighbour
from rig.common.errors import Exit, RigError
from rig.common.text import num, redact
from rig.contract import server_stats, verdicts
from rig.contract.cell import BenchSettings
from rig.contract.rows import CycleResult
from rig.parent import config, orchestrator, repository
from rig.parent.config import RunConfig
from rig.parent.options import gpu_of
from rig.parent.preflight import check_workload, without_spaces
from rig.workflows import bench_pa
from rig.workflows.bench_point import Point
from rig.workflows.bench_time import TIME_KEYS, time_table

SHAPED = ("ramp", "step", "spike")  # built-in workloads whose users change during a run
# A bench window's default length: perf_analyzer's own default measurement interval. A soak's
# windows are 1 s, but a bench figure decides a comparison, and on a shared VM a vCPU's speed
# swings by up to 1.7x for seconds at a time (measured here: docs/measurements/speed.md, "Measured: the rig beside
# perf_analyzer"): a 1 s window falls wholly in one state, so which tool a slow spell hit decided
# a point; 5 s windows average over the spells, for both tools alike.
BENCH_WINDOW_S = 5.0


def _points(text: str | None, kind) -> list:
    if not text:
        return []
    try:
        vals = [kind(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise RigError(f"points must be comma-separated numbers (got {text!r})") from None
    if not vals or any(v <= 0 for v in vals):
        raise RigError(f"points must be positive numbers (got {text!r})")
    return vals


def instance_counts(text: str | None) -> list[int]:
    """``--instances 1,2,4``: the model instance counts to sweep (empty: the config's one)."""
    try:
        counts = _points(text, int)
    except RigError:
        raise RigError(f"--instances takes whole numbers >= 1, e.g. 1,2,4 (got {text!r})") from None
    if len(set(counts)) != len(counts):
        raise RigError(f"--instances lists a count twice ({text}): give each once")
    return counts


def window_length(given: float | None, config_path: str | None, configured: float) -> float:
    """A bench window's seconds: ``--window-seconds``, else the config file's
    ``workload.window_seconds``, else ``BENCH_WINDOW_S`` (not the soak's 1 s default)."""
    if given is not None or config.file_sets(config_path, "workload", "window_seconds"):
        return configured
    return BENCH_WINDOW_S


def _check_workload(cfg: RunConfig) -> None:
    """A point holds users x in-flight requests throughout: no shape, no users with tasks."""
    name = cfg.workload.name
    if name in SHAPED:
        raise RigError(
            f"--workload {name} changes the users during a run, and a bench point holds its "
            f"concurrency steady: drop --workload (steady), or run `rig soak --workload {shlex.quote(str(name))}`"
        )
    if name.endswith(".py"):
        info = check_workload(name)
        if info.get("shape"):
            raise RigError(
                f"workload {name}: its LoadTestShape {info['shape']} would change the users "
                "during a point; bench holds each point's concurrency steady: drop the shape"
            )
        if info.get("task_users"):
            raise RigError(
                f"workload {name}: user(s) {', '.join(info['task_users'])} have tasks (one request "
                "at a time, not --in-flight): a bench point needs users without tasks of their own"
            )


def _target(p: orchestrator.Prepared, args: BenchSettings) -> orchestrator.Prepared:
    if args.all_models:
        return p
    name = args.target_model or p.models[0]
    if name not in p.models:
        raise RigError(f"--target-model {name}: not a model of the repository ({', '.join(p.models)})")
    label = name if p.config.model_repository else p.model_label
    return dataclasses.replace(p, models=[name], model_label=label)


def _repository(p: orchestrator.Prepared, n: int | None, log):
    """The repository with ``n`` instances of the template model (a user's repository as it is)."""
    cfg = p.config
    if n is None or n == cfg.instances:
        return p.repository
    spec = repository.ModelSpec(
        kind=cfg.model,
        size=cfg.model_size,
        instances=n,
        max_batch_size=cfg.max_batch_size,
        dynamic_batching=cfg.dynamic_batching,
        queue_delay_us=cfg.queue_delay_us,
        fault=cfg.fault,
        execute_delay_ms=cfg.execute_delay_ms,
        gpu=gpu_of(cfg),
    )
    repo = p.work_dir / f"models-i{n}"
    repository.render(spec, repo)
    return without_spaces(repo, f"{p.run_id}-i{n}", log)


def run(cfg: RunConfig, args: BenchSettings, log=print, run_id: str | None = None) -> int:
    """The sweep (``run_id``: its run's id, named by the caller before it starts: a matrix cell's;
    default a new one)."""
    conc = _points(args.concurrency, int)
    rates = _points(args.rates, float)
    if conc and rates:
        raise RigError("give either --concurrency or --rates, not both")
    if not conc and not rates:
        conc = [1, 2, 4, 8]
    in_flight = max(1, cfg.workload.in_flight)
    uneven = [c for c in conc if c % in_flight]
    if uneven:
        raise RigError(
            f"--in-flight {in_flight} does not divide the point(s) {', '.join(map(str, uneven))}: "
            "a point is the requests in flight, users x in-flight"
        )
    if args.windows < 1:
        raise RigError("--windows must be >= 1")
    repeats = args.repeats
    if repeats < 1:
        raise RigError("--repeats must be >= 1")
    counts = [None] if cfg.model_repository else (list(args.instances) or [cfg.instances])
    beside = neighbour.parse(args.neighbour)  # bad input before any work
    if conc:
        _check_workload(cfg)
    window = window_length(args.window_seconds, args.config_file, cfg.workload.window_seconds)
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, window_seconds=window))
    from rig.workflows.soak import results_store

    p = _target(orchestrator.prepare(cfg, "bench", results_store(cfg.results), run_id=run_id, log=log), args)
    orchestrator.check_run_inputs(p)  # against the model(s) this sweep loads, before any point
    with cpuidle.Hold(args.cpu_idle) as hold, neighbour.Burner(beside) as burner:  # stopped, reaped at the end
        orchestrator.write_run_row(p, "bench", cpu_idle=hold.method, neighbour=burner.label)
        return _sweep(p, cfg, args, Plan(conc, rates, repeats, counts), hold, log, burner.text())


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a sweep measures: its points (requests in flight, ``conc``, or arrival rates), the
    repeats of each, and the instance counts (``[None]``: the model's own)."""

    conc: list
    rates: list
    repeats: int
    counts: list


def _within_bound(points: list[float], got: dict, bound_ms: float | None, log) -> list[float]:
    """The points a sweep keeps after its first round: all, or up to the first whose p99 (the rig's,
    round 1) exceeds ``--p99-bound-ms``, that one included."""
    if not bound_ms:
        return points
    for i, point in enumerate(points):
        p99 = summarize_p99(got[point]["rig"])
        if p99 is not None and p99 > bound_ms * 1000:
            log(f"p99 {p99:.0f} us at {point:g} > bound {bound_ms:g} ms in round 1: the later rounds stop there")
            return points[: i + 1]
    return points


def summarize_p99(figs: list[dict]) -> float | None:
    vals = [f["p99_us"] for f in figs if f.get("p99_us") is not None]
    return statistics.median(vals) if vals else None


def _sweep(p, cfg: RunConfig, args: BenchSettings, plan: Plan, hold, log, beside: str = neighbour.NONE) -> int:
    conc, rates, repeats, counts = plan.conc, plan.rates, plan.repeats, plan.counts
    pa = None
    if args.compare == "perf-analyzer":
        from rig.parent import perf_analyzer as pa

        pa.ensure_perf_analyzer(log=log)
        pa_inputs = bench_pa.pa_input_options(p)
    log(
        f"bench {p.run_id}: {p.runtime.name} (Triton {p.runtime.triton_version}), engine {p.engine}, "
        f"model {p.model_label}, {args.windows} windows of {cfg.workload.window_seconds} s per point, "
        f"{repeats} repeat(s) in rounds (each round sweeps every point once: a point's repeats are a sweep apart "
        "in time)" + (f", instances {','.join(map(str, counts))}" if counts != [None] else "")
    )
    log(f"cpu idle: {cpuidle.describe(hold)}")
    share = cpushare.current()  # held by --cpus (options.run_config), a cgroup quota, or the whole machine
    log(f"node share: {share['cpu_share']:g} CPU(s) ({share['cpus']}; {share['cpu_share_from']})")
    log(f"neighbour: {beside}")
    table, failed = [], []
    cycle = 0
    for n in counts:
        repo = _repository(p, n, log)
        got: dict[float, dict[str, list[dict]]] = {pt: {"rig": [], "perf_analyzer": []} for pt in conc or rates}
        live = list(conc or rates)
        for r in range(1, repeats + 1):  # rounds: a point's repeats are a whole sweep apart in time
            for point in live:
                cycle += 1
                order = ("rig", "perf_analyzer") if r % 2 else ("perf_analyzer", "rig")
                for tool in order:
                    if tool == "perf_analyzer" and pa is None:
                        continue
                    where = (
                        f"  [{'' if n is None else f'i{n} '}{'c' if conc else 'r'}{point:g} "
                        f"round {r}/{repeats}] {tool:<13}"
                    )
                    at = Point(cycle, point, bool(conc), n)
                    if tool == "rig":
                        fig = _rig_once(p, cfg, args, repo, at)
                    else:
                        fig = bench_pa.pa_once(pa, p, cfg, repo, at, pa_inputs)
                    if fig.get("throughput") is not None:
                        got[point][tool].append(fig)
                    elif fig.get("note"):
                        failed.append(fig["note"])
                    log(f"{where} {_progress(fig)}")
            if r == 1:
                live = _within_bound(live, got, args.p99_bound_ms, log)
        swept = [point_medians(point, n, got[point]["rig"], got[point]["perf_analyzer"]) for point in live]
        table.extend(swept)
        k = knee(swept, open_loop=not conc)
        if k:
            log(
                f"knee{f' ({n} instance(s))' if len(counts) > 1 else ''}: {k['point']:g} "
                f"({_f(k['throughput'], '{:,.0f}')} infer/s, p99 {_f(k['p99_us'])} us)"
            )
    log(format_table(table, pa is not None, repeats, closed=bool(conc)))
    p.store.compact(p.run_id, owner=True)  # its files merged: one per table and partition
    measured = any(row["repeats"] for row in table)
    if measured:
        _plots(p, counts, log)
        p.store.compact(p.run_id, owner=True)  # the plot's files too
    log(f"results: {redact(str(cfg.results))}/windows (run_id {p.run_id})")
    if not measured:  # a model that never loads, or never answers: one line, no plot
        log(
            f"FAIL: no point was measured ({failed[0] if failed else 'no window came back'}); "
            "the lines above give each point's outcome"
        )
        return Exit.FAILED
    return Exit.OK


def _rig_once(p, cfg: RunConfig, args: BenchSettings, repo, at: Point) -> dict:
    """The rig at one point: a cycle of the sweep's load, its windows stored as ``tool = rig``."""
    cycle, point, closed, n = at.cycle, at.load, at.closed, at.instances
    w = dataclasses.replace(cfg.workload, seconds=args.windows * cfg.workload.window_seconds)
    if closed:
        w = dataclasses.replace(
            w,
            name="steady" if w.name in ("none", "soak") else w.name,
            users=max(1, int(point) // max(1, w.in_flight)),
            rate=None,
        )
    else:
        w = dataclasses.replace(w, name="steady", rate=point)
    c = dataclasses.replace(cfg, workload=w, restart="fresh-process", instances=cfg.instances if n is None else n)
    pi = dataclasses.replace(p, config=c, repository=repo)
    results: list[CycleResult] = []
    orchestrator.run_cycles(pi, [cycle], results.append)
    if not results:
        return {"throughput": None, "outcome": "missing"}
    res = results[0]
    res = CycleResult(res.row, tuple(dataclasses.replace(w, instances=n) for w in res.windows))
    orchestrator.record(p, res)
    ws = [dataclasses.asdict(w) for w in res.windows]
    fig = summarize(ws)
    fig["server"] = server_stats.over_windows(measured(ws))  # where the time goes, over the same windows
    fig["outcome"] = res.row.outcome
    if res.row.outcome not in verdicts.GOOD:
        fig["note"] = f"{res.row.outcome}: {(res.row.detail or res.row.stop_error or '')[:100]}"
    return fig


def _median(figs: list[dict], key: str):
    vals = [f[key] for f in figs if f.get(key) is not None]
    return statistics.median(vals) if vals else None


def point_medians(point, instances, rig: list[dict], pa: list[dict]) -> dict:
    """A point's row of the table: medians over repeats, the rig's and perf_analyzer's, and the
    ratios of the medians (rig / perf_analyzer)."""
    row = {
        "point": point,
        "instances": instances,
        "repeats": len(rig),
        "pa_repeats": len(pa),
        "stable": sum(1 for f in rig if f.get("stable")),
        "hub_block_max_ms": max((f.get("hub_block_max_ms") or 0 for f in rig), default=None),
    }
    for key in ("throughput", "p50_us", "p99_us"):
        row[key], row[f"pa_{key}"] = _median(rig, key), _median(pa, key)
    for key, out in (("throughput", "throughput_x"), ("p99_us", "p99_x"), ("p50_us", "p50_x")):
        a, b = row[key], row[f"pa_{key}"]
        row[out] = a / b if a is not None and b else None
    row["server"] = {
        tool: {k: _median([f.get("server") or {} for f in figs], k) for k in TIME_KEYS}
        for tool, figs in (("rig", rig), ("perf_analyzer", pa))
    }
    return row


def format_table(rows: list[dict], with_pa: bool, repeats: int, closed: bool = True) -> str:
    """The sweep's table: per point (and instance count), medians over repeats."""
    head = f"{'inst':>4} {'point':>7} {'n':>3} {'infer/s':>10} {'p50 us':>8} {'p99 us':>8} {'hub ms':>7} {'stable':>6}"
    if with_pa:
        head += f" | {'PA n':>4} {'PA infer/s':>10} {'PA p50':>7} {'PA p99':>7} | {'tput x':>6} {'p99 x':>6}"
    lines = [
        (
            f"{'concurrency' if closed else 'rate'} points, medians over {repeats} repeat(s) "
            "(each: median of its last 3 windows); x = rig / perf_analyzer"
        ),
        head,
    ]
    for r in rows:
        line = (
            f"{'-' if r['instances'] is None else r['instances']:>4} {r['point']:>7g} {r['repeats']:>3} "
            f"{_f(r['throughput'], '{:,.0f}'):>10} {_f(r['p50_us']):>8} {_f(r['p99_us']):>8} "
            f"{_f(r['hub_block_max_ms'], '{:.1f}'):>7} {r['stable']:>3}/{r['repeats']:<2}"
        )
        if with_pa:
            line += (
                f" | {r['pa_repeats']:>4} {_f(r['pa_throughput'], '{:,.0f}'):>10} {_f(r['pa_p50_us']):>7} "
                f"{_f(r['pa_p99_us']):>7} | {_f(r['throughput_x'], '{:.2f}'):>6} {_f(r['p99_x'], '{:.2f}'):>6}"
            )
        lines.append(line)
    times = time_table(rows, with_pa)
    return "\n".join(lines + ([times] if times else []))


def _progress(fig: dict) -> str:
    if fig.get("throughput") is None:
        return fig.get("note") or "no figures"
    text = f"{_f(fig['throughput'], '{:,.0f}')} infer/s, p50 {_f(fig.get('p50_us'))} us, p99 {_f(fig.get('p99_us'))} us"
    return f"{text}   [{fig['note']}]" if fig.get("note") else text


def _plots(p, counts: list, log) -> None:
    try:
        from rig.analysis import plots
    except ImportError:
        return
    w = p.store.read("windows", p.run_id)
    for n in counts:
        part = w if n is None or len(counts) == 1 else w[w["instances"] == n]
        if part is None or part.empty or "tool" not in part:  # that count measured nothing
            continue
        name = f"{p.run_id}-bench.png" if len(counts) == 1 else f"{p.run_id}-bench-i{n}.png"
        log(f"plot: {p.store.publish(plots.bench_figure(part, p.store.plot_path(name)))}")


def _f(v, fmt="{:.0f}") -> str:
    return num(v, fmt)
