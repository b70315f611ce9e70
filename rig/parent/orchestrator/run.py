"""The workers of a run and their watchdog: ``WorkerHandle`` (one worker process in its own
process group, and the pipe it reports on in ``rig.contract.messages``) and ``run_cycles``."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from rig.common import probes, procs
from rig.common.errors import RigError
from rig.common.procs import python_m
from rig.contract.messages import (
    CycleDone,
    CycleStart,
    Fatal,
    Message,
    Partial,
    Phase,
    Refused,
    Samples,
    Window,
    decode,
)
from rig.contract.rows import (
    CycleDraft,
    CycleResult,
    WindowRow,
    typed_row,
    window_row,
)
from rig.contract.table_rows import MemoryRow
from rig.parent.orchestrator import reap
from rig.parent.orchestrator.prepare import Prepared
from rig.parent.orchestrator.rows import Loss, blank_row, finish_row, lost_cycle, run_tags
from rig.parent.orchestrator.spec import cycle_spec


class WorkerHandle:
    """One worker process in its own process group, and the pipe it reports on."""

    def __init__(self, p: Prepared, cycles: list[int], index: int):
        # The worker (and the stubs it starts) run in the run's work folder, never in the user's:
        # a file there named like a module (numpy.py) would shadow it in a stub. Paths absolute.
        work = p.work_dir.resolve()
        spec = cycle_spec(p, cycles)
        (p.work_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.spec_path = work / f"spec-{index:04d}.json"
        spec.write(self.spec_path)
        self.log_path = p.work_dir / "logs" / f"worker-{index:04d}.log"
        env = p.runtime.worker_env()
        root = str(Path(__file__).resolve().parents[3])  # the folder that holds the rig package
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        r, w = os.pipe()
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(
                [
                    *(p.worker_argv or [*python_m("rig"), "worker"]),
                    "--spec",
                    str(self.spec_path),
                    "--result-fd",
                    str(w),
                ],
                pass_fds=(w,),
                start_new_session=True,
                env=env,
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=work,
            )
        os.close(w)
        self.pgid = self.proc.pid
        self._r = r
        self._buf = b""
        self.eof = False

    def read(self, timeout: float) -> list[Message]:
        """Messages that arrived within ``timeout`` seconds (possibly none); a line that is not
        one (``messages.decode``: the worker's own output, garbage) is ignored."""
        if self.eof:
            time.sleep(min(timeout, 0.05))
            return []
        ready, _, _ = select.select([self._r], [], [], max(0.0, timeout))
        if not ready:
            return []
        chunk = os.read(self._r, 1 << 16)
        if not chunk:
            self.eof = True
            return []
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [msg for msg in map(decode, lines) if msg is not None]

    def kill(self) -> tuple[int, int]:
        """SIGKILL the whole group; returns (stubs killed, shared-memory regions leaked)."""
        stubs = len(probes.stubs_in_group(self.pgid))
        return stubs, len(procs.kill_group(self.pgid, self.proc))

    def reap_leftovers(self) -> int:
        """After the worker exited: kill what it left in its group (stubs it never reaped)."""
        left = probes.stubs_in_group(self.pgid)
        return probes.kill_processes(left)

    def log_tail(self, n: int = 600) -> str:
        try:
            data = self.log_path.read_bytes()[-n:]
            return data.decode(errors="replace").strip().replace("\n", " | ")
        except OSError:
            return ""

    def close(self):
        try:
            os.close(self._r)
        except OSError:
            pass


def run_cycles(
    p: Prepared,
    cycles: list[int],
    on_cycle: Callable[[CycleResult], None],
    on_window: Callable[[WindowRow], None] | None = None,
    on_phase: Callable[[int, str], None] | None = None,
) -> None:
    """Run the given cycle numbers in workers. Each cycle's ``CycleResult`` (its row and its
    windows) goes to ``on_cycle`` as soon as it is known; ``on_window`` sees each window's row
    as it arrives (progress), ``on_phase`` each phase."""
    pending = list(cycles)
    windows: dict[int, list[WindowRow]] = {}
    memory: dict[int, list[MemoryRow]] = {}

    def finish(row: CycleDraft, wall: float | None, reported: str | None = None) -> None:
        done = finish_row(p, row, wall, reported)
        on_cycle(CycleResult(done, tuple(windows.pop(done.cycle, ())), tuple(memory.pop(done.cycle, ()))))

    index = 0
    while pending:
        index += 1
        batch = pending[:1] if p.config.restart == "fresh-process" else list(pending)
        w = WorkerHandle(p, batch, index)
        current, phase = None, "spawn"  # the cycle in flight (None: between cycles), its phase
        t_cycle = time.monotonic()
        deadline = time.monotonic() + p.config.startup_timeout + 60
        partial: Partial | None = None  # the current cycle's row once its stop returned
        fatal: str | None = None  # the error the worker reported before it exits
        killer, killed = reap.Killer(p.config), None  # the scenario worker-killed's kill, and the kill made
        try:
            while True:
                for msg in w.read(killer.wait(min(0.5, max(0.0, deadline - time.monotonic())))):
                    if isinstance(msg, CycleStart):
                        current, t_cycle, partial = msg.cycle, time.monotonic(), None
                        killer.disarm()
                    elif isinstance(msg, Phase):
                        phase = msg.phase
                        deadline = time.monotonic() + msg.timeout_s
                        killer.phase(current, phase)
                        if on_phase and current is not None:
                            on_phase(current, phase)
                    elif isinstance(msg, (Window, Samples)):
                        _keep_figures(p, msg, windows, memory, on_window)
                    elif isinstance(msg, CycleDone):
                        row = _done_row(p, w, msg)
                        finish(row, time.monotonic() - t_cycle, msg.triton_version)
                        if row["cycle"] in pending:
                            pending.remove(row["cycle"])
                        current = None
                        killer.disarm()
                        deadline = time.monotonic() + p.config.startup_timeout + 60
                    elif isinstance(msg, Partial):
                        partial = msg
                    elif isinstance(msg, Fatal):
                        fatal = msg.error
                    elif isinstance(msg, Refused):  # the inputs do not fit a model: bad input, no cycle stored
                        raise RigError(msg.error)
                if w.proc.poll() is not None and w.eof:
                    break
                killed = killer.due(w.proc, phase)
                if killed:
                    break
                if w.proc.poll() is not None:
                    # Drain what is left in the pipe, then decide.
                    continue
                if time.monotonic() > deadline:
                    _hung(p, w, current, pending, partial, phase, lambda row: finish(row, time.monotonic() - t_cycle))  # noqa: B023
                    break
            rc = w.proc.wait()
            # A worker that ends (even with status 0) before reporting a cycle of its batch has
            # lost that cycle: record it, never spawn another worker for it.
            if pending and pending[0] in batch:
                cyc = current if current is not None else pending[0]
                finish(
                    reap.killed_row(p, cyc, partial, killed)
                    if killed
                    else _crashed_row(p, w, cyc, partial, rc, phase, fatal),
                    time.monotonic() - t_cycle,
                )
                pending.remove(cyc)
        except BaseException:
            w.kill()
            raise
        finally:
            w.close()


def _hung(
    p: Prepared,
    w: WorkerHandle,
    current: int | None,
    pending: list[int],
    partial: Partial | None,
    phase: str,
    finish: Callable[[CycleDraft], None],
) -> None:
    """A phase ran past its deadline: the worker's group killed, the cycle in flight (or the next
    due) recorded as hung."""
    stubs, leaked = w.kill()
    cyc = current if current is not None else (pending[0] if pending else None)
    if cyc is not None:
        finish(
            lost_cycle(
                p,
                cyc,
                partial,
                Loss(
                    "hung",
                    "hung",
                    f"phase {phase} ran past its deadline; worker group killed",
                    stubs,
                    leaked,
                    w.proc.pid,
                ),
            )
        )
        pending.remove(cyc)


def _keep_figures(
    p: Prepared,
    msg: Window | Samples,
    windows: dict[int, list[WindowRow]],
    memory: dict[int, list[MemoryRow]],
    on_window: Callable[[WindowRow], None] | None,
) -> None:
    """A window's row (shown to ``on_window``) or a cycle's memory samples, kept until its cycle is done."""
    host = run_tags(p)["host"]
    if isinstance(msg, Window):
        wrow = window_row(p.run_id, p.engine, p.model_label, {**msg.figures, "host": host})
        windows.setdefault(wrow.cycle, []).append(wrow)
        if on_window:
            on_window(wrow)
    else:
        memory[msg.cycle] = [
            typed_row(MemoryRow, {**r, "run_id": p.run_id, "cycle": msg.cycle, "host": host}) for r in msg.rows
        ]


def _done_row(p: Prepared, w: WorkerHandle, msg: CycleDone) -> CycleDraft:
    """The row of a cycle its worker reported done: the run's tags, the worker's figures, a
    stub's last words where one died while loading, and (a fresh process a cycle) the stubs the
    parent had to reap once the worker was gone."""
    row = blank_row(p, msg.row["cycle"])
    row.update(msg.row)
    if row.get("outcome") == "load_failed" and "stub" in str(row.get("detail")).lower():
        tail = w.log_tail(400)  # its last words are in the worker's log
        if tail:
            row.note(f"the stub's last output: {tail}")
    if p.config.restart == "fresh-process":
        try:
            w.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        row["stubs_killed"] = (row.get("stubs_killed") or 0) + w.reap_leftovers()
    return row


def _crashed_row(
    p: Prepared, w: WorkerHandle, cyc: int, partial: Partial | None, rc: int, phase: str, fatal: str | None
) -> CycleDraft:
    """The row of the cycle a worker was in when it ended (``rc``) before reporting it."""
    stubs, leaked = w.kill()
    how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
    return lost_cycle(
        p,
        cyc,
        partial,
        Loss(
            "crashed",
            f"crashed: {how}",
            f"worker {how} in phase {phase}: {fatal or w.log_tail()}",
            stubs,
            leaked,
            w.proc.pid,
        ),
    )
