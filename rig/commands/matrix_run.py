"""Running `rig matrix`'s cells: each its own `python -m rig soak|bench ...` process (a core that
crashes or hangs takes only its cell down), its status from its exit status and what it printed,
its figures read back from the store.

Cells run one after another, their lines shown indented; with ``--jobs N`` up to N side by
side, each cell's lines in a log file of its own and a progress bar (a line per cell off a
terminal). Side by side, each cycle's start and load hold the quiet lock (``rig.worker.quiet``): the
parts of a cycle whose figures the machine's load can move run one at a time across cells; the
stops, exit timeouts and settling, which wait, overlap."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

from rig.common import procs
from rig.common.errors import Exit


@dataclasses.dataclass
class Job:
    label: str                   # what the progress says of it: "[3/40] retained-response, runtime ..."
    argv: list[str]              # `rig ...` words
    row: dict                    # the cell's row so far (its plan); the run's status and figures added
    table: str = "cycles"        # where its figures are read back: cycles (a soak) or windows (a bench)
    start_line: str = ""         # printed as it starts (sequential runs)


def run_jobs(jobs: list[Job], parallel: int, timeout: float, results: str, log_dir: Path | None,
             done: Callable[[dict], None], status: Callable[[dict], str]) -> list[dict]:
    """Run ``jobs`` (``parallel`` at a time) and return their rows in the jobs' order; ``done``
    sees each finished row first (to judge it), ``status`` says it in a word or two."""
    rows: list[dict | None] = [None] * len(jobs)
    if parallel <= 1:
        for i, job in enumerate(jobs):
            print(job.start_line or f"{job.label}: running", flush=True)
            rows[i] = _finish(job, _run_cell(job.argv, timeout), results, done)
            print(f"{job.label}: {status(rows[i])}", flush=True)
        return rows  # type: ignore[return-value]
    env = {"RIG_QUIET_LOCK": str(quiet_lock_path()), "RIG_NO_PLOT": "1"}
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    bar = _Bar(len(jobs))
    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        futures = {}
        for i, job in enumerate(jobs):
            log = (log_dir / f"cell-{i + 1:04d}.log") if log_dir is not None else None
            futures[pool.submit(_run_cell, job.argv, timeout, env, log)] = (i, log)
        for fut in as_completed(futures):
            i, log = futures[fut]
            row = _finish(jobs[i], fut.result(), results, done)
            if log is not None:
                row["log"] = str(log)
            rows[i] = row
            bar.advance(f"{jobs[i].label}: {status(row)}", row)
    except BaseException:  # Ctrl-C, SIGTERM: no cell still queued starts, those running are ended
        pool.shutdown(wait=False, cancel_futures=True)
        _end_all()
        raise
    finally:
        bar.close()
    pool.shutdown(wait=True)
    return rows  # type: ignore[return-value]


def quiet_lock_path() -> Path:
    """One lock a machine: every matrix here shares it (two halves of one table, the official one
    in the sandbox, which sees the same runtime cache at the same path, included), so their cells'
    loads never overlap either."""
    from rig.parent.runtime import cache_dir

    base = cache_dir().parent
    try:
        base.mkdir(parents=True, exist_ok=True)
        return base / "quiet.lock"
    except OSError:  # a read-only cache: this matrix's own
        return Path(tempfile.mkdtemp(prefix="rig-matrix-")) / "quiet.lock"


def _finish(job: Job, result: dict, results: str, done: Callable[[dict], None]) -> dict:
    row = {**result, **job.row}
    _figures(row, results, job.table, job.row.get("triton_version") or "-")
    done(row)
    return row


class _Bar:
    """A live bar with the tally of statuses on a terminal; a line per finished cell elsewhere."""

    def __init__(self, total: int):
        self.tally: dict[str, int] = {}
        self.live = sys.stdout.isatty()
        self._bar = None
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
                TimeRemainingColumn

            self._bar = Progress(TextColumn("[bold]matrix"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TimeRemainingColumn(), TextColumn("{task.fields[figures]}"))
            self._task = self._bar.add_task("matrix", total=total, figures="")
            self._bar.start()

    def advance(self, line: str, row: dict) -> None:
        self.tally[row.get("status", "?")] = self.tally.get(row.get("status", "?"), 0) + 1
        figures = " ".join(f"{k}={v}" for k, v in sorted(self.tally.items()))
        if self._bar is not None:
            self._bar.console.print(line)
            self._bar.update(self._task, advance=1, figures=figures)
        else:
            print(f"{line}  [{figures}]", flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


_LIVE: set[subprocess.Popen] = set()
_ENDING = threading.Event()


def _end_all() -> None:
    _ENDING.set()
    for proc in list(_LIVE):
        procs.end_group(proc)


def _run_cell(argv: list[str], timeout: float, env: dict | None = None, log: Path | None = None) -> dict:
    """Run ``python -m rig ARGV`` in its own process group, its lines shown indented (or written
    to ``log``); the row's status from its exit status and what it printed."""
    from rig.common.procs import python_m

    cmd = [*python_m("rig"), *argv]
    lines: list[str] = []
    if _ENDING.is_set():  # the matrix is being interrupted: start nothing more
        return {"status": "error", "reason": "not run: the matrix was interrupted", "run_id": None}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True, env={**os.environ, **(env or {})})
    _LIVE.add(proc)
    sink = open(log, "w") if log is not None else None

    def pump():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if sink is not None:
                sink.write(line)
            else:
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
                f"(--cell-timeout {timeout:.0f})", "run_id": _run_id(lines), "wall_s": time.monotonic() - started}
    except KeyboardInterrupt:
        procs.end_group(proc)
        raise
    finally:
        _LIVE.discard(proc)
    reader.join(5)
    if sink is not None:
        sink.close()
    return {**classify(rc, lines), "wall_s": time.monotonic() - started}


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
