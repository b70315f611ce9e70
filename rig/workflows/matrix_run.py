"""Running `rig matrix`'s cells: each its own `python -m rig cell` process (a core that crashes or
hangs takes only its cell down; rig.commands.cell), given its typed configuration
(``rig.contract.cell.CellSpec``, a JSON file) and answering over a pipe in typed messages
(``rig.contract.messages``: ``CellDone``, or ``Fatal``); its status from that record, never from
what it printed; its figures read back from the store (docs/dev/matrix-cells.md).

Cells run one after another, their lines shown indented; with ``--jobs N`` up to N side by
side, each cell's lines in a log file of its own (its spec beside it) and a progress bar (a line
per cell off a terminal). Side by side, each cycle's start and load hold the quiet lock
(``rig.worker.quiet``): the parts of a cycle whose figures the machine's load can move run one at
a time across cells; the stops, exit timeouts and settling, which wait, overlap."""

from __future__ import annotations

import dataclasses
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from rig.common import procs
from rig.common.errors import Exit
from rig.contract.cell import CellSpec
from rig.contract.messages import CellDone, Fatal, Message, decode


@dataclasses.dataclass
class Job:
    label: str  # what the progress says of it: "[3/40] retained-response, runtime ..."
    spec: CellSpec  # what the cell runs: its typed configuration (its run id named as it starts)
    row: dict  # the cell's row so far (its plan); the run's status and figures added
    table: str = "cycles"  # where its figures are read back: cycles (a soak) or windows (a bench)
    start_line: str = ""  # printed as it starts (sequential runs)
    # the same cell again for N cycles (a scenario cell's, for its race: rig.workflows.matrix_races)
    again: Callable[[int], Job] | None = None
    answer: dict | None = None  # what its process answered (``_run_cell``), before its figures and judgement


def run_jobs(
    jobs: list[Job],
    parallel: int,
    timeout: float,
    results: str,
    log_dir: Path | None,
    done: Callable[[dict], object],
    status: Callable[[dict], str],
) -> list[dict]:
    """Run ``jobs`` (``parallel`` at a time) and return their rows in the jobs' order; ``done``
    sees each finished row first (to judge it), ``status`` says it in a word or two. Each cell's
    spec is a file beside its log (side by side, with ``log_dir``), else in a folder of its own
    removed afterwards."""
    rows: list[dict | None] = [None] * len(jobs)
    logged = parallel > 1 and log_dir is not None
    if logged:
        log_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
    specs = log_dir if logged else Path(tempfile.mkdtemp(prefix="rig-cells-"))
    try:
        if parallel <= 1:
            for i, job in enumerate(jobs):
                print(job.start_line or f"{job.label}: running", flush=True)
                rows[i] = _finish(
                    job, _run_cell(job.spec, timeout, spec_path=specs / f"cell-{i + 1:04d}.json"), results, done
                )
                print(f"{job.label}: {status(rows[i])}", flush=True)
        else:
            _side_by_side(jobs, parallel, timeout, results, log_dir if logged else None, specs, done, status, rows)
    finally:
        if not logged:
            shutil.rmtree(specs, ignore_errors=True)
    return rows  # type: ignore[return-value]


def _side_by_side(
    jobs: list[Job],
    parallel: int,
    timeout: float,
    results: str,
    log_dir: Path | None,
    specs: Path,
    done: Callable[[dict], object],
    status: Callable[[dict], str],
    rows: list[dict | None],
) -> None:
    env = {"RIG_QUIET_LOCK": str(quiet_lock_path()), "RIG_NO_PLOT": "1"}
    bar = _Bar(len(jobs))
    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        futures = {}
        for i, job in enumerate(jobs):
            log = (log_dir / f"cell-{i + 1:04d}.log") if log_dir is not None else None
            futures[pool.submit(_run_cell, job.spec, timeout, env, log, specs / f"cell-{i + 1:04d}.json")] = (i, log)
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


def _finish(job: Job, result: dict, results: str, done: Callable[[dict], object]) -> dict:
    job.answer = result
    row = {**result, **job.row}
    _figures(row, results, job.table, job.row.get("triton_version") or "-")
    done(row)
    return row


