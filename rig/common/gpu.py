"""GPU probes through NVML (nvidia-ml-py), for every GPU the process can see: memory used, utilisation,
each process's GPU memory; no reading ever raises (a figure NVML will not give is None, its reason
noted once). The process's one probe is ``rig.common.probes.gpu()``. Also the device order a worker
runs under (``with_pci_order``) and the CuPy check (``cupy_check``, run in a child by
``rig.parent.preflight.cupy_usable``: ``python -m rig.common.gpu``)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path

# What CUDA reads. NVIDIA_VISIBLE_DEVICES is not here: only the container runtime reads it (its
# value may be `all`, `void`, indices, UUIDs, or under the Kubernetes device plugin's volume-mounts
# strategy a path); inside the container NVML and CUDA both see only the devices it let in.
VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES",)
ORDER_VAR = "CUDA_DEVICE_ORDER"
PCI_ORDER = "PCI_BUS_ID"


def with_pci_order(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``env`` with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` where it is unset or empty, for a process the
    rig starts (a worker, its stubs, the CuPy check). CUDA numbers the GPUs fastest first by
    default, NVML by PCI bus id: only under PCI_BUS_ID do the indices of ``CUDA_VISIBLE_DEVICES``
    name the same GPUs for both. A value the user set (FASTEST_FIRST) is kept, and the probe notes
    it (``Gpu.notes["order"]``)."""
    if not env.get(ORDER_VAR, "").strip():
        env[ORDER_VAR] = PCI_ORDER
    return env


