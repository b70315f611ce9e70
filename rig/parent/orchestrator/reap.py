"""The parent's part of the scenario ``worker-killed`` (python_backend#446): a cycle's worker, the
process that hosts the server, SIGKILLed from outside in the middle of its load, and what its
server then leaves behind: backend stubs that outlive it, and its shared-memory regions in
/dev/shm. Each is watched for up to ``BOUND_S`` after the worker's death, cleaned up by the rig
where it is still there, and counted in the cycle's row before and after the cleanup.

The parent learns where the load is from the worker's own messages: the ``infer`` phase begins
as the load does, and the kill lands ``KILL_AFTER_S`` later (the scenario's load of 5,000
requests lasts about 2 s). Only the worker is killed, never its process group: the stubs are the
server's children, and whether they go on their own once their server is gone is what is
measured (a stub's health thread asks every 300 ms whether its parent lives, and exits; that exit
can SIGSEGV, python_backend#446, which the stubs' crash recorder counts). The worker is reaped at
once: a dead worker not yet reaped is a zombie, which a stub's ``kill(parent, 0)`` still finds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from rig.common import probes, procs
from rig.contract.messages import Partial
from rig.contract.rows import CycleDraft
from rig.parent.orchestrator.prepare import Prepared
from rig.parent.orchestrator.rows import Loss, lost_cycle
from rig.scenarios import catalog as scenarios

KILL_AFTER_S = 0.5  # into the load (its ``infer`` phase)
BOUND_S = 10.0  # how long what the server left is given to go on its own
POLL_S = 0.05
# The cycles whose worker the scenario kills: None, every one. A test narrows it (a run of three
# cycles whose middle one is killed: the one after it must be clean).
KILL_CYCLES: frozenset[int] | None = None
HOW = "killed by SIGKILL (the scenario's)"


def kills(config, cycle: int) -> bool:
    """Whether the parent kills this cycle's worker: the scenario says so, and not its control."""
    if not config.scenario or config.control or not scenarios.get(config.scenario).kills_worker:
        return False
    return KILL_CYCLES is None or cycle in KILL_CYCLES


@dataclasses.dataclass
class Kill:
    """A worker the parent killed: when it died, in which phase, and what of its server it saw
    just before (its stubs, and the regions their command lines and maps name)."""

    pid: int
    pgid: int
    phase: str
    into_phase_s: float
    died_at: float
    stubs: list[psutil.Process]
    regions: set[str]


class Killer:
    """When to kill one worker's current cycle: armed as its ``infer`` phase begins, disarmed as a
    cycle starts or is reported done."""

    def __init__(self, config) -> None:
        self.config = config
        self.at: float | None = None
        self.since = 0.0

    def phase(self, cycle: int | None, name: str) -> None:
        if name == "infer" and cycle is not None and kills(self.config, cycle):
            self.since = time.monotonic()
            self.at = self.since + KILL_AFTER_S

    def disarm(self) -> None:
        self.at = None

    def wait(self, timeout: float) -> float:
        """How long to wait for the worker's next message: not past the kill."""
        return timeout if self.at is None else max(0.0, min(timeout, self.at - time.monotonic()))

    def due(self, proc: subprocess.Popen, phase: str) -> Kill | None:
        """Kill the worker now if its time has come (and it still runs)."""
        if self.at is None or time.monotonic() < self.at or proc.poll() is not None:
            return None
        self.at = None
        return kill_worker(proc, phase, time.monotonic() - self.since)


