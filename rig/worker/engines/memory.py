"""Where a request's tensors live: inputs in CPU or GPU memory, and outputs where the response
allocator puts them. One ``Placement`` per worker (``--input-memory``), and a ``Ledger`` of where
outputs were handed out, which every window reads (``input_memory``, ``output_memory``).

GPU memory comes from CuPy, imported on first use only (a worker on a CPU node never imports it):
- inputs are copied to the device once per distinct array (``DeviceMemory.inputs``), the copy
  waited for, and submitted as ``TRITONSERVER_MEMORY_GPU`` with their device id; the request keeps
  them alive;
- outputs: where the core prefers GPU memory for an output (the model left it on the device)
  and the placement is ``gpu``, the allocator takes it from CuPy's pool on that device;
- an output in GPU memory is read back to the host (``to_host``) to be checked, or viewed in
  place (``view``) by a user's retention, holding its response as a DLPack consumer would.

Why not the native lane: ``_fastpath.c`` has no CUDA runtime to allocate or read back device memory,
so with ``gpu`` the engines' Python and asyncio lanes serve (the windows' ``lane`` says which).
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

from rig.common.errors import RigError

# TRITONSERVER_MemoryType (tritonserver.h)
MEMORY_CPU = 0
MEMORY_CPU_PINNED = 1
MEMORY_GPU = 2
_NAMES = {MEMORY_CPU: "cpu", MEMORY_CPU_PINNED: "cpu", MEMORY_GPU: "gpu"}

# Distinct input arrays kept on the device: an input source cycles a fixed set of entries (a data
# file's, or the generated ones); past this many, each request copies its own and frees it on release.
MAX_CACHED_INPUTS = 4096


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the rig's inputs live, and whether a GPU preference for outputs is honoured."""

    kind: str = "cpu"  # cpu | gpu
    device: int = 0  # the CUDA device (an index among the visible ones) for gpu

    @property
    def gpu(self) -> bool:
        return self.kind == "gpu"

    @property
    def label(self) -> str:
        return f"gpu:{self.device}" if self.gpu else "cpu"

    @classmethod
    def parse(cls, text: str | None) -> Placement:
        """``cpu``, ``gpu`` or ``gpu:N`` (None or empty: cpu)."""
        value = (text or "cpu").strip().lower()
        kind, _, device = value.partition(":")
        if kind not in ("cpu", "gpu") or (device and (kind == "cpu" or not device.isdigit())):
            raise RigError(f"input memory must be cpu, gpu or gpu:N (got {text!r})")
        return cls(kind, int(device or 0))


def memory_label(mtype: int, device: int) -> str:
    """``cpu`` or ``gpu:N`` of a ``TRITONSERVER_MemoryType`` and its id (pinned host memory is cpu)."""
    name = _NAMES.get(int(mtype), f"memory{int(mtype)}")
    return f"{name}:{int(device)}" if name == "gpu" else name


class Ledger:
    """Where outputs were handed out since the last ``take``: a set of labels. Allocators and
    response readers call ``record`` from the core's threads; a set's ``add`` holds the GIL."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def record(self, label: str) -> None:
        self._seen.add(label)

    def take(self) -> str | None:
        """The labels seen, joined by commas in order (``cpu``, ``cpu,gpu:0``), or None."""
        seen, self._seen = self._seen, set()
        return ",".join(sorted(seen)) or None


# The worker's one placement and ledger: one engine at a time hosts Triton in a worker.
PLACEMENT = Placement()
OUTPUTS = Ledger()


def set_placement(placement: Placement) -> None:
    global PLACEMENT
    PLACEMENT = placement


def _cupy():
    try:
        import cupy
    except ImportError as e:
        raise RigError(
            f"--input-memory gpu needs CuPy in the worker's Python ({e}): install the GPU extra "
            "(cupy-cuda12x or cupy-cuda13x), or give --input-memory cpu"
        ) from None
    return cupy


class DeviceMemory:
    """CuPy's side of the GPU placement: inputs on the device, outputs allocated and read back."""

    def __init__(self, device: int = 0):
        self.cp = _cupy()
        self.device = int(device)
        try:
            with self.cp.cuda.Device(self.device):
                self.cp.cuda.runtime.getDeviceProperties(self.device)
        except Exception as e:  # noqa: BLE001 - CUDARuntimeError: no device, driver too old
            raise RigError(
                f"--input-memory gpu: CUDA device {self.device} is not usable ({e}); give --input-memory cpu"
            ) from None
        self._inputs: dict[int, tuple[np.ndarray, object]] = {}
        self._outputs: dict[int, object] = {}  # device pointer -> cupy MemoryPointer, until released
        self._lock = threading.Lock()
        self.copies = 0  # host-to-device copies of inputs made by the rig

    def input(self, arr: np.ndarray):
        """``arr`` on the device: the same device array for the same host array (kept with it, so
        its id is never reused while cached), else a fresh copy."""
        key = id(arr)
        hit = self._inputs.get(key)
        if hit is not None and hit[0] is arr:
            return hit[1]
        with self.cp.cuda.Device(self.device):
            dev = self.cp.asarray(np.ascontiguousarray(arr))
            # the copy is queued on the current stream and may not have landed when asarray returns;
            # the stub reads this buffer from another process (CUDA IPC), which no stream orders
            self.cp.cuda.get_current_stream().synchronize()
        self.copies += 1
        if len(self._inputs) < MAX_CACHED_INPUTS:
            self._inputs[key] = (arr, dev)
        return dev

    def alloc(self, size: int, device: int) -> int:
        """A device buffer of ``size`` bytes from CuPy's pool on ``device``; its pointer."""
        with self.cp.cuda.Device(int(device)):
            mem = self.cp.cuda.alloc(max(int(size), 1))
        with self._lock:
            self._outputs[int(mem.ptr)] = mem
        return int(mem.ptr)

    def free(self, ptr: int) -> None:
        with self._lock:
            self._outputs.pop(int(ptr), None)  # back to the pool when the last reference goes

    def to_host(self, ptr: int, size: int, device: int, dtype, shape) -> np.ndarray:
        """A host copy of a device buffer (synchronous)."""
        out = np.empty(shape, dtype=dtype)
        if size:
            with self.cp.cuda.Device(int(device)):
                self.cp.cuda.runtime.memcpy(out.ctypes.data, int(ptr), int(size), 2)  # cudaMemcpyDeviceToHost
        return out

    def view(self, ptr: int, size: int, device: int, dtype, shape, owner):
        """A CuPy array over a device buffer that keeps ``owner`` (the response) alive."""
        mem = self.cp.cuda.UnownedMemory(int(ptr), int(size), owner, int(device))
        with self.cp.cuda.Device(int(device)):
            return self.cp.ndarray(shape, dtype=dtype, memptr=self.cp.cuda.MemoryPointer(mem, 0))


_DEVICE: DeviceMemory | None = None
_DEVICE_LOCK = threading.Lock()


def device_memory() -> DeviceMemory:
    """The worker's one ``DeviceMemory`` for its placement's device (made on first use)."""
    global _DEVICE
    with _DEVICE_LOCK:
        if _DEVICE is None:
            _DEVICE = DeviceMemory(PLACEMENT.device)
        return _DEVICE
