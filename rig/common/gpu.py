"""GPU probes through NVML (nvidia-ml-py), for every GPU the process can see: memory used, utilisation,
each process's GPU memory; no reading ever raises (a figure NVML will not give is None, its reason
noted once). The process's one probe is ``rig.common.probes.gpu()``."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path

VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def visible_devices(environ: Mapping[str, str] | None = None) -> tuple[str | None, list[str] | None]:
    """The GPUs this process may use, as CUDA reads its environment: ``CUDA_VISIBLE_DEVICES``
    where it is set (even empty), else ``NVIDIA_VISIBLE_DEVICES`` (a container runtime's).
    Returns (the variable read, its entries in order): an index (``"1"``), a UUID or a prefix of
    one (``"GPU-8932f937"``, ``"MIG-..."``, as CUDA takes them). Entries None: every device
    (neither variable set, or ``all``); []: none (``none``, ``void``, empty). As CUDA does, the
    list ends at the first entry it cannot take or that repeats one (``0,x,1`` is device 0)."""
    env = os.environ if environ is None else environ
    var = next((v for v in VISIBLE_VARS if v in env), None)
    if var is None:
        return None, None
    text = env[var].strip()
    if text.lower() == "all":
        return var, None
    if text.lower() in ("", "none", "void"):
        return var, []
    out: list[str] = []
    for raw in text.split(","):
        entry = raw.strip()
        if entry.isascii() and entry.isdigit():
            entry = str(int(entry))
        elif not (entry[:4].upper() in ("GPU-", "MIG-") and len(entry) > 4):
            break
        if entry in out:
            break
        out.append(entry)
    return var, out


def in_pid_namespace(proc: Path = Path("/proc")) -> bool:
    """Whether this process sees PIDs through a PID namespace of its own (a container's): NVML
    lists the host's PIDs, which then never match ours. ``NSpid`` in /proc/self/status (Linux
    4.1+) lists one PID per namespace; without it, /proc/1/sched's first line names init by its
    PID in the host's namespace on older kernels (``systemd (1, #threads: 1)`` on the host)."""
    try:
        for line in (proc / "self" / "status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return len(line.split()) > 2
    except OSError:
        pass
    try:
        first = (proc / "1" / "sched").read_text().split("\n", 1)[0]
    except OSError:
        return False
    m = re.search(r"\((\d+),", first)
    return bool(m) and m.group(1) != "1"


@dataclasses.dataclass(frozen=True)
class GpuMemory:
    """One reading of the GPU memory of some processes (``Gpu.memory_of``). ``source`` says what
    was read: ``process``, each process's own by PID (``by_pid``: those NVML lists), or
    ``device``, the visible devices' used memory summed (``device_bytes``), where the PIDs cannot
    match; None: nothing read (no GPU, NVML could not, or no process on the GPU yet)."""

    source: str | None = None
    by_pid: dict[int, int] = dataclasses.field(default_factory=dict)
    device_bytes: int | None = None


class Gpu:
    """NVML, where there is one: memory used and utilisation of every GPU this process can see
    (``visible_devices``, in that order; ``devices``), and the GPU memory of given processes.

    No reading raises: a figure NVML cannot give here (NOT_SUPPORTED on a MIG slice or a vGPU, a
    GPU lost, no library, no driver) is None, and ``notes`` keeps the first reason for each probe
    (``{probe: reason}``, what a run row's ``gpu_notes`` records): one window that cannot read a
    figure must not cost its cycle, and a soak must not repeat the same reason thousands of times.
    ``why`` says why there is no GPU at all (``available`` False); ``name`` the GPU(s) read.
    ``nvml``: the NVML module (default ``pynvml``, from nvidia-ml-py; the tests give a fake);
    ``environ``: where the visible devices are read (default ``os.environ``); ``pid_namespace``:
    whether NVML's PIDs can match ours (default: ``in_pid_namespace()``, read on first use)."""

    def __init__(self, nvml=None, environ: Mapping[str, str] | None = None, pid_namespace: bool | None = None):
        self.devices: list[tuple[str, object]] = []  # (label, NVML handle)
        self.handle = None  # the first device's
        self.name: str | None = None
        self.why = ""
        self.notes: dict[str, str] = {}
        self._pid_namespace = pid_namespace
        if nvml is None:
            try:
                import pynvml as nvml  # nvidia-ml-py
            except ImportError:
                self._none("nvidia-ml-py is not installed")
                return
        self._nvml = nvml
        try:
            nvml.nvmlInit()
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as e:  # LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED, NO_PERMISSION, ...
            self._none(f"NVML unavailable: {self._code(e)}")
            return
        var, entries = visible_devices(environ)
        self.devices = self._open(var, entries, count)
        if not self.devices:
            self._none(
                "NVML sees no GPU"
                if not count
                else f"{var} leaves this process no GPU"
                if entries == []
                else f"{var} names no GPU that NVML sees"
            )
            return
        self.handle = self.devices[0][1]
        names = [self._name(label, h) for label, h in self.devices]
        if len(set(names)) > 1:
            self.name = ", ".join(names)
        else:
            self.name = names[0] + (f" x{len(names)}" if len(names) > 1 else "")

    @property
    def available(self) -> bool:
        return bool(self.devices)

    # -- what NVML could not read, and why

    def _none(self, why: str) -> None:
        self.why = why
        self.notes.setdefault("init", why)

    def _note(self, probe: str, reason: str) -> None:
        self.notes.setdefault(probe, reason)

    def _code(self, e) -> str:
        """An NVMLError's code by its constant's name (``NOT_SUPPORTED``), without asking the
        library for its text (there may be no library)."""
        value = getattr(e, "value", None)
        for k, v in vars(self._nvml).items():
            if k.startswith("NVML_ERROR_") and v == value:
                return k[len("NVML_ERROR_") :]
        return f"NVML error {value}"

    def _is_mig(self, handle) -> bool:
        """A MIG device's handle, or a GPU in MIG mode: where NVML leaves utilisation and
        processes unsupported."""
        n = self._nvml
        try:
            if getattr(n, "nvmlDeviceIsMigDeviceHandle", None) and n.nvmlDeviceIsMigDeviceHandle(handle):
                return True
            if getattr(n, "nvmlDeviceGetMigMode", None):
                return n.nvmlDeviceGetMigMode(handle)[0] == getattr(n, "NVML_DEVICE_MIG_ENABLE", 1)
        except n.NVMLError:
            pass  # a GPU without MIG says so by raising NOT_SUPPORTED
        return False

    def _call(self, probe: str, label: str, fn: str, *args, device=None):
        """``nvml.fn(*args)``, else None with the reason noted under ``probe``; ``device``: the
        handle it reads, asked whether it is MIG where the call is not supported."""
        f = getattr(self._nvml, fn, None)
        if f is None:
            self._note(probe, f"this nvidia-ml-py has no {fn}")
            return None
        try:
            return f(*args)
        except self._nvml.NVMLError as e:
            if probe in self.notes:  # said once; a soak asks thousands of times
                return None
            code = self._code(e)
            if code == "NOT_SUPPORTED" and device is not None and self._is_mig(device):
                self._note(probe, f"MIG: {label} is a MIG device or in MIG mode, where NVML does not give it ({code})")
            else:
                self._note(probe, f"{code} on {label}")
            return None

    # -- the devices

    def _open(self, var: str | None, entries: list[str] | None, count: int) -> list[tuple[str, object]]:
        if entries is None:
            entries = [str(i) for i in range(count)]
        elif var == "NVIDIA_VISIBLE_DEVICES" and len(entries) == count and all(e.isdigit() for e in entries):
            # a container's runtime mounted just these: NVML numbers them from 0 inside it
            entries = [str(i) for i in range(count)]
        out = []
        for entry in entries:
            # indices in NVML's order (PCI bus), as CUDA_DEVICE_ORDER=PCI_BUS_ID numbers them
            if entry.isdigit():
                handle = (
                    self._call("devices", f"GPU {entry}", "nvmlDeviceGetHandleByIndex", int(entry))
                    if int(entry) < count
                    else None
                )
                label = f"GPU {entry}"
            else:
                handle, label = self._by_uuid(entry), entry
            if handle is None:  # CUDA too sees none from the first device it cannot open
                self._note("devices", f"{var} names {entry}, which NVML does not see: it and those after it left out")
                break
            out.append((label, handle))
        return out

    def _by_uuid(self, entry: str):
        n = self._nvml
        try:
            return n.nvmlDeviceGetHandleByUUID(entry)
        except n.NVMLError:
            pass  # a prefix, as CUDA takes one: matched below against every device's and MIG slice's
        found = [h for uuid, h in self._uuids() if uuid.startswith(entry)]
        if len(found) > 1:
            self._note("devices", f"{entry} is the prefix of {len(found)} GPUs' UUIDs")
        return found[0] if len(found) == 1 else None

    def _uuids(self) -> list[tuple[str, object]]:
        out = []
        for i in range(int(self._call("devices", "NVML", "nvmlDeviceGetCount") or 0)):
            h = self._call("devices", f"GPU {i}", "nvmlDeviceGetHandleByIndex", i)
            if h is None:
                continue
            slots = self._mig_slots(h)
            for handle in [h, *slots]:
                uuid = self._call("devices", f"GPU {i}", "nvmlDeviceGetUUID", handle)
                if uuid is not None:
                    out.append((_text(uuid), handle))
        return out

    def _mig_slots(self, h) -> list:
        n = self._nvml
        try:
            if not self._is_mig(h) or not getattr(n, "nvmlDeviceGetMaxMigDeviceCount", None):
                return []
            slots = []
            for j in range(int(n.nvmlDeviceGetMaxMigDeviceCount(h))):
                try:
                    slots.append(n.nvmlDeviceGetMigDeviceHandleByIndex(h, j))
                except n.NVMLError:
                    pass  # NOT_FOUND: a slot with no instance made in it
            return slots
        except n.NVMLError:
            return []

    def _name(self, label: str, handle) -> str:
        name = self._call("name", label, "nvmlDeviceGetName", handle, device=handle)
        return _text(name) if name is not None else label

    # -- the figures

    def memory_used(self) -> int | None:
        """Bytes used on the visible devices, summed; None where one of them cannot be read (a
        sum short of a device would move as that device's reading comes and goes)."""
        total = 0
        for label, h in self.devices:
            info = self._call("memory", label, "nvmlDeviceGetMemoryInfo", h, device=h)
            if info is None:
                return None
            total += int(info.used)
        return total if self.devices else None

    def utilization(self) -> float | None:
        """The visible devices' mean utilisation (% of the last sample period a kernel ran);
        None where one of them cannot be read (a MIG slice never can)."""
        rates = []
        for label, h in self.devices:
            u = self._call("utilization", label, "nvmlDeviceGetUtilizationRates", h, device=h)
            if u is None:
                return None
            rates.append(float(u.gpu))
        return sum(rates) / len(rates) if rates else None

    def _processes(self) -> dict[int, int] | None:
        """GPU memory of each process NVML lists on the visible devices, summed over them (pid
        -> bytes); None where it cannot list them."""
        out: dict[int, int] = {}
        for label, h in self.devices:
            listed = self._call("processes", label, "nvmlDeviceGetComputeRunningProcesses", h, device=h)
            if listed is None:
                return None
            for p in listed:
                if p.usedGpuMemory is not None:  # None: NVML does not know (Windows, some vGPUs)
                    out[int(p.pid)] = out.get(int(p.pid), 0) + int(p.usedGpuMemory)
        return out

    def process_memory(self) -> dict[int, int]:
        """GPU memory used by each process on the visible devices (pid -> bytes, PIDs as NVML
        gives them: the host's); empty without a GPU or where NVML cannot list them."""
        return self._processes() or {}

    def in_pid_namespace(self) -> bool:
        if self._pid_namespace is None:
            self._pid_namespace = in_pid_namespace()
        return self._pid_namespace

    def memory_of(self, pids: list[int], source: str | None = None) -> GpuMemory:
        """The GPU memory of the processes ``pids``: each one's own where NVML's PIDs can match
        them, else the visible devices' used memory (``GpuMemory`` says which). They cannot match
        inside a PID namespace (NVML lists the host's PIDs), where NVML cannot list processes, or
        where it lists some and none of them is one of ``pids``. ``source``: the one the caller
        read so far, kept (one series must not mix the two); None: decide now."""
        if not self.devices:
            return GpuMemory()
        if source is None and self.in_pid_namespace():
            self._note(
                "process_memory",
                "in a PID namespace, where NVML's PIDs (the host's) never match: each device's used memory is read",
            )
            source = "device"
        if source != "device":
            listed = self._processes()
            if listed is None and source == "process":
                return GpuMemory("process")
            if listed is not None:
                mine = {p: listed[p] for p in pids if p in listed}
                if mine or source == "process":
                    return GpuMemory("process", mine)
                if not listed:
                    return GpuMemory()  # no process on the GPU yet: nothing to match, nor to fall back on
                self._note(
                    "process_memory",
                    "none of the processes asked is among those NVML lists: each device's used memory is read",
                )
            source = "device"
        used = self.memory_used()
        return GpuMemory("device" if used is not None else None, device_bytes=used)

    def survey(self) -> dict[str, str]:
        """Every figure read once, so that ``notes`` says which ones this host cannot give (a
        run's ``gpu_notes``, read by the parent before its cycles); returns ``notes``. The
        process list is only asked for: the parent's own PID is on no GPU, so it matching none
        says nothing of the worker's."""
        if self.devices:
            self.memory_used()
            self.utilization()
            self._processes()
            if self.in_pid_namespace():
                self.memory_of([])
        return self.notes


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
