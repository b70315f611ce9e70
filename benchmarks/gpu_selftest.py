"""The GPU kit's first step (benchmarks/gpu_check.sh, with --kit and without): each boundary the GPU
path crosses, checked on its own before any soak, so that the first run on a GPU says everything
in one call. One line per check, in this order:

- capsules: CuPy's version and the kind of DLPack capsule each export gives (read with
  PyCapsule_GetName): ``toDlpack()``, ``__dlpack__()``, ``__dlpack__(max_version=(1, 0))``, and
  ``__dlpack_device__()``. "dltensor" is the unversioned capsule python_backend reads;
  "dltensor_versioned" is DLPack 1.0's, which it misreads (issue 62). Passed where ``__dlpack__()``
  gives "dltensor" on a CUDA device; the other two are reported as they are.
- kernel: a kernel compiled (NVRTC) and a matmul run (cuBLAS), each read back and its values
  checked (``rig.common.gpu.cupy_check``, what ``rig doctor`` and the runs ask).
- ipc: a buffer passed over CUDA IPC to a second process (``ipcGetMemHandle`` here,
  ``ipcOpenMemHandle`` in a child Python), read there and written back doubled, both checked.
- order: CUDA's device order against NVML's: each CUDA device's PCI bus id
  (``deviceGetPCIBusId``) against the GPU the rig's NVML probe reads in its place
  (``rig.common.gpu.Gpu``, ``nvmlDeviceGetPciInfo``), under the CUDA_DEVICE_ORDER the rig gives
  its workers (PCI_BUS_ID where unset; a caller's value kept), which the line states.

    python benchmarks/gpu_selftest.py [--out FILE]    # FILE: the lines as TSV (check, status, detail)

Each line is ``self-test CHECK: passed|failed|skipped: DETAIL``. Without CuPy or a CUDA device, and
no GPU NVML can see, every check is skipped with the reason; with a GPU that CuPy cannot use, each
fails. Exit status: 1 when a check failed, else 0 (skipped included: the offline dry run on a CPU)."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

CHECKS = ("capsules", "kernel", "ipc", "order")
DEVICE_TYPES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 13: "kDLCUDAManaged"}  # dlpack.h's DLDeviceType
IPC_FLOATS = 1 << 18  # 1 MiB of float32
CHILD_TIMEOUT_S = 120

# A prototype of its own, so that no other user of ctypes.pythonapi.PyCapsule_GetName sees its
# restype or argtypes changed.
_capsule_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))

# The child's half of the IPC check: open the handle, read, check, write the values back doubled.
IPC_CHILD = """
import json, os, sys
import numpy as np
import cupy
rt = cupy.cuda.runtime
n = int(sys.argv[2])
ptr = rt.ipcOpenMemHandle(bytes.fromhex(sys.argv[1]))
try:
    got = np.empty(n, dtype=np.float32)
    rt.memcpy(got.ctypes.data, ptr, got.nbytes, 2)  # cudaMemcpyDeviceToHost
    doubled = got * 2
    rt.memcpy(ptr, doubled.ctypes.data, doubled.nbytes, 1)  # cudaMemcpyHostToDevice
    rt.deviceSynchronize()
finally:
    rt.ipcCloseMemHandle(ptr)
want = np.arange(n, dtype=np.float32)
print(json.dumps({"pid": os.getpid(), "read_right": bool((got == want).all()), "first": float(got[0]),
                  "last": float(got[-1])}))
