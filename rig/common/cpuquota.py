"""A node as a CPU quota (``--cpus quota:X``): what a pod with a CPU limit of ``X`` gets, on any
number of CPUs, so that more nodes than the machine has CPUs can each hold a fixed share of it.

The process moves into a cgroup of its own, ``triton-soak-rig-PID``, made beside the one it is in,
capped at ``X`` CPUs (cgroup v1: ``cpu.cfs_quota_us`` over a 100 ms ``cpu.cfs_period_us``; v2:
``cpu.max``). Everything it starts from then on inherits it: the worker, the core's threads, the
load, the backend stubs. Making a cgroup needs root, or a cgroup delegated to the user; where
neither is here it is one line that says so. When the process exits it leaves its cgroup and
removes it; one still holding a process (a stub that outlived its run) is removed by the next
run that holds a quota, once it is empty. ``rig.common.cpuidle.cpu_quota`` reads the cap back,
and the run's row records it (``runs.cpu_share``).
"""

from __future__ import annotations

import atexit
import contextlib
import os

from rig.common.errors import RigError

PREFIX = "triton-soak-rig-"
PERIOD_US = 100_000
MIN_CPUS = 0.01  # the kernel refuses a quota under 1 ms a period


def parse(text: str, allowed: int) -> float:
    """``quota:X`` as X CPUs (a positive number, at most ``allowed``, the CPUs this process may
    use); one line of RigError otherwise."""
    x = text.strip()[len("quota:") :]
    try:
        cpus = float(x)
    except ValueError:
        cpus = -1.0
    if not MIN_CPUS <= cpus <= allowed:
        raise RigError(
            f"--cpus {text}: quota:X takes a number of CPUs from {MIN_CPUS:g} to the {allowed} this process "
            "may use, e.g. quota:0.5 (a pod's CPU limit of 500m)"
        )
    return cpus


def _mounts(path: str = "/proc/self/mounts") -> list[tuple[str, str, set[str]]]:
    """The cgroup file systems mounted: (mount point, type, options)."""
    out = []
    with contextlib.suppress(OSError), open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                out.append((parts[1], parts[2], set(parts[3].split(","))))
    return out


def where(proc_cgroup: str = "/proc/self/cgroup", mounts: list | None = None) -> tuple[str, str] | None:
    """This process's cgroup directory in the hierarchy that holds the CPU controller, and its
    version (``v1``/``v2``); None where no such hierarchy is mounted."""
    mounts = _mounts() if mounts is None else mounts
    try:
        with open(proc_cgroup) as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
    except OSError:
        return None
    for _, controllers, path in lines:  # v1 first: where both are mounted, the cpu controller is v1's
        if "cpu" in controllers.split(","):
            for point, kind, opts in mounts:
                if kind == "cgroup" and "cpu" in opts:
                    return os.path.join(point, path.lstrip("/")), "v1"
    for _, controllers, path in lines:
        if controllers == "":
            for point, kind, _opts in mounts:
                if kind == "cgroup2":
                    base = os.path.join(point, path.lstrip("/"))
                    with contextlib.suppress(OSError), open(os.path.join(base, "cgroup.controllers")) as f:
                        if "cpu" in f.read().split():
                            return base, "v2"
    return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def sweep(parent: str) -> None:
    """Remove the rig's cgroups under ``parent`` whose process is gone and that hold none."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if not name.startswith(PREFIX) or not name[len(PREFIX) :].isdigit():
                continue
            pid = int(name[len(PREFIX) :])
            if pid != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(parent, name))


def hold(cpus: float, text: str) -> str:
    """Move this process into a cgroup of its own capped at ``cpus`` CPUs; returns its directory.
    One line of RigError where it cannot be made (``text``: the option as given)."""
    found = where()
    advice = (
        f"--cpus {text} needs a cgroup CPU controller this user may write (root, or a delegated "
        "cgroup); run the node in a container with a CPU limit instead (docker run --cpus, a pod's "
        "limits.cpu), or hold it to whole CPUs (--cpus count:1)"
    )
    if found is None:
        raise RigError(f"{advice}: no cgroup hierarchy with the cpu controller is mounted here")
    parent, version = found
    sweep(parent)
    group = os.path.join(parent, f"{PREFIX}{os.getpid()}")
    quota = max(1000, round(cpus * PERIOD_US))
    try:
        if version == "v2":
            with contextlib.suppress(OSError):  # the parent may list it already, or refuse (its own processes)
                _write(os.path.join(parent, "cgroup.subtree_control"), "+cpu")
        os.makedirs(group, exist_ok=True)
        if version == "v1":
            _write(os.path.join(group, "cpu.cfs_period_us"), str(PERIOD_US))
            _write(os.path.join(group, "cpu.cfs_quota_us"), str(quota))
        else:
            _write(os.path.join(group, "cpu.max"), f"{quota} {PERIOD_US}")
        _write(os.path.join(group, "cgroup.procs"), str(os.getpid()))
    except OSError as e:
        with contextlib.suppress(OSError):
            os.rmdir(group)
        raise RigError(f"{advice} ({e.strerror or e} at {group})") from None
    atexit.register(_leave, parent, group)
    return group


def _leave(parent: str, group: str) -> None:
    """At exit: back into the parent cgroup, then the rig's own removed (left where a process
    it started still holds it: ``sweep`` removes it later)."""
    with contextlib.suppress(OSError):
        _write(os.path.join(parent, "cgroup.procs"), str(os.getpid()))
        os.rmdir(group)