def pooled_row(job: Job, answers: list[dict], results: str, done: Callable[[dict], object]) -> dict:
    """One cell run more than once (its first run, then more cycles of it: its ``answers`` in
    order) as one row: its figures read back from every run's cycles, pooled; its status the
    first run's, or, where that passed, the first other run's that did not (its reason saying so);
    ``run_id`` the first run's, ``run_ids`` each; then ``done`` sees it (to judge it)."""
    first = answers[0]
    worse = [a for a in answers[1:] if a.get("status") != "pass"]
    row = {**first, **job.row}
    if first.get("status") == "pass" and worse:
        row["status"] = worse[0]["status"]
    reasons = [first.get("reason") or ""] + [f"its more cycles: {a.get('reason') or a['status']}" for a in worse]
    row["reason"] = "; ".join(r for r in reasons if r)
    row["run_ids"] = [a["run_id"] for a in answers if a.get("run_id")]
    row["wall_s"] = sum(a.get("wall_s") or 0.0 for a in answers)
    _figures(row, results, job.table, job.row.get("triton_version") or "-", row["run_ids"])
    done(row)
    return row


class _Bar:
    """A live bar with the tally of statuses on a terminal; a line per finished cell elsewhere."""

    def __init__(self, total: int):
        self.tally: dict[str, int] = {}
        self.live = sys.stdout.isatty()
        self._bar = None
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("[bold]matrix"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[figures]}"),
            )
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


def _run_cell(
    spec: CellSpec, timeout: float, env: dict | None = None, log: Path | None = None, spec_path: Path | None = None
) -> dict:
    """Run ``python -m rig cell`` on ``spec`` (written to ``spec_path``; None: a file of its own,
    removed after) in its own session, its lines shown indented (or written to ``log``): for
    people only. Its run id is named here, as it starts, where the spec has none (run ids keep
    the order cells ran in). The row's status is what the cell sent over its pipe
    (``cell_status``); killed past ``timeout``: ``timeout``, naming the run it was given."""
    from rig.parent.orchestrator import new_run_id

    if _ENDING.is_set():  # the matrix is being interrupted: start nothing more
        return {"status": "error", "reason": "not run: the matrix was interrupted", "run_id": None}
    if spec_path is None:
        with tempfile.TemporaryDirectory(prefix="rig-cell-") as tmp:
            return _run_cell(spec, timeout, env, log, Path(tmp) / "cell.json")
    if not spec.run_id:
        spec = dataclasses.replace(spec, run_id=new_run_id())
    spec_path.write_text(spec.to_json())
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [*procs.python_m("rig"), "cell", "--spec", str(spec_path), "--result-fd", str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,
            pass_fds=(w,),
            env={**os.environ, **(env or {})},
        )
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    _LIVE.add(proc)
    sink = open(log, "w") if log is not None else None  # noqa: SIM115
    reader = threading.Thread(target=_show, args=(proc, sink), daemon=True)
    reader.start()
    started = time.monotonic()
    try:
        msgs, timed_out = _collect(proc, r, timeout)
        if timed_out:
            procs.end_group(proc)
            return {
                "status": "timeout",
                "reason": f"killed after {time.monotonic() - started:.0f} s (--cell-timeout {timeout:.0f})",
                "run_id": spec.run_id,
                "wall_s": time.monotonic() - started,
            }
        return {**cell_status(msgs, proc.wait(), spec.run_id), "wall_s": time.monotonic() - started}
    except KeyboardInterrupt:
        procs.end_group(proc)
        raise
    finally:
        _LIVE.discard(proc)
        os.close(r)
        reader.join(5)
        if sink is not None:
            sink.close()


def _show(proc: subprocess.Popen, sink) -> None:
    """The cell's printed lines, shown indented or written to its log: never read for its result."""
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if sink is not None:
                sink.write(line)
            else:
                print(f"    {line.rstrip()}", flush=True)
    except (OSError, ValueError):  # its log closed meanwhile: a process the cell left holds its stdout
        pass


