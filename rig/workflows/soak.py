"""What ``rig cycle`` and ``rig soak`` do (their commands: ``rig.commands.cycle``, ``rig.commands.soak``):
prepare, run cycles with live progress, summarise, judge (and, with ``--junit FILE``, write what was
judged as JUnit XML for CI: ``rig.workflows.soak_junit``)."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import time
from collections.abc import Callable

from rig.common.errors import Exit, RigError
from rig.common.text import redact
from rig.contract import verdicts
from rig.contract.rows import CycleResult, CycleRow, WindowRow, typed_row
from rig.parent import orchestrator
from rig.parent.config import RunConfig, from_toml_text
from rig.store import Store
from rig.store import fs as storefs
from rig.workflows.tally import (  # noqa: F401
    Judged,
    Tally,
    cycle_line,
    growth_lines,
    growth_parts,
    summary_table,
)

DEFAULT_ALLOWED = verdicts.GOOD  # a verdict of each kind (verdicts.OUTCOMES, verdicts.LOAD_OUTCOMES)


def allowed_outcomes(cfg: RunConfig, default: tuple[str, ...]) -> tuple[str, ...]:
    """The verdicts that do not fail the run: the config's ``allow_outcomes`` read by
    ``verdicts.allowed``, else ``default``."""
    return verdicts.allowed(cfg.thresholds.allow_outcomes, default)


def judge(tally: Tally, cfg: RunConfig, allowed: tuple[str, ...]) -> list[str]:
    """Reasons the run fails its thresholds (empty: it passes): ``rig.analysis.verdict.soak``."""
    from rig.analysis import verdict

    t = cfg.thresholds
    return verdict.soak(
        tally.rows,
        allowed,
        max_stop_latency_s=t.max_stop_latency_s,
        min_finalize_success=t.min_finalize_success,
        allow_leaks=t.allow_leaks,
        run_trend=tally.run_trend(),
        max_slowdown=t.max_slowdown,
    )


class Progress:
    """A live progress bar on a terminal; one line per cycle elsewhere (CI logs)."""

    def __init__(self, total: int, label: str, tally: Tally, out=sys.stdout):
        self.tally = tally
        self.out = out
        self.live = out.isatty()
        self._bar = None
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[figures]}"),
                transient=False,
            )
            self._task = self._bar.add_task(label, total=total, figures="starting ...")
            self._bar.start()

    def figures(self, phase: str = "") -> str:
        t = self.tally
        last = t.stop_latencies[-1] if t.stop_latencies else None
        fs = t.finalize_success
        tput = next((r.throughput for r in reversed(t.rows) if r.throughput), None)
        parts = [
            f"{tput:,.0f} infer/s" if tput else "",
            f"last stop {last:.2f}s" if last is not None else "",
            f"finalize {fs:.0%}" if fs is not None else "",
            " ".join(f"{k}={v}" for k, v in sorted(t.outcomes.items())),
            "load " + " ".join(f"{k}={v}" for k, v in sorted(t.load_outcomes.items())) if t.load_outcomes else "",
            "growth " + " ".join(f"{k}={v}" for k, v in sorted(t.growth_outcomes.items()))
            if set(t.growth_outcomes) - {"ok", "not_measured"}
            else "",
            phase,
        ]
        return "  ".join(p for p in parts if p)

    def window(self, w: WindowRow):
        """Live figures of the cycle in flight, from its latest measurement window."""
        if self._bar and w.throughput:
            live = f"[cycle {w.cycle}: {w.throughput:,.0f} infer/s p99 {w.p99_us or 0:,.0f} us]"
            self._bar.update(self._task, figures=self.figures(live))

    def phase(self, cycle: int, phase: str):
        if self._bar:
            self._bar.update(self._task, figures=self.figures(f"[cycle {cycle}: {phase}]"))

    def cycle_done(self, row: CycleRow):
        if self._bar:
            self._bar.update(self._task, advance=1, figures=self.figures())
        else:
            print(cycle_line(row), file=self.out, flush=True)

    def close(self):
        if self._bar:
            self._bar.stop()


def results_store(results) -> Store:
    """The store a run writes to (a folder or a pyarrow filesystem URI), checked reachable
    (``storefs.check_writable``): what ``orchestrator.prepare`` records into."""
    store = Store(results)
    storefs.check_writable(store)
    return store


@dataclasses.dataclass(frozen=True)
class Outputs:
    """Where a judged run goes beside the store: ``junit``, a file to write it to as JUnit XML
    (checked beforehand: ``rig.parent.junit.check_path``); ``summary_json``, a file to write its
    summary to as JSON (``rig.workflows.summary``) once its exit status is known. Interrupted
    runs write both too."""

    junit: str | None = None
    summary_json: str | None = None


@dataclasses.dataclass(frozen=True)
class Resume:
    """A killed run to go on with: its id, and whether ``--cycles`` was given (to run more than it
    was started for)."""

    run_id: str
    cycles_given: bool = False


def execute(
    cfg: RunConfig,
    command: str,
    resume: Resume | None = None,
    allowed: tuple[str, ...] = DEFAULT_ALLOWED,
    log: Callable[[str], None] = print,
    on_window: Callable[[WindowRow], None] | None = None,
    run_id: str | None = None,
    outputs: Outputs = Outputs(),
    cpu_idle: str | None = None,
) -> tuple[int, Tally, str, list[str]]:
    """Run (or resume) a cycle/soak; returns (exit status, tally, run_id, reasons it failed).
    ``run_id``: a new run's id, named by the caller before it starts (a matrix cell's; default a
    new one); ``resume``: the run it continues; ``cpu_idle``: how the caller holds the CPUs
    (``rig.common.cpuidle``'s method), for the run's row; None: not asked."""
    from rig.parent.junit import now
    from rig.workflows import summary

    summary.check_path(outputs.summary_json)

    started = (now(), time.monotonic())
    stored_rows: list[CycleRow] = []
    store = results_store(cfg.results)
    if resume:
        cfg, stored_rows = _resumed(store, resume.run_id, cfg, resume.cycles_given, log)
    allowed = allowed_outcomes(cfg, allowed)
    p = orchestrator.prepare(cfg, command, store, run_id=resume.run_id if resume else run_id, log=log)
    if not resume:
        orchestrator.write_run_row(p, command, cpu_idle=cpu_idle)
    _announce(p, cfg, store, log)
    done = {r.cycle for r in stored_rows}
    todo = [k for k in range(1, cfg.cycles + 1) if k not in done]
    if resume:
        log(f"resuming: {len(done)} cycle(s) stored, {len(todo)} to go")
    tally = Tally(list(stored_rows))
    judged = Judged(p, tally, allowed, command, started)
    progress = Progress(len(todo), f"{command} {p.run_id}", tally) if command == "soak" else None

    def collect_window(w: WindowRow):
        if progress:
            progress.window(w)
        if on_window:
            on_window(w)

    def on_cycle(result: CycleResult):
        row = result.row
        tally.add(row, result.windows)
        orchestrator.record(p, result)
        if progress:
            progress.cycle_done(row)
        else:
            log(cycle_line(row))

    try:
        orchestrator.run_cycles(
            p, todo, on_cycle, on_window=collect_window, on_phase=progress.phase if progress else None
        )
    except KeyboardInterrupt:
        if progress:
            progress.close()
            progress = None
        _interrupted(judged, outputs, log)
        raise
    finally:
        if progress:
            progress.close()
    reasons = judge(tally, cfg, allowed)
    return _after_judging(judged, reasons, outputs, store, log), tally, p.run_id, reasons


def _after_judging(judged: Judged, reasons: list[str], outputs: Outputs, store, log: Callable[[str], None]) -> int:
    """What follows a run's judging: its JUnit XML, a soak's compaction and plot, its summary JSON;
    returns its exit status."""
    from rig.workflows import soak_junit

    p, tally, junit, summary_json = judged.p, judged.tally, outputs.junit, outputs.summary_json
    if junit:  # before compaction and the plot: what was judged reaches CI whatever follows
        soak_junit.write(junit, judged, reasons)
        log(f"JUnit XML: {junit}")
    status = Exit.FAILED if reasons else Exit.OK
    try:
        if judged.command == "soak":
            _compact_and_plot(store, p, tally, log)
    except OSError as e:  # the machine failed what follows the judging (rig.cli: exit 4); the summary says so
        if summary_json:
            failed = f"the machine failed the run after its cycles: {e.strerror or e}"
            _summary(summary_json, judged, Exit.MACHINE, [*reasons, failed], log)
        raise
    if summary_json:
        _summary(summary_json, judged, status, reasons, log)
    return status


def _interrupted(judged: Judged, outputs: Outputs, log: Callable[[str], None]) -> None:
    """An interrupted run: how to go on, and its JUnit file and summary as they stand."""
    p, cfg, tally = judged.p, judged.cfg, judged.tally
    resume_with = f"rig soak --resume {p.run_id} --results {shlex.quote(redact(str(cfg.results)))}"
    log(f"interrupted after {len(tally.rows)} stored cycle(s); continue with: {resume_with}")
    if outputs.junit:
        _junit_interrupted(outputs.junit, judged, resume_with, log)
    if outputs.summary_json:
        why = f"interrupted after {len(tally.rows)} stored cycle(s); continue with: {resume_with}"
        _summary(outputs.summary_json, judged, Exit.INTERRUPTED, [why], log)


def _announce(p, cfg: RunConfig, store, log: Callable[[str], None]) -> None:
    """What runs, where, and how: the run's first lines."""
    log(
        f"run {p.run_id}: {p.runtime.name} (Triton {p.runtime.triton_version}), engine {p.engine}, "
        f"model {p.model_label}, retain {cfg.retain}, stop {cfg.stop_strategy}, "
        f"restart {cfg.restart}, results in {store.root}/"
    )
    log(f"engine {p.engine}: {p.engine_reason.split(';')[0]}")
    if cfg.workload.name != "none" and cfg.workload.web_port:
        log(f"Locust's web UI: http://127.0.0.1:{cfg.workload.web_port}/ while each cycle's workload runs")


def _compact_and_plot(store, p, tally: Tally, log: Callable[[str], None]) -> None:
    """A soak's files merged (one per table and partition; a cycle run is one already), then its
    plot (not for a matrix's cells, whose report plots them: RIG_NO_PLOT)."""
    store.compact(p.run_id, owner=True)
    if tally.rows and not os.environ.get("RIG_NO_PLOT"):
        from rig.analysis import plots

        path = plots.soak_figure(store.read("cycles", p.run_id), store.plot_path(f"{p.run_id}-soak.png"))
        log(f"plot: {store.publish(path)}")


def _summary(path: str, judged: Judged, status: int, reasons: list[str], log: Callable[[str], None]) -> None:
    """The run's summary JSON (``rig.workflows.summary``); a failure to write it is said, and the
    run's own status stands."""
    from rig.workflows import summary

    p, cfg, tally, command = judged.p, judged.cfg, judged.tally, judged.command
    extra = {
        "triton_version": p.runtime.triton_version,
        "runtime": p.runtime.name,
        "engine": p.engine,
        "model": p.model_label,
        "results": redact(str(cfg.results)),
    }
    try:
        summary.write(
            path, summary.soak(command, status, p.run_id, tally.rows, reasons, cycles_planned=cfg.cycles, extra=extra)
        )
        log(f"summary JSON: {path}")
    except OSError as e:
        log(f"summary JSON: {path} not written ({e.strerror or e})")


def _resumed(
    store: Store, resume: str, cfg: RunConfig, cycles_given: bool, log: Callable[[str], None]
) -> tuple[RunConfig, list[CycleRow]]:
    """The config a killed run was started with (``--cycles`` may add more, ``--results`` says where
    it is now) and the cycles it stored; the stubs and shared memory it left are cleaned up."""
    stored = store.run_row(resume)
    if stored is None:
        from rig.parent.preflight import running_holder

        holder = running_holder(store.work_dir(resume))
        if holder:  # started, its run row not yet stored
            raise RigError(f"run {resume} is running in {holder}: wait for it to end (or stop it) before resuming it")
        raise RigError(f"no run {resume!r} in {redact(str(cfg.results))}/runs: check --results and the run id")
    results, cycles = cfg.results, cfg.cycles
    given_cycles = cycles_given
    cfg = dataclasses.replace(from_toml_text(stored["config"]), results=results)  # where it is now, not where it was
    if given_cycles:
        if cycles < cfg.cycles:
            raise RigError(f"run {resume} was started for {cfg.cycles} cycles; --cycles may only add more")
        cfg = dataclasses.replace(cfg, cycles=cycles)
    # One read of what the killed run stored: which cycles are done, and their figures.
    df = store.read("cycles", resume)
    if store.damaged:
        log(
            f"skipped {len(store.damaged)} damaged file(s) in {redact(str(cfg.results))} (their cycles run again): "
            f"{store.damaged[0]}"
        )
    df = df.astype(object).where(df.notna(), None)
    stored_rows = [typed_row(CycleRow, rec) for rec in df.to_dict("records")]
    from rig.common import probes

    left = probes.orphaned_stubs(str(store.work_dir(resume)))  # its models are rendered there
    if left:
        log(f"killed {probes.kill_processes(left)} backend stub(s) the killed run left running")
    stale = probes.orphaned_shm_regions()
    if stale:
        probes.remove_shm_regions(stale)
        log(f"removed {len(stale)} shared-memory region(s) no live process maps (left by the killed run)")
    return cfg, stored_rows


def _junit_interrupted(junit: str, judged: Judged, resume_with: str, log: Callable[[str], None]) -> None:
    """An interrupted run's JUnit XML, as far as it got (a failure to write it is said, not raised:
    the interruption is what the night ends with)."""
    from rig.workflows import soak_junit

    try:
        tally, cfg = judged.tally, judged.cfg
        soak_junit.write(
            junit,
            judged,
            judge(tally, cfg, judged.allowed),
            interrupted=f"interrupted after {len(tally.rows)} stored cycle(s) of {cfg.cycles}; "
            f"continue with: {resume_with}",
        )
        log(f"JUnit XML: {junit}")
    except OSError as e:
        log(f"JUnit XML: {junit} not written ({e.strerror or e})")