def kill_worker(proc: subprocess.Popen, phase: str, into_phase_s: float = 0.0) -> Kill:
    """SIGKILL the worker alone (not its group) and reap it at once."""
    pgid = proc.pid  # the worker leads its own session
    stubs = probes.stubs_in_group(pgid)
    regions = procs.group_shm_regions(pgid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return Kill(proc.pid, pgid, phase, into_phase_s, time.monotonic(), stubs, regions)


@dataclasses.dataclass
class Leftovers:
    """What a killed worker's server left, before and after the rig's cleanup."""

    stubs: int  # backend stubs alive once the worker was dead and reaped
    gone_s: float | None  # from its death until the last of them was gone; None: one outlived the bound
    outlived: int  # still alive at the bound: killed by the rig
    regions: int  # the server's regions in /dev/shm once its stubs were gone (or at the bound): removed
    stubs_left: int  # after the cleanup
    regions_left: int
    crashes: int | None  # stubs that died of a signal of their own (crash markers); None: no recorder

    def figures(self) -> dict:
        return {
            "orphan_stubs": self.stubs,
            "orphan_stubs_gone_s": self.gone_s,
            "orphan_stubs_outlived": self.outlived,
            "orphan_shm_regions": self.regions,
            "orphan_stubs_left": self.stubs_left,
            "orphan_shm_left": self.regions_left,
            "stub_crashes": self.crashes,
        }

    def cleanup(self) -> str:
        """The row's ``cleanup``, one of three words a matrix counts per cell: a stub outlived the
        worker by the bound, or (its stubs gone) its server's regions stayed in /dev/shm, or neither."""
        if self.outlived:
            return "killed: a stub outlived it"
        return "killed: its shm outlived it" if self.regions else "killed: nothing outlived it"


def server_regions(pid: int) -> set[str]:
    """The regions in /dev/shm named with the prefix the server in process ``pid`` gives its own."""
    prefix = probes.own_shm_prefix(pid)
    with contextlib.suppress(OSError):
        return {e.name for e in os.scandir(probes.SHM_DIR) if e.name.startswith(prefix)}
    return set()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def watch(kill: Kill, evidence: Path | None, bound_s: float = BOUND_S) -> Leftovers:
    """Watch what the killed worker's server left for up to ``bound_s`` after its death, then clean
    it up: stubs still alive killed, the server's regions removed; each counted before and after."""
    alive = [s for s in probes.stubs_in_group(kill.pgid) if _alive(s)]
    stubs, gone_s = len(alive), None
    while True:
        alive = [s for s in alive if _alive(s)]
        if not alive:
            gone_s = time.monotonic() - kill.died_at
            break
        if time.monotonic() - kill.died_at >= bound_s:
            break
        time.sleep(POLL_S)
    outlived = probes.kill_processes(alive)
    procs.signal_group(kill.pgid, signal.SIGKILL)  # anything else the worker started
    names = kill.regions | server_regions(kill.pid)
    present = probes.shm_regions_present(names)
    probes.remove_shm_regions(present)
    left = probes.shm_regions_present(names | server_regions(kill.pid))
    return Leftovers(
        stubs,
        gone_s,
        outlived,
        len(present),
        len(probes.stubs_in_group(kill.pgid)),
        len(left),
        _crashes(evidence, {s.pid for s in kill.stubs}),
    )


def _crashes(evidence: Path | None, pids: set[int]) -> int | None:
    """The stubs (of ``pids``) that left a crash marker in the cycle's evidence folder; None where
    the crash recorder could not be armed (no C compiler)."""
    from rig.common.procs import c_compiler
    from rig.contract.evidence import read_markers

    if c_compiler() is None:
        return None
    markers = read_markers(evidence) if evidence is not None else []
    return len({m.get("pid") for m in markers if m.get("phase") == "crash" and m.get("pid") in pids})


def text(kill: Kill, left: Leftovers, bound_s: float = BOUND_S) -> str:
    """The row's note: the kill, then what was left before the cleanup and after it."""
    out = [f"worker {HOW} in phase {kill.phase}, {kill.into_phase_s:.1f} s into it, with {len(kill.stubs)} stub(s)"]
    if left.gone_s is not None:
        out.append(f"{left.stubs} alive once it was dead, all gone {left.gone_s:.2f} s after its death")
    else:
        out.append(
            f"{left.stubs} alive once it was dead, {left.outlived} outlived it by {bound_s:.0f} s (killed by the rig)"
        )
    if left.crashes:
        out.append(f"{left.crashes} stub(s) died of a signal of their own (python_backend#446)")
    out.append(f"{left.regions} shared-memory region(s) of its server left in /dev/shm (removed by the rig)")
    rest = left.stubs_left + left.regions_left
    out.append(
        "nothing left after the cleanup"
        if not rest
        else f"left after the cleanup: {left.stubs_left} stub(s), {left.regions_left} region(s)"
    )
    return "; ".join(out)


def killed_row(p: Prepared, cycle: int, partial: Partial | None, kill: Kill) -> CycleDraft:
    """The row of a cycle whose worker the scenario killed: ``crashed``, its load not measured
    (a stop already measured stands: ``rows.lost_cycle``), and what the server left, watched,
    cleaned up and counted (``stubs_killed``, ``shm_regions_leaked``: the rig's cleanup)."""
    evidence = Path(p.spec.evidence_dir) / f"c{cycle:06d}" if p.spec is not None else None
    left = watch(kill, evidence)
    row = lost_cycle(
        p, cycle, partial, Loss("crashed", f"crashed: {HOW}", text(kill, left), left.outlived, left.regions, kill.pid)
    )
    row.update(left.figures(), cleanup=left.cleanup())
    return row