def _collect(proc: subprocess.Popen, fd: int, timeout: float) -> tuple[list[Message], bool]:
    """The messages the cell sends over ``fd`` until it exits (and the pipe is drained); True
    with them where it outlives ``timeout`` seconds. A line that is not a message is ignored."""
    msgs: list[Message] = []
    buf, eof = b"", False
    deadline = time.monotonic() + timeout
    while True:
        exited = proc.poll() is not None
        if exited and (eof or not select.select([fd], [], [], 0)[0]):
            break  # drained (a process the cell left behind may still hold the pipe open)
        if not exited and time.monotonic() > deadline:
            return msgs, True
        if eof:
            try:
                proc.wait(min(0.5, max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
            continue
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 1 << 16)
            eof = not chunk
            *lines, buf = (buf + chunk).split(b"\n")
            msgs += [m for m in map(decode, lines) if m is not None]
    tail = decode(buf) if buf.strip() else None
    return msgs + ([tail] if tail is not None else []), False


def cell_status(msgs: list[Message], rc: int, run_id: str) -> dict:
    """A cell's row so far from the record it sent (``CellDone``: `rig soak`'s exit statuses), or,
    where it sent none, from how its process ended (``Fatal``'s error where it sent one);
    ``run_id``: the run the matrix named for it."""
    done = next((m for m in reversed(msgs) if isinstance(m, CellDone)), None)
    fatal = next((m for m in reversed(msgs) if isinstance(m, Fatal)), None)
    if done is not None:
        row = {"run_id": done.run_id, "exit": rc}
        if done.exit == Exit.OK and done.run_id:
            return {**row, "status": "pass", "reason": ""}
        if done.exit == Exit.FAILED and done.run_id:
            return {**row, "status": "fail", "reason": "; ".join(done.reasons) or "its thresholds failed"}
        words = {Exit.USAGE: "error", Exit.SKIPPED: "skipped", Exit.MACHINE: "machine"}
        if done.exit in words:
            return {**row, "status": words[done.exit], "reason": done.error or f"exit status {done.exit}"}
    if rc < 0:
        try:
            how = f"died of {signal.Signals(-rc).name}"
        except ValueError:
            how = f"died of signal {-rc}"
    else:
        how = f"exited {rc}" if done is None else f"exited {rc}, its record says exit status {done.exit}"
    why = f": {fatal.error}" if fatal is not None else ""
    return {"run_id": run_id, "exit": rc, "status": "crashed", "reason": f"the cell process {how}{why}"}


def _read(results: str, table: str, run_ids: list[str], columns: list[str] | None = None):
    """The rows of ``run_ids`` in ``table``, one frame (a cell run more than once: its runs' rows pooled)."""
    import pandas as pd

    from rig.store import Store

    store = Store(results)
    frames = [store.read(table, run_id, columns=columns) for run_id in run_ids]
    frames = [f for f in frames if f is not None and len(f)]
    if len(frames) <= 1:
        return frames[0] if frames else None
    return pd.concat(frames, ignore_index=True)


def _figures(row: dict, results: str, table: str, triton: str, run_ids: list[str] | None = None) -> None:
    """Add the cell's figures, read back from the store (what was stored, not what was printed);
    ``run_ids``: its runs' cycles pooled (else its ``run_id``'s)."""
    from rig.analysis import matrix

    row.setdefault("triton_version", triton)
    if not row.get("run_id"):
        return
    ids = run_ids or [row["run_id"]]
    try:
        frame = _read(results, table, ids)
    except Exception as e:  # a store the cell could not finish: the row keeps its status  # noqa: BLE001
        row["reason"] = (row.get("reason") or "") + f" (its results do not read back: {e})"
        return
    if frame is None or not len(frame):
        return
    if table == "cycles":
        figs = matrix.cell_figures(frame)
        row.update({k: v for k, v in figs.items() if k != "triton_version"})
        row["triton_version"] = figs["triton_version"] or triton
        cycle_batches = matrix.batch_figures(frame)  # Triton's over each whole cycle (schema 15)
        if cycle_batches["batches"] is not None:
            row.update(cycle_batches)
        else:  # an older store: its load windows'
            _batch_figures(row, results, ids)
    else:
        row["points"] = matrix.bench_figures(frame)
        versions = sorted(set(frame["triton_version"].astype(str)))
        row["triton_version"] = ", ".join(versions) or triton


def _batch_figures(row: dict, results: str, run_ids: list[str]) -> None:
    """Add the batch sizes Triton formed in the cell, read back from its stored windows (none:
    its cycles sent a fixed count of requests, which stores no window)."""
    from rig.analysis import matrix

    try:
        windows = _read(results, "windows", run_ids, columns=["batch_sizes"])
    except Exception as e:  # a store the cell could not finish: the row keeps its figures  # noqa: BLE001
        row["reason"] = (row.get("reason") or "") + f" (its windows do not read back: {e})"
        return
    row.update(matrix.batch_figures(windows if windows is not None else []))
