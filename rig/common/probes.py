"""Probes of processes and memory: backend stubs, shared-memory regions, RSS, fds, threads, GPU."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

# GPU (NVML): rig.common.gpu, its names re-exported for the callers of probes
from rig.common.gpu import (  # noqa: F401
    VISIBLE_VARS,
    Gpu,
    GpuMemory,
    in_pid_namespace,
    visible_devices,
)

STUB_NAME = "triton_python_backend_stub"
SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "triton_python_backend_shm_region"


def own_shm_prefix(pid: int | None = None) -> str:
    """The Python backend's region names for a server in this process (its
    ``shm-region-prefix-name``): older backends (2.42.0 and before, at least) number their regions
    from 1 in each server, so two servers on one host, cells of a matrix side by side or a fleet's
    nodes, made and removed each other's regions; this process's id makes them its own. ``pid``:
    another process's (a worker the parent killed: what its server left)."""
    return f"{SHM_PREFIX}_rig{pid or os.getpid()}_"


def _is_stub(p: psutil.Process) -> bool:
    try:
        return p.name().startswith(STUB_NAME[:15]) or any(STUB_NAME in a for a in p.cmdline()[:1])
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def stubs_of(pid: int) -> list[psutil.Process]:
    """Live (not zombie) backend stub processes below ``pid``."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for k in kids:
        try:
            if _is_stub(k) and k.status() != psutil.STATUS_ZOMBIE:
                out.append(k)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return out


def stubs_in_group(pgid: int) -> list[psutil.Process]:
    """Live stub processes of a process group (they outlive a worker that died)."""
    out = []
    for p in psutil.process_iter(["name"]):
        try:
            if os.getpgid(p.pid) == pgid and _is_stub(p) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess, psutil.ZombieProcess, PermissionError):
            pass
    return out


def orphaned_stubs(fragment: str) -> list[psutil.Process]:
    """Stub processes whose parent is gone (adopted by init) and whose command line names
    ``fragment`` (a run's work folder: its rendered model repository is there)."""
    out = []
    for p in psutil.process_iter(["ppid", "cmdline"]):
        try:
            if _is_stub(p) and p.info["ppid"] == 1 and any(fragment in a for a in p.info["cmdline"] or ()):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            pass
    return out


def kill_processes(procs: list[psutil.Process]) -> int:
    killed = 0
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
            killed += 1
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    psutil.wait_procs(procs, timeout=5)
    return killed


def shm_regions_mapped(pids: list[int]) -> set[str]:
    """Python-backend shared-memory regions mapped by these processes (so by this run only)."""
    found: set[str] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    if SHM_PREFIX in line:
                        path = line.split(None, 5)[-1].strip().replace(" (deleted)", "")
                        found.add(os.path.basename(path))
        except OSError:
            pass
    return found


def shm_regions_present(names: set[str]) -> set[str]:
    return {n for n in names if (SHM_DIR / n).exists()}


def remove_shm_regions(names: set[str]) -> int:
    removed = 0
    for n in names:
        try:
            (SHM_DIR / n).unlink()
            removed += 1
        except OSError:
            pass
    return removed


def dev_shm_bytes() -> int | None:
    """Bytes of the plain files in /dev/shm (None where there is none), less the Python backend's
    own regions: every Triton on the host makes and removes those (``shm_regions_leaked`` counts
    this run's), and they would drown a leak of the models' own in other runs' noise."""
    try:
        entries = list(os.scandir(SHM_DIR))
    except OSError:
        return None
    total = 0
    for e in entries:
        try:
            if e.is_file(follow_symlinks=False) and not e.name.startswith(SHM_PREFIX):
                total += e.stat(follow_symlinks=False).st_size
        except OSError:
            pass  # removed while we looked
    return total


def process_stats(pid: int | None = None) -> dict:
    """RSS, open file descriptors and threads of a process (default: this one)."""
    try:
        p = psutil.Process(pid or os.getpid())
        with p.oneshot():
            return {"rss_bytes": p.memory_info().rss, "fds": p.num_fds(), "threads": p.num_threads()}
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return {"rss_bytes": None, "fds": None, "threads": None}


def rss_of(p: psutil.Process) -> int | None:
    """A process's RSS (None: gone). Read from /proc/PID/statm, the kernel's counters: no walk of
    its page tables, so sampling it costs the process nothing. USS (psutil's ``memory_full_info``,
    /proc/PID/smaps_rollup) walks them under the process's memory lock: sampled 4 times a second
    through a load it raised p99 by 1.57 times (paired median of 4, ``benchmarks/sampling_overhead.py``),
    RSS by 0.94 times (noise)."""
    try:
        return int(p.memory_info().rss)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def stub_identity(p: psutil.Process) -> tuple[str | None, str | None]:
    """(model, instance) of a backend stub, from its command line: the model's file
    (``<repository>/<model>/<version>/model.py``) and the instance's name (``<model>_<i>_<j>``)."""
    try:
        args = p.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None, None
    model = None
    for a in args[1:2]:
        path = Path(a)
        model = path.parent.parent.name if path.suffix == ".py" else path.parent.name or None
    instance = next((a for a in args[2:] if model and a.startswith(model + "_")), None)
    return model, instance


def total_rss(procs: list[psutil.Process]) -> int | None:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            pass
    return total if procs else None


def orphaned_shm_regions() -> set[str]:
    """Python-backend regions in /dev/shm that no live process maps (left by a killed server)."""
    present = {p.name for p in SHM_DIR.glob(SHM_PREFIX + "*")} if SHM_DIR.is_dir() else set()
    if not present:
        return set()
    mapped = shm_regions_mapped([p.pid for p in psutil.process_iter()])
    return present - mapped


_GPU: Gpu | None = None


def gpu() -> Gpu:
    """The process's one NVML handle (NVML is initialised once, on first use)."""
    global _GPU
    if _GPU is None:
        _GPU = Gpu()
    return _GPU