"""

# FASTEST_FIRST's order, asked of a child (CUDA reads CUDA_DEVICE_ORDER once, at its start).
ORDER_CHILD = """
import json
import cupy
rt = cupy.cuda.runtime
print(json.dumps([rt.deviceGetPCIBusId(i) for i in range(rt.getDeviceCount())]))
"""


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def first_line(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0].strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def capsule_name(obj: object) -> str:
    """The name a PyCapsule carries ("dltensor", "dltensor_versioned", "used_dltensor" once a
    consumer took it), read without consuming it."""
    if type(obj).__name__ != "PyCapsule":
        return f"not a capsule ({type(obj).__name__})"
    name = _capsule_get_name(obj)
    return name.decode(errors="replace") if name is not None else "unnamed"


def exports(arr: object) -> tuple[dict[str, str], str]:
    """What each DLPack export of ``arr`` gives: the capsule's name, or what went wrong; and its
    ``__dlpack_device__()``."""
    calls: dict[str, tuple[str, dict]] = {
        "toDlpack()": ("toDlpack", {}),
        "__dlpack__()": ("__dlpack__", {}),
        "__dlpack__(max_version=(1, 0))": ("__dlpack__", {"max_version": (1, 0)}),
    }
    kinds = {}
    for label, (method, kwargs) in calls.items():
        if not hasattr(arr, method):
            kinds[label] = "none (no such method)"
            continue
        try:
            kinds[label] = capsule_name(getattr(arr, method)(**kwargs))
        except Exception as e:  # noqa: BLE001 - an older CuPy without max_version: reported, the others read
            kinds[label] = f"raised {first_line(e)}"
    try:
        kind, device_id = arr.__dlpack_device__()  # type: ignore[attr-defined]
        device = f"({int(kind)}, {int(device_id)}) {DEVICE_TYPES.get(int(kind), 'another device type')}"
    except Exception as e:  # noqa: BLE001 - no __dlpack_device__: said, not raised
        device = f"raised {first_line(e)}"
    return kinds, device


def check_capsules(cp) -> tuple[str, str]:
    import numpy as np

    arr = cp.asarray(np.arange(4, dtype=np.float32))  # a copy, no kernel: NVRTC is the next check's
    kinds, device = exports(arr)
    said = ", ".join(f"{label} {kind}" for label, kind in kinds.items())
    detail = f"CuPy {getattr(cp, '__version__', '?')}: {said}; __dlpack_device__() {device}"
    ok = kinds["__dlpack__()"] == "dltensor" and "kDLCUDA" in device
    return ("passed" if ok else "failed"), detail


def check_kernel(cp) -> tuple[str, str]:
    from rig.common.gpu import cupy_check

    said = cupy_check(cp)
    return ("passed" if said["ok"] else "failed"), said["why"]


def _python() -> list[str]:
    # -P: the folder it runs in stays off the module path (a numpy.py there would shadow numpy)
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else [])]


def _child(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[dict | list | None, str]:
    """Run ``code`` in a child Python; its last JSON line, or why there is none."""
    try:
        proc = subprocess.run(
            [*_python(), "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"the child took over {CHILD_TIMEOUT_S} s"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(("{", "[")):
            return json.loads(line), ""
    tail = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    return None, f"the child ended with status {proc.returncode}" + (f": {tail[-1]}" if tail else "")


def check_ipc(cp) -> tuple[str, str]:
    import numpy as np

    rt = cp.cuda.runtime
    host = np.arange(IPC_FLOATS, dtype=np.float32)
    # cudaMalloc of its own, not CuPy's pool: a handle names a whole allocation, and the child
    # would open the pool's block at its start, not this buffer
    ptr = rt.malloc(host.nbytes)
    try:
        rt.memcpy(ptr, host.ctypes.data, host.nbytes, 1)  # cudaMemcpyHostToDevice
        handle = rt.ipcGetMemHandle(ptr)
        said, why = _child(IPC_CHILD, bytes(handle).hex(), str(IPC_FLOATS))
        if not isinstance(said, dict):
            return "failed", f"{host.nbytes // 2**20} MiB over CUDA IPC: {why}"
        back = np.empty_like(host)
        rt.memcpy(back.ctypes.data, ptr, back.nbytes, 2)  # cudaMemcpyDeviceToHost
    finally:
        rt.free(ptr)
    written = bool((back == host * 2).all())
    detail = (
        f"{host.nbytes // 2**20} MiB of float32 over CUDA IPC to pid {said['pid']}: it read "
        f"{'the values written' if said['read_right'] else 'other values'} (first {said['first']:g}, last "
        f"{said['last']:g}), and the values it wrote back doubled read {'right' if written else 'wrong'} here"
    )
    return ("passed" if said["read_right"] and written else "failed"), detail


def check_order(cp, order_said: str) -> tuple[str, str]:
    from rig.common.gpu import VISIBLE_VARS, Gpu, pci_bus_id

    rt = cp.cuda.runtime
    cuda = [pci_bus_id(rt.deviceGetPCIBusId(i)) for i in range(int(rt.getDeviceCount()))]
    visible = "; ".join(
        f"{v}={os.environ[v]!r}" if v in os.environ else f"{v} unset" for v in (*VISIBLE_VARS, "NVIDIA_VISIBLE_DEVICES")
    )
    head = f"{order_said}; {visible}"
    g = Gpu()  # the rig's probe, as a worker's: this process's environment, the order above set
    if not g.available:
        return "failed", f"{head}: CUDA sees {len(cuda)} device(s) ({', '.join(map(str, cuda))}), NVML none ({g.why})"
    nvml = g.bus_ids()
    same = cuda == nvml
    cuda_said = ", ".join(f"{i} {b}" for i, b in enumerate(cuda))
    nvml_said = ", ".join(f"{label} {b}" for (label, _), b in zip(g.devices, nvml))
    detail = f"{head}: CUDA [{cuda_said}] {'=' if same else '!='} the rig's NVML probe [{nvml_said}]"
    if len(cuda) > 1:
        said, why = _child(ORDER_CHILD, env={**os.environ, "CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
        if not isinstance(said, list):
            detail += f"; FASTEST_FIRST's order not read ({why})"
        else:
            fastest = [pci_bus_id(b) for b in said]
            same_fast = fastest == cuda
            detail += "; under FASTEST_FIRST CUDA numbers them " + (
                "the same" if same_fast else f"[{', '.join(map(str, fastest))}]"
            )
    return ("passed" if same else "failed"), detail


def set_order() -> str:
    """CUDA_DEVICE_ORDER as the rig gives its workers, set before CUDA starts in this process; what
    the line says of it."""
    from rig.common.gpu import ORDER_VAR, with_pci_order

    before = os.environ.get(ORDER_VAR)
    with_pci_order(os.environ)
    now = os.environ[ORDER_VAR]
    if before is None or not before.strip():
        return f"{ORDER_VAR}={now} (set here, as the rig sets it for its workers)"
    if now == "PCI_BUS_ID":
        return f"{ORDER_VAR}={now} (the caller's)"
    return f"{ORDER_VAR}={now} (the caller's, kept as the rig keeps it: NVML's indices may not be CUDA's)"


def load_cupy():
    """CuPy and a CUDA device, or why not."""
    try:
        import cupy
    except ModuleNotFoundError as e:
        if e.name == "cupy":
            return None, f"CuPy is not installed ({e})"
        return None, f"CuPy does not import: {first_line(e)}"
    except Exception as e:  # noqa: BLE001 - numpy 1 under CuPy 14, a library CuPy cannot load: said, not raised
        return None, f"CuPy does not import: {first_line(e)}"
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # noqa: BLE001 - no driver, no device
        return None, f"no CUDA device (CuPy {cupy.__version__}: {first_line(e)})"
    return (cupy, "") if n > 0 else (None, f"no CUDA device (CuPy {cupy.__version__})")


def run() -> list[tuple[str, str, str]]:
    """Each check's (name, status, detail), in CHECKS' order; never raises."""
    try:
        order_said = set_order()
    except Exception as e:  # noqa: BLE001 - the rig not importable here: every check needs it
        return [(name, "failed", f"the rig does not import ({first_line(e)})") for name in CHECKS]
    cp, why = load_cupy()
    if cp is None:
        from rig.common.gpu import Gpu

        g = Gpu()
        if g.available:  # a GPU the GPU path cannot use: the kit's own question, failed
            return [(name, "failed", f"{why}, but NVML sees {g.name}") for name in CHECKS]
        return [(name, "skipped", f"{why}; NVML: {g.why}") for name in CHECKS]
    checks = {
        "capsules": lambda: check_capsules(cp),
        "kernel": lambda: check_kernel(cp),
        "ipc": lambda: check_ipc(cp),
        "order": lambda: check_order(cp, order_said),
    }
    out = []
    for name in CHECKS:
        try:
            status, detail = checks[name]()
        except Exception as e:  # noqa: BLE001 - one check's fault is its line, and the next check still runs
            status, detail = "failed", f"raised {first_line(e)}"
        out.append((name, status, one_line(detail)))
    return out


def main(argv: list[str]) -> int:
    out = None
    if argv[:1] == ["--out"] and len(argv) == 2:
        out = Path(argv[1])
    elif argv:
        print("usage: python benchmarks/gpu_selftest.py [--out FILE]", file=sys.stderr)
        return 2
    results = []
    for name, status, detail in run():
        print(f"self-test {name}: {status}: {detail}", flush=True)
        results.append((name, status, detail))
    if out is not None:
        out.write_text("".join(f"{n}\t{s}\t{d}\n" for n, s, d in results))
    return 1 if any(s == "failed" for _, s, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
