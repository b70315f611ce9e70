"""Child processes and their groups: how the rig starts a Python child, and the one way it
kills a process group (a hung worker, perf_analyzer, a matrix cell) and removes the
Python-backend shared memory the group left behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time

from rig.common import probes

_SHM_NAME = re.compile(re.escape(probes.SHM_PREFIX) + r"_[\w-]+")


def python_m(module: str) -> list[str]:
    """``python -m module`` for a child process, safe from the folder it runs in: Python puts that
    folder first on the module path, so a file there named like a module the child imports
    (``http.py``, ``queue.py``) would shadow it and every cycle would crash. ``-P`` (3.11+)
    leaves it out."""
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", module]


def group_pids(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (read from /proc)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.getpgid(int(name)) == pgid:
                    pids.append(int(name))
    return pids


def group_shm_regions(pgid: int) -> set[str]:
    """Python-backend shared-memory regions the group's processes map, or name to their stubs on
    the command line (a stub that has not mapped its region yet)."""
    found: set[str] = set()
    for pid in group_pids(pgid):
        for part in ("cmdline", "maps"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/{part}", "rb") as f:
                found.update(_SHM_NAME.findall(f.read().decode(errors="replace")))
    return found


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when it is gone already."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_group(pgid: int, proc: subprocess.Popen | None = None, regions: set[str] = frozenset()) -> set[str]:
    """SIGKILL the whole group, wait for its leader ``proc`` (up to 10 s), and remove the
    shared-memory regions it mapped (those found now and ``regions``, found before) that are
    still there. Returns the regions removed: the group's leak."""
    regions = set(regions) | group_shm_regions(pgid)
    signal_group(pgid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    time.sleep(0.05)  # the kernel unmaps a killed process's regions just after it is reaped
    leaked = probes.shm_regions_present(regions)
    probes.remove_shm_regions(leaked)
    return leaked


def end_group(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM the group ``proc`` leads, and SIGKILL it after ``grace_s``; reaps ``proc``."""
    if signal_group(proc.pid, signal.SIGTERM):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
    if proc.poll() is None:
        kill_group(proc.pid, proc)
    proc.wait()


def c_compiler() -> str | None:
    """The C compiler the rig's native parts are built with (``$CC``, cc, gcc or clang), or None."""
    import shutil

    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None
