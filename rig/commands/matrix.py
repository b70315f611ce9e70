"""`rig matrix --runtimes 0.5.0,0.5.10,0.7.0 [--engines capi,tritonserver] [--retain all]`: the
same soak (and a short bench with --bench) against each Triton runtime and each engine that runs
over it, into one results store, with a summary table and an exit status.

`rig matrix --scenarios LIST|all`: the lifecycle scenarios (``rig.scenarios``) as the axis instead
of retention: each scenario a cell per runtime x engine, its negative control a cell of its own,
each `rig soak --scenario NAME [--control]`. A cell passes when every cycle gives the verdicts the
scenario is known to give on that core and engine (its control: its control's), and the growth
verdict it gives (``Scenario.growth``; a control's is ok; ``rig.analysis.matrix.judge_scenario``);
where nothing is known there, it is recorded and said so (``unjudged``), not failed.

Each cell is its own process (`python -m rig soak ...`), so a core that crashes or hangs takes
only its cell down: that cell is a row with the reason. A runtime or engine that cannot run here
(no backend stub for this Python, bindings that do not fit the core) is a row that says why.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import threading
import time

from rig import procs
from rig.errors import Exit, RigError
from rig.commands.matrix_plan import (_OWN, _plan, cell_argv, parse_engines, parse_retain, parse_runtimes,  # noqa: F401
                                      parse_scenarios, passthrough, scenario_argv, scenario_cells)
from rig.options import add_cycle_options, add_target_options, run_config
# Options a bench cell takes from the matrix's (the server and the model; no lifecycle, no load).
_BENCH_DESTS = ("model", "model_repository", "model_size", "instances", "max_batch_size", "dynamic_batching",
                "execute_delay_ms", "exit_timeout", "startup_timeout", "request_timeout", "in_flight")
DEFAULT_CYCLES = 3
# The load a scenario that needs one (``Scenario.workload``) runs under when the matrix is given no
# --workload: the load its verdicts were measured under (docs/guide/scenarios.md).
SCENARIO_LOAD = ("--workload", "steady", "--workload-seconds", "2", "--users", "2")


def add_parser(sub) -> None:
    p = sub.add_parser("matrix", help="the same soak (and bench) across Triton runtimes and engines, one store",
                       description="Run the same soak against each runtime x engine x retention policy, each "
                       "cell in its own process, into one results folder; a summary table (Markdown) and an exit "
                       f"status: {Exit.OK:d} every cell that can run here passed, {Exit.FAILED:d} a cell failed its "
                       f"thresholds, refused its input, crashed or timed out, {Exit.USAGE:d} bad input, "
                       f"{Exit.SKIPPED:d} every cell was skipped, {Exit.MACHINE:d} the machine failed a cell. With "
                       "--retain last-response/last-array, exit_timeout is allowed (the expected outcome of a reference kept across stop()); the table "
                       "shows every outcome. With --scenarios, each scenario and its negative control are cells of "
                       "their own, passing when their verdicts are the ones known for that core and engine.")
    m = p.add_argument_group("the matrix")
    m.add_argument("--runtimes", required=True, metavar="LIST",
                   help="embedded versions (0.5.0,0.5.10,0.7.0; one not installed is installed first), "
                   "container, or all (every embedded runtime installed here)")
    m.add_argument("--engines", default="auto", metavar="LIST",
                   help="auto (per runtime, as rig soak picks), capi, tritonserver; an engine that cannot run "
                   "over a runtime is a row 'skipped: why' (default auto)")
    m.add_argument("--retain", default="none", metavar="LIST",
                   help="retention policies: none, last-response, last-array, or all (default none)")
    m.add_argument("--scenarios", metavar="LIST",
                   help="lifecycle scenarios (`rig scenarios` lists them), or all: each a cell per runtime and "
                   "engine, its negative control another; passes when the verdicts are those known for that core "
                   "and engine (not with --retain, --fault, --model-repository or --allow-outcomes)")
    m.add_argument("--bench", action="store_true", help="also run a short bench per runtime and engine")
    m.add_argument("--bench-concurrency", default="1,4", metavar="LIST",
                   help="the bench's points (default 1,4; 3 windows of 1 s each, one repeat)")
    m.add_argument("--cell-timeout", type=float, metavar="S",
                   help="seconds a cell may run before it is killed and recorded 'timeout' (default from "
                   "cycles, startup and exit timeouts)")
    # The soak's own options, as `rig soak` defines them, passed to every cell.
    tmp = argparse.ArgumentParser(add_help=False)
    add_target_options(tmp)
    add_cycle_options(tmp, f"cycles per cell (default {DEFAULT_CYCLES}, or the config's)")
    copied = []
    for group in tmp._action_groups[2:]:
        g = p.add_argument_group(f"each cell's soak: {group.title}")
        for action in group._group_actions:
            if action.dest not in _OWN:
                copied.append(g._add_action(action))
    p.set_defaults(func=run, soak_actions=copied)


def refuse_with_scenarios(args) -> None:
    """What cannot combine with --scenarios, in one line: each scenario sets its own fault,
    retention and models, and the verdicts its cells pass with."""
    given = [f"--retain {args.retain}"] if args.retain != "none" else []
    given += [o for o, d in (("--fault", "fault"), ("--model-repository", "model_repository"),
                             ("--allow-outcomes", "allow_outcomes")) if getattr(args, d, None) is not None]
    if given:
        raise RigError(f"{', '.join(given)} cannot combine with --scenarios: each scenario sets its own fault, "
                       "retention and models, and its cells pass with the verdicts known for it; drop them")


def run(args) -> int:
    from rig import cli, runtime, soak
    from rig.analysis import matrix

    scens = None
    if args.scenarios is not None:
        refuse_with_scenarios(args)
        scens = parse_scenarios(args.scenarios)
    retains = parse_retain(args.retain)
    engines = parse_engines(args.engines)
    installed = [r["package_version"] for r in runtime.list_embedded()]
    specs = parse_runtimes(args.runtimes, installed, runtime.PYTRITON_CORE)
    # Every cell's options, checked once as `rig soak` checks them (bad input: one line, nothing run).
    base = passthrough(args)
    probe = ["soak", *base, "--runtime", specs[0], "--engine", "capi"]
    probe += ["--retain", retains[0]] if scens is None else []
    if args.cycles is not None or not args.config:
        probe += ["--cycles", str(args.cycles if args.cycles is not None else DEFAULT_CYCLES)]
    for opt, value in (("--results", args.results), ("--allow-outcomes", args.allow_outcomes)):
        probe += [opt, value] if value is not None else []
    cfg = run_config(cli.build_parser().parse_args(probe))
    if cfg is None:  # the run is skipped on this machine (the cupy model without a GPU)
        return Exit.SKIPPED
    loads = _check_scenarios(args, probe, cfg, scens) if scens is not None else {}
    cycles = cfg.cycles
    if cycles < 1:
        raise RigError("--cycles must be >= 1")
    base_allowed = soak.allowed_outcomes(cfg, soak.DEFAULT_ALLOWED)
    results = str(cfg.results)
    timeout = args.cell_timeout or cycles * (cfg.startup_timeout + cfg.exit_timeout + cfg.request_timeout
                                              + cfg.workload.seconds + 30) + 120
    for v in specs:  # fetch what is missing first: a version that cannot be fetched stops here
        if v != "container" and v not in installed:
            print(f"runtime {v} is not installed: installing it (nvidia-pytriton {v}, Triton "
                  f"{runtime.PYTRITON_CORE.get(v, '?')})", flush=True)
            try:
                runtime.install_embedded(v, log=lambda m: print(f"  {m}", flush=True))
            except RigError:  # unpacked, yet unusable here (no stub for this Python): a row says why
                if v not in [r["package_version"] for r in runtime.list_embedded()]:
                    raise
    if scens is None and any(r != "none" for r in retains):
        print(f"retain {', '.join(r for r in retains if r != 'none')}: exit_timeout is allowed (a reference kept "
              "across stop() holds its model: the expected outcome); the table shows every outcome", flush=True)
    plan = _plan(specs, engines, retains if scens is None else ["none"])
    rows, bench_rows = [], []
    cells = scenario_cells(scens, plan) if scens is not None else []
    to_run = [c for c in cells if c.get("status") != "skipped"]
    total = len(to_run) + sum(len(p["engines"]) * (len(retains) if scens is None else 0) for p in plan) + (
        sum(len(p["engines"]) for p in plan) if args.bench else 0)
    counter = iter(range(1, total + 1))
    for p in plan:
        for skipped in p["skipped"]:
            if scens is not None:
                skipped.update(scenario=scens[0].name if len(scens) == 1 else "every scenario", retain="-")
            rows.append(skipped)
            print(f"runtime {skipped['runtime']}, engine {skipped['engine']}: skipped: {skipped['reason']}",
                  flush=True)
        if scens is not None:
            continue
        for engine, why in p["engines"]:
            for retain in retains:
                allowed = matrix.allowed_for(retain, base_allowed)
                label = (f"[{next(counter)}/{total}] runtime {p['spec']} (Triton {p['triton']}), engine {engine}, "
                         f"retain {retain}")
                print(f"{label}: soak, {cycles} cycle(s) ({why})", flush=True)
                argv = cell_argv(base, p["spec"], engine, retain, cycles, results, allowed)
                row = _run_cell(argv, timeout)
                row.update(runtime=p["spec"], engine=engine, retain=retain)
                _figures(row, results, "cycles", p["triton"])
                rows.append(row)
                print(f"{label}: {matrix._status(row)}", flush=True)
    for cell in cells:
        name = cell["scenario"] + (" (control)" if cell["control"] else "")
        where = f"runtime {cell['runtime']} (Triton {cell['triton_version']}), engine {cell['engine']}"
        if cell.get("status") == "skipped":
            print(f"{name}, {where}: skipped: {cell['reason']}", flush=True)
            rows.append(cell)
            continue
        label = f"[{next(counter)}/{total}] {name}, {where}"
        want = " / ".join((*cell["expected"], cell.get("growth") or "ok")) if cell["expected"] \
            else "nothing known here: recorded, not judged"
        load = loads.get(cell["scenario"], ())
        print(f"{label}: soak, {cycles} cycle(s), expected {want}{' under ' + ' '.join(load) if load else ''} "
              f"({cell['why']})", flush=True)
        row = _run_cell(scenario_argv(base, cell, cycles, results, load), timeout)
        row.update({k: v for k, v in cell.items() if k != "why"}, retain="-")
        _figures(row, results, "cycles", cell["triton_version"])
        matrix.judge_scenario(row)
        rows.append(row)
        print(f"{label}: {matrix._status(row)}", flush=True)
    if args.bench:
        for p in plan:
            for engine, _ in p["engines"]:
                label = f"[{next(counter)}/{total}] runtime {p['spec']} (Triton {p['triton']}), engine {engine}"
                print(f"{label}: bench at concurrency {args.bench_concurrency}", flush=True)
                argv = ["bench", *_bench_words(args), "--runtime", p["spec"], "--engine", engine,
                        "--concurrency", args.bench_concurrency, "--windows", "3", "--window-seconds", "1",
                        "--repeats", "1", "--results", results]
                row = _run_cell(argv, timeout)
                row.update(runtime=p["spec"], engine=engine, retain="-")
                _figures(row, results, "windows", p["triton"])
                bench_rows.append(row)
                print(f"{label}: {matrix._status(row)}", flush=True)
    print()
    print(matrix.format_table(rows) if scens is None else matrix.format_scenarios(rows))
    unjudged = [r for r in rows if r["status"] == "unjudged"]
    if unjudged:
        print(f"\n{len(unjudged)} cell(s) ran where nothing is known of their scenario's verdicts (that core or "
              "engine was never measured): recorded, not judged (`rig scenarios` says where each was measured)")
    if bench_rows:
        print()
        print(matrix.format_bench(bench_rows))
    from rig.text import redact

    print(f"\nresults: {redact(results)} (compare them: rig report {redact(results)})")
    return matrix.exit_status(rows + bench_rows)


def _check_scenarios(args, probe: list[str], cfg, scens: list) -> dict[str, tuple[str, ...]]:
    """Each scenario's cells checked as `rig soak` checks them, before anything runs (bad input:
    one line naming the scenario); the load each runs under where it needs one and none is given."""
    from rig import cli

    clash = [k for k, v in (("scenario", cfg.scenario), ("retain", cfg.retain != "none" and cfg.retain),
                            ("fault", cfg.fault != "none" and cfg.fault), ("model_repository", cfg.model_repository),
                            ("allow_outcomes", cfg.thresholds.allow_outcomes)) if v]
    if clash:
        raise RigError(f"{args.config}: {', '.join(clash)} cannot combine with --scenarios (each scenario sets its "
                       "own, and the verdicts its cells pass with): drop them from the file")
    loads = {}
    for s in scens:
        load = SCENARIO_LOAD if s.workload and cfg.workload.name == "none" and args.requests is None else ()
        for control in (False, True) if s.has_control else (False,):
            try:
                run_config(cli.build_parser().parse_args([*probe, *load, "--scenario", s.name,
                                                          *(["--control"] if control else [])]))
            except RigError as e:
                raise RigError(f"--scenarios {s.name}{' (its control)' if control else ''}: {e}") from None
        if load:
            loads[s.name] = load
    return loads


def _bench_words(args) -> list[str]:
    keep = set(_BENCH_DESTS)
    return passthrough(args, skip=tuple(a.dest for a in args.soak_actions if a.dest not in keep))


def _run_cell(argv: list[str], timeout: float) -> dict:
    """Run ``python -m rig ARGV`` in its own process group, its lines shown indented; the row's
    status from its exit status and what it printed."""
    from rig.procs import python_m

    cmd = [*python_m("rig"), *argv]
    lines: list[str] = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True)

    def pump():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            print(f"    {line.rstrip()}", flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    started = time.monotonic()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        procs.end_group(proc)
        reader.join(5)
        return {"status": "timeout", "reason": f"killed after {time.monotonic() - started:.0f} s "
                f"(--cell-timeout {timeout:.0f})", "run_id": _run_id(lines)}
    except KeyboardInterrupt:
        procs.end_group(proc)
        raise
    reader.join(5)
    return classify(rc, lines)


_RUN_ID = re.compile(r"^results: .*\(run_id (\S+)\)\s*$")


def _run_id(lines: list[str]) -> str | None:
    for line in reversed(lines):
        m = _RUN_ID.match(line)
        if m:
            return m.group(1)
    return None


def classify(rc: int, lines: list[str]) -> dict:
    """A cell's status from its exit status and output: `rig soak`'s codes, a signal, or another."""
    run_id = _run_id(lines)
    fails = [ln[len("FAIL: "):] for ln in lines if ln.startswith("FAIL: ")]
    errors = [ln[len("rig: error: "):] for ln in lines if ln.startswith("rig: error: ")]
    skips = [ln[len("rig: skipped: "):] for ln in lines if ln.startswith("rig: skipped: ")]
    last = next((ln for ln in reversed(lines) if ln.strip()), "no output")
    row = {"run_id": run_id, "exit": rc}
    if rc == Exit.OK and run_id:
        return {**row, "status": "pass", "reason": ""}
    if rc == Exit.FAILED and run_id:
        return {**row, "status": "fail", "reason": "; ".join(fails) or last}
    if rc == Exit.USAGE:
        return {**row, "status": "error", "reason": errors[-1] if errors else last}
    if rc == Exit.SKIPPED:
        return {**row, "status": "skipped", "reason": skips[-1] if skips else last}
    if rc == Exit.MACHINE:
        return {**row, "status": "machine", "reason": errors[-1] if errors else last}
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return {**row, "status": "crashed", "reason": f"the soak process died of {name} ({last[:120]})"}
    return {**row, "status": "crashed", "reason": f"the soak process exited {rc} ({last[:120]})"}


def _figures(row: dict, results: str, table: str, triton: str) -> None:
    """Add the cell's figures, read back from the store (what was stored, not what was printed)."""
    from rig.analysis import matrix
    from rig.store import Store

    row.setdefault("triton_version", triton)
    if not row.get("run_id"):
        return
    try:
        frame = Store(results).read(table, row["run_id"])
    except Exception as e:  # a store the cell could not finish: the row keeps its status
        row["reason"] = (row.get("reason") or "") + f" (its results do not read back: {e})"
        return
    if frame is None or not len(frame):
        return
    if table == "cycles":
        figs = matrix.cell_figures(frame)
        row.update({k: v for k, v in figs.items() if k != "triton_version"})
        row["triton_version"] = figs["triton_version"] or triton
    else:
        row["points"] = matrix.bench_figures(frame)
        versions = sorted(set(frame["triton_version"].astype(str)))
        row["triton_version"] = ", ".join(versions) or triton