def device_order(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The order CUDA numbers the GPUs in here, and the variable's value as set (None: unset).
    Anything but PCI_BUS_ID is CUDA's default, FASTEST_FIRST."""
    env = os.environ if environ is None else environ
    value = env.get(ORDER_VAR)
    return (PCI_ORDER if (value or "").strip() == PCI_ORDER else "FASTEST_FIRST"), value


def visible_devices(environ: Mapping[str, str] | None = None) -> tuple[str | None, list[str] | None]:
    """The GPUs this process may use, as CUDA reads its environment: ``CUDA_VISIBLE_DEVICES``
    (NVIDIA_VISIBLE_DEVICES is the container runtime's, never CUDA's: no selection here).
    Returns (the variable read, its entries in order): an index (``"1"``), a UUID or a prefix of
    one (``"GPU-8932f937"``, ``"MIG-..."``, as CUDA takes them). Entries None: every device (the
    variable unset); []: none (``-1``, empty, ``none``). As CUDA does, the list ends at the first
    entry it cannot take or that repeats one (``0,x,1`` is device 0)."""
    env = os.environ if environ is None else environ
    var = next((v for v in VISIBLE_VARS if v in env), None)
    if var is None:
        return None, None
    text = env[var].strip()
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


def pci_bus_id(text: str | bytes | None) -> str | None:
    """A PCI bus id in one form (``0000:1b:00.0``): CUDA gives a 4-digit domain in capitals
    (``0000:1B:00.0``), NVML's ``busId`` an 8-digit one (``00000000:1B:00.0``)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    m = re.fullmatch(r"\s*([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])\s*", text or "")
    if not m:
        return None
    domain, bus, dev, fn = (int(g, 16) for g in m.groups())
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


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
    ``environ``: where the visible devices and CUDA's device order are read (default
    ``os.environ``; the parent gives the worker's, ``with_pci_order``); ``pid_namespace``:
    whether NVML's PIDs can match ours (default: ``in_pid_namespace()``, read on first use).

    Indices are NVML's, in PCI bus order: CUDA's only under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``,
    which the rig sets for its workers. Where it is unset or FASTEST_FIRST and NVML sees more than
    one GPU, ``notes["order"]`` says so (CUDA's fastest-first order is a heuristic NVML cannot
    reproduce)."""

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
        env = os.environ if environ is None else environ
        var, entries = visible_devices(env)
        order, value = device_order(env)
        if order != PCI_ORDER and count > 1:
            self._note(
                "order",
                f"{ORDER_VAR} is {value if value is not None else 'unset'}: CUDA numbers the GPUs fastest first, "
                "NVML by PCI bus id; the GPUs read here by index may not be CUDA's (the rig sets "
                f"{PCI_ORDER} for its workers where it is unset)",
            )
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

    def _is_slice(self, handle) -> bool:
        """A MIG device's own handle (not a whole GPU in MIG mode)."""
        n = self._nvml
        try:
            f = getattr(n, "nvmlDeviceIsMigDeviceHandle", None)
            return bool(f and f(handle))
        except n.NVMLError:
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
        out: list[tuple[str, object]] = []
        seen: set[str] = set()
        for entry in entries:
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
            uuid = self._call("devices", label, "nvmlDeviceGetUUID", handle)
            if uuid is not None and _text(uuid) in seen:  # 0 and its UUID: one GPU twice, where CUDA stops
                self._note("devices", f"{var} names {entry}, a GPU named before it: it and those after it left out")
                break
            if uuid is not None:
                seen.add(_text(uuid))
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

    def bus_ids(self) -> list[str | None]:
        """Each visible device's PCI bus id (``0000:1b:00.0``), in ``devices``' order; a MIG slice's
        is its GPU's. None where NVML cannot give it. What CUDA's ``deviceGetPCIBusId`` is held to
        (benchmarks/gpu_selftest.py)."""
        out = []
        for label, h in self.devices:
            target = h
            if self._is_slice(h) and getattr(self._nvml, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", None):
                parent = self._call("pci", label, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", h)
                target = parent if parent is not None else h
            info = self._call("pci", label, "nvmlDeviceGetPciInfo", target)
            out.append(pci_bus_id(getattr(info, "busId", None)) if info is not None else None)
        return out

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


# -- CuPy, as the cupy model and inputs in GPU memory use it

# What CuPy raises where a library is missing or refuses (CUDARuntimeError, NVRTCError and
# CUBLASError are RuntimeErrors; a library that will not load, OSError or ImportError), and what a
# stand-in or an old CuPy lacking a name raises. A compile error is CuPy's own class, added per module.
_CUPY_ERRORS: tuple[type[BaseException], ...] = (
    ImportError,
    OSError,
    RuntimeError,
    AttributeError,
    ValueError,
    TypeError,
)


def _first_line(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0].strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _cuda_version(v) -> str:
    """CUDA's integer version (13000) as people write it (13.0)."""
    return f"{int(v) // 1000}.{int(v) % 1000 // 10}"


def _optional(owner: object, path: str, *args) -> object:
    """``owner.<path>(*args)`` (a dotted path), for a version CuPy may not give (an older CuPy, a
    stand-in, a library that will not load): None then, so that reading it never fails the step
    it describes."""
    try:
        fn = owner
        for name in path.split("."):
            fn = getattr(fn, name)
        return fn(*args)  # type: ignore[operator]
    except _CUPY_ERRORS:
        return None


def _import_cupy() -> tuple[object, dict | None]:
    """CuPy, or the check's answer where it does not import."""
    try:
        import cupy
    except ModuleNotFoundError as e:
        if e.name == "cupy":
            return None, {"ok": False, "installed": False, "why": f"CuPy is not installed ({e})"}
        return None, {"ok": False, "installed": True, "why": f"CuPy does not import: {_first_line(e)}"}
    except _CUPY_ERRORS as e:  # numpy 1 under CuPy 14: "numpy.core.multiarray failed to import"
        return None, {"ok": False, "installed": True, "why": f"CuPy does not import: {_first_line(e)}"}
    return cupy, None


def cupy_check(cupy=None) -> dict:
    """Whether CuPy can do here what the cupy model and inputs in GPU memory ask of it, each step a
    library, each failure named by it:

    - CuPy imports, and CUDA sees a device;
    - CUDA: an array copied to the device and back;
    - NVRTC: a kernel compiled at run time runs and its result reads back right (CuPy compiles its
      elementwise kernels so: the model's first line needs it);
    - cuBLAS: a matmul runs and its result reads back right.

    A device count alone passes a CuPy whose NVRTC or cuBLAS is missing, which then fails in the
    stub. Returns ``{"ok": bool, "installed": bool, "why": one line}``. ``cupy``: the module (the
    tests give a stand-in). The rig asks it of a child (``python -m rig.common.gpu``,
    ``rig.parent.preflight.cupy_usable``), so that the parent never holds a CUDA context."""
    import numpy as np

    if cupy is None:
        cupy, failed = _import_cupy()
        if failed is not None:
            return failed
    version = getattr(cupy, "__version__", "?")

    def result(ok: bool, why: str) -> dict:
        return {"ok": ok, "installed": True, "why": why}

    rt = cupy.cuda.runtime
    try:
        count = int(rt.getDeviceCount())
    except _CUPY_ERRORS as e:  # no driver, no device, a driver older than CuPy's CUDA
        return result(False, f"no CUDA device (CuPy {version}: {_first_line(e)})")
    if count < 1:
        return result(False, f"no CUDA device (CuPy {version})")
    runtime_v = _optional(rt, "runtimeGetVersion")
    driver_v = _optional(rt, "driverGetVersion")
    cuda = ", ".join(
        f"{what} {_cuda_version(v)}" for what, v in (("CUDA runtime", runtime_v), ("driver", driver_v)) if v
    )
    head = f"CuPy {version}" + (f" ({cuda})" if cuda else "") + f", {count} CUDA device(s)"
    try:
        compile_error = cupy.cuda.compiler.CompileException
    except _CUPY_ERRORS:  # a CuPy that moved it: a compile error then ends the child, its last line said
        compile_error = None
    errors = _CUPY_ERRORS + ((compile_error,) if isinstance(compile_error, type) else ())

    host = np.arange(4, dtype=np.float32)
    try:
        x = cupy.asarray(host)
        back = np.asarray(cupy.asnumpy(x)).tolist()
    except errors as e:
        return result(False, f"{head}, but CUDA cannot copy an array to the device and back ({_first_line(e)})")
    if back != host.tolist():
        return result(False, f"{head}, but an array copied to the device and back reads {back}, not {host.tolist()}")
    problems, done = [], []

    want = (host * 2 + 1).tolist()
    try:
        kernel = cupy.ElementwiseKernel("float32 x", "float32 y", "y = x * 2 + 1", "rig_cupy_check")
        got = np.asarray(cupy.asnumpy(kernel(x))).tolist()
        if got != want:
            problems.append(f"NVRTC: a kernel compiled and ran, but gave {got}, not {want}")
        else:
            v = _optional(cupy.cuda, "nvrtc.getVersion")
            done.append(f"a kernel compiled (NVRTC{' ' + '.'.join(map(str, v)) if isinstance(v, tuple) else ''})")
    except errors as e:
        problems.append(f"NVRTC: a kernel did not compile or run ({_first_line(e)})")

    a = np.array([[1, 2], [3, 4]], dtype=np.float32)
    want = (a @ a).tolist()
    try:
        handle = getattr(getattr(cupy.cuda, "device", None), "get_cublas_handle", lambda: None)()
        d = cupy.asarray(a)
        got = np.asarray(cupy.asnumpy(d @ d)).tolist()
        if got != want:
            problems.append(f"cuBLAS: a matmul ran, but gave {got}, not {want}")
        else:
            v = _optional(cupy.cuda, "cublas.getVersion", handle)
            said = f" {v // 10000}.{v // 100 % 100}.{v % 100}" if isinstance(v, int) and v >= 10000 else ""
            done.append(f"a matmul run (cuBLAS{said})")
    except errors as e:
        problems.append(f"cuBLAS: a matmul did not run ({_first_line(e)})")

    if problems:
        return result(False, f"{head}, but " + "; ".join(problems))
    return result(True, f"{head}: {' and '.join(done)}, each read back right")


if __name__ == "__main__":  # the CuPy check, in a process of its own: one JSON line
    print(json.dumps(cupy_check()), flush=True)
