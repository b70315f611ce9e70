"""A neighbour on a node's CPUs while a bench measures it (``rig bench --neighbour``): what a node
that shares its machine with other work meets, measured rather than assumed.

``none`` (the default) starts nothing. ``burn:PCT`` (PCT 1-100) starts, for the whole sweep, one
burner process per CPU the node holds (``--cpus``, or this process's affinity), each pinned to its
CPU and busy PCT % of every ``PERIOD_S`` (it spins for PCT % of the period, then sleeps the rest,
on absolute deadlines: a burner pre-empted past its period starts the next one afresh rather than
catching up). The burners run at normal priority, outside the measured processes, so the node's
worker, stubs and load compete with them as with any neighbour. They die with the process that
started them (``PR_SET_PDEATHSIG``), and ``Burner`` kills and reaps them when its block ends,
whatever ends it (an error, Ctrl-C). The run's row records which neighbour (``runs.neighbour``).

A Locust master on the same CPUs (``rig fleet``'s) is not offered: idle it wakes once a second, so
the burner at a low PCT stands for it and for busier neighbours alike.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Self

from rig.common.errors import RigError

PERIOD_S = 0.010  # a burner's period: busy PCT % of it, asleep the rest
NONE = "none"

# One burner: dies with its parent (PR_SET_PDEATHSIG = 1, SIGKILL = 9), pinned to one CPU, busy
# a share of each period. argv: parent pid, CPU, busy fraction, period in seconds.
_BURNER = """
import ctypes, os, sys, time
ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)
os.sched_setaffinity(0, {int(sys.argv[2])})
busy, period = float(sys.argv[3]) * float(sys.argv[4]), float(sys.argv[4])
sys.stdout.write("ok\\n"); sys.stdout.flush()
now = time.monotonic
t = now()
while True:
    end = t + busy
    while now() < end:
        pass
    t += period
    left = t - now()
    if left > 0:
        time.sleep(left)
    else:
        t = now()
"""


def parse(text: str | None) -> str:
    """``--neighbour TEXT`` as its canonical label: ``none`` or ``burn:PCT`` (PCT a whole number
    1-100); one line of RigError otherwise."""
    t = NONE if text is None else str(text).strip().lower()
    if t == NONE:
        return NONE
    kind, _, pct = t.partition(":")
    if kind == "burn" and pct.isdigit() and 1 <= int(pct) <= 100:
        return f"burn:{int(pct)}"
    raise RigError(
        f"--neighbour {text}: give none, or burn:PCT with PCT a whole number from 1 to 100 (a burner on each "
        "of the node's CPUs, busy PCT % of every 10 ms)"
    )


def percent(label: str) -> int | None:
    """The busy percentage of a ``burn:PCT`` label; None for ``none``."""
    return int(label.split(":", 1)[1]) if label.startswith("burn:") else None


class Burner:
    """``with Burner(label) as b:`` runs the neighbour ``label`` (``parse``) inside the block on
    ``cpus`` (default this process's affinity); ``b.pids`` are its processes, ``b.text()`` says
    what runs. Start it before the first point; it is stopped and reaped as the block ends."""

    def __init__(self, label: str = NONE, cpus=None):
        self.label = parse(label)
        self.cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> Self:
        pct = percent(self.label)
        if pct is None:
            return self
        try:
            for cpu in self.cpus:
                self._procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-S",
                            "-c",
                            _BURNER,
                            str(os.getpid()),
                            str(cpu),
                            str(pct / 100),
                            str(PERIOD_S),
                        ],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                    )
                )
            failed = [p for p in self._procs if p.stdout is None or p.stdout.readline().strip() != b"ok"]
        except BaseException:
            self.stop()
            raise
        if failed:
            n = len(self._procs)
            self.stop()
            raise RigError(f"--neighbour {self.label}: {len(failed)} of {n} burner process(es) did not start")
        return self

    def stop(self) -> None:
        """Kill the burners and reap them (idempotent)."""
        for p in self._procs:
            if p.poll() is None:
                p.kill()
        for p in self._procs:
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
        self._procs = []

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def text(self) -> str:
        """What runs beside the node, for the bench's log."""
        pct = percent(self.label)
        if pct is None:
            return "none (the node alone on its CPUs: --neighbour burn:PCT measures it beside a busy neighbour)"
        from rig.common.cpushare import cpu_list

        return (
            f"{self.label}: {len(self._procs)} burner process(es), one pinned to each CPU of {cpu_list(self.cpus)}, "
            f"each busy {pct} % of every {PERIOD_S * 1000:g} ms, for the whole sweep "
            f"(pids {', '.join(map(str, self.pids))})"
        )
