"""A node as a fixed share of a machine: the CPUs a run is held to (``--cpus``), and the share a
run's row records (``runs.cpu_share``, ``runs.cpus``, ``runs.cpu_share_from``; schema 13).

``--cpus 0,1`` (the kernel's CPU-list syntax, as ``taskset -c``: ``0``, ``0,2``, ``0-3``) or
``--cpus count:N`` (the first N CPUs this process may use) sets this process's CPU affinity
before anything starts. Everything the run starts inherits it: the worker, the Triton core's
threads and the in-process load inside it, the backend stubs the core spawns, bench's idle-CPU
pollers (one per CPU held). ``--cpus quota:X`` caps the run at X CPUs of those it may use with a
cgroup of its own (``rig.common.cpuquota``: a pod's CPU limit, so that more nodes than CPUs can each
hold a share; it needs root or a delegated cgroup). A quota that caps the process from outside (a
container's ``--cpus``, a pod's limit, ``systemd-run -p CPUQuota=``) is read and recorded too: the
share is then the quota in CPUs where it is less than the CPUs the affinity allows.
"""

from __future__ import annotations

import os

from rig.common.errors import RigError

_held: list[int] | None = None  # the CPUs ``hold`` held this process to (None: not held by --cpus)
_by_quota = False  # ``hold`` set a quota of its own (--cpus quota:X)


def cpu_list(cpus) -> str:
    """CPUs as the kernel writes a list: ``0-3,8``."""
    out, run = [], []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def parse(text: str, allowed) -> list[int]:
    """``--cpus TEXT`` as the sorted CPUs to hold the run to, each one of ``allowed`` (the CPUs
    this process may use); one line of RigError for a malformed list, a CPU outside ``allowed``
    or a count above it."""
    allowed = sorted(set(allowed))
    may = f"this process may use {len(allowed)} CPU(s): {cpu_list(allowed)}"
    text = str(text).strip()
    if text.startswith("count:"):
        n = text[len("count:") :]
        if not n.isdigit() or int(n) < 1:
            raise RigError(f"--cpus {text}: count:N takes a whole number of CPUs >= 1, e.g. count:2")
        if int(n) > len(allowed):
            raise RigError(f"--cpus {text}: a share larger than the machine ({may})")
        return allowed[: int(n)]
    cpus: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (dash and int(hi) < int(lo)):
            raise RigError(
                f"--cpus {text}: give CPUs as a list (0, 0,1 or 0-3, as taskset -c), a count (count:2) or a "
                "quota (quota:0.5)"
            )
        cpus += range(int(lo), int(hi if dash else lo) + 1)
    if len(set(cpus)) != len(cpus):
        raise RigError(f"--cpus {text} names a CPU twice: give each once")
    outside = sorted(set(cpus) - set(allowed))
    if outside:
        raise RigError(
            f"--cpus {text}: CPU {cpu_list(outside)} is not one this process may use, a share larger "
            f"than the machine ({may})"
        )
    return sorted(cpus)


def hold(text: str | None) -> list[int] | None:
    """Hold this process (and all it starts from now on) to the CPUs ``--cpus TEXT`` names;
    None given: nothing changes. Returns the CPUs held."""
    global _held, _by_quota
    if text is None:
        return None
    if str(text).strip().startswith("quota:"):
        from rig.common import cpuquota

        allowed = sorted(os.sched_getaffinity(0))
        cpuquota.hold(cpuquota.parse(str(text), len(allowed)), str(text))
        _held, _by_quota = allowed, True
        return allowed
    cpus = parse(text, os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus)
    _held = cpus
    return cpus


def share(affinity, quota: str | None, machine: int | None, held: list[int] | None, by_quota: bool = False) -> dict:
    """The share a run's row records (pure): ``cpu_share``, the CPUs the run may use (the
    quota's CPUs, ``quota/period``, where that is fewer than the affinity allows); ``cpus``, the
    CPUs of its affinity as a list; ``cpu_share_from``: ``--cpus`` (held by the option, or
    ``by_quota``: capped by the option's own quota), ``cgroup`` (a CPU quota caps it), ``affinity``
    (held to fewer CPUs than the machine has by something else: taskset, a cpuset) or ``machine``
    (nothing held it)."""
    cpus = sorted(set(affinity))
    out = {
        "cpu_share": float(len(cpus)),
        "cpus": cpu_list(cpus),
        "cpu_share_from": "--cpus" if held else ("affinity" if machine and len(cpus) < machine else "machine"),
    }
    if quota:
        q, _, period = quota.partition("/")
        try:
            cap = float(q) / float(period or 100_000)
        except ValueError:
            cap = None
        if cap is not None and 0 < cap < len(cpus):
            out.update(cpu_share=round(cap, 3), cpu_share_from="--cpus" if by_quota else "cgroup")
    return out


def current() -> dict:
    """This process's share of the machine (``share``), read now."""
    from rig.common.cpuidle import cpu_quota

    return share(os.sched_getaffinity(0), cpu_quota(), os.cpu_count(), _held, _by_quota)
