"""The GPU kit's self-test (benchmarks/gpu_selftest.py, gpu_check.sh's first step), on a CPU: its
lines here (each check skipped, with the reason, exit 0), its reading of a capsule's kind against
real DLPack capsules (numpy 2's: ``__dlpack__()`` unversioned, ``max_version=(1, 0)`` DLPack 1.0's),
and each check's logic against a stand-in for CuPy whose "device memory" is shared memory (so that
the IPC check's child really opens the parent's buffer by its handle) and a stand-in NVML."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from helpers import ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_selftest.py"


def selftest() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_selftest", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_capsules_kind_is_read_from_its_name():
    if int(np.__version__.split(".")[0]) < 2:
        pytest.skip(f"numpy {np.__version__}: DLPack 1.0 capsules (max_version) came with numpy 2")
    st = selftest()
    x = np.arange(4.0)
    assert st.capsule_name(x.__dlpack__()) == "dltensor"  # what python_backend reads
    assert st.capsule_name(x.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"  # DLPack 1.0: misread there
    assert st.capsule_name(b"bytes") == "not a capsule (bytes)"
    kinds, device = st.exports(x)
    assert kinds == {"toDlpack()": "none (no such method)", "__dlpack__()": "dltensor",
                     "__dlpack__(max_version=(1, 0))": "dltensor_versioned"}
    assert device == "(1, 0) kDLCPU"

    class Old:  # an exporter whose __dlpack__ takes no max_version (CuPy before DLPack 1.0)
        def __dlpack__(self, stream=None):
            return x.__dlpack__()

        def toDlpack(self):
            return x.__dlpack__(max_version=(1, 0))  # as CuPy 14's toDlpack(): versioned by default

    kinds, device = st.exports(Old())
    assert kinds["toDlpack()"] == "dltensor_versioned" and kinds["__dlpack__()"] == "dltensor"
    assert kinds["__dlpack__(max_version=(1, 0))"].startswith("raised TypeError: ")
    assert device == "raised AttributeError: 'Old' object has no attribute '__dlpack_device__'"


def test_without_cupy_or_a_gpu_every_check_is_skipped_in_one_line_each(tmp_path):
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here: this is the self-test on a machine without it")
    out = tmp_path / "selftest.tsv"
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, check=False)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines] == [f"self-test {c}" for c in ("capsules", "kernel", "ipc", "order")]
    for ln in lines:
        assert ln.split(": ", 2)[1] == "skipped" and "CuPy is not installed (No module named 'cupy')" in ln
    rows = [ln.split("\t") for ln in out.read_text().splitlines()]
    assert [r[:2] for r in rows] == [[c, "skipped"] for c in ("capsules", "kernel", "ipc", "order")]
    bad = subprocess.run([sys.executable, str(SCRIPT), "--nope"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "usage: python benchmarks/gpu_selftest.py [--out FILE]"]


# A stand-in for CuPy 14 where the self-test meets it. "Device memory" is a file in /dev/shm, so a
# handle (its name) opens the same bytes in another process, as CUDA IPC does.
STANDIN = '''
import ctypes
import mmap
import os
import tempfile
import types

import numpy as _np

__version__ = "14.2.0+standin"
BUS = ["0000:18:00.0", "0000:3B:00.0"]  # by CUDA's index
VERSIONED_DUNDER = os.environ.get("STANDIN_DUNDER") == "versioned"  # a producer python_backend would misread
_mem = {}


class ndarray:
    def __init__(self, a):
        self._a = _np.array(a)

    def toDlpack(self):  # CuPy 14: use_versioned=True by default
        return self._a.__dlpack__(max_version=(1, 0))

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if VERSIONED_DUNDER:
            max_version = (1, 0)
        return self._a.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __matmul__(self, other):
        return ndarray(self._a @ other._a)


def asarray(a):
    return ndarray(a)


def asnumpy(a):
    return a._a.copy()


def ElementwiseKernel(in_params, out_params, operation, name):
    return lambda x: ndarray(x._a * 2 + 1)


def _malloc(n):
    fd, path = tempfile.mkstemp(dir="/dev/shm", prefix="rig-standin-ipc-")
    os.ftruncate(fd, n)
    m = mmap.mmap(fd, n)
    os.close(fd)
    view = (ctypes.c_char * n).from_buffer(m)
    _mem[ctypes.addressof(view)] = (m, view, path)
    return ctypes.addressof(view)


def _open(handle, flags=1):
    path = handle.rstrip(b"\\0").decode()
    fd = os.open(path, os.O_RDWR)
    n = os.fstat(fd).st_size
    m = mmap.mmap(fd, n)
    os.close(fd)
    view = (ctypes.c_char * n).from_buffer(m)
    _mem[ctypes.addressof(view)] = (m, view, None)
    return ctypes.addressof(view)


def _close(ptr):
    m, view, path = _mem.pop(ptr)
    del view
    m.close()
    if path:
        os.unlink(path)


cuda = types.SimpleNamespace(
    runtime=types.SimpleNamespace(
        getDeviceCount=lambda: len(BUS),
        deviceGetPCIBusId=lambda i: BUS[i],
        runtimeGetVersion=lambda: 13000,
        driverGetVersion=lambda: 13000,
        malloc=_malloc,
        free=_close,
        memcpy=lambda dst, src, n, kind: ctypes.memmove(dst, src, n),
        ipcGetMemHandle=lambda ptr: _mem[ptr][2].encode().ljust(64, b"\\0"),
        ipcOpenMemHandle=_open,
        ipcCloseMemHandle=_close,
        deviceSynchronize=lambda: None,
    ),
    nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0)),
    cublas=types.SimpleNamespace(getVersion=lambda handle: 130000),
    device=types.SimpleNamespace(get_cublas_handle=lambda: 1),
)
'''


@pytest.fixture
def standin_cupy(tmp_path, monkeypatch):
    """The stand-in as ``cupy``, here and in the checks' children; NVML a stand-in with two GPUs
    at CUDA's bus ids (tests/common/test_gpu_probes.py's, the real pynvml errors)."""
    from test_gpu_probes import FakeNvml

    from rig.common import gpu

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here: the stand-in's device memory lives there")
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(STANDIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    for var in ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices")  # the device plugin's path
    devices = [dict(uuid=f"GPU-{c * 4}", name="Fake H100", used=0, util=0, procs={}, bus=bus)
               for c, bus in (("a", "00000000:18:00.0"), ("b", "00000000:3B:00.0"))]
    real = gpu.Gpu

    class StandinGpu(real):
        def __init__(self, nvml=None, environ=None, pid_namespace=None):
            super().__init__(nvml or FakeNvml(devices=devices), environ, pid_namespace=False)

    monkeypatch.setattr(gpu, "Gpu", StandinGpu)
    yield tmp_path
    sys.modules.pop("cupy", None)


def test_each_check_passes_through_a_cupy_14_stand_in(standin_cupy, monkeypatch):
    st = selftest()
    got = st.run()
    assert [(name, status) for name, status, _ in got] == [(c, "passed") for c in st.CHECKS], got
    said = {name: detail for name, _, detail in got}
    assert said["capsules"] == ("CuPy 14.2.0+standin: toDlpack() dltensor_versioned, __dlpack__() dltensor, "
                                "__dlpack__(max_version=(1, 0)) dltensor_versioned; __dlpack_device__() (2, 0) kDLCUDA")
    assert said["kernel"] == ("CuPy 14.2.0+standin (CUDA runtime 13.0, driver 13.0), 2 CUDA device(s): a kernel "
                              "compiled (NVRTC 13.0) and a matmul run (cuBLAS 13.0.0), each read back right")
    assert said["ipc"].startswith("1 MiB of float32 over CUDA IPC to pid ")
    assert int(said["ipc"].split("pid ")[1].split(":")[0]) != os.getpid()  # read in a process of its own
    assert said["ipc"].endswith(": it read the values written (first 0, last 262143), and the values it wrote back "
                                "doubled read right here")
    assert said["order"].startswith(
        "CUDA_DEVICE_ORDER=PCI_BUS_ID (set here, as the rig sets it for its workers); CUDA_VISIBLE_DEVICES unset; "
        "NVIDIA_VISIBLE_DEVICES='/var/run/nvidia-container-devices': CUDA [0 0000:18:00.0, 1 0000:3b:00.0] = "
        "the rig's NVML probe [GPU 0 0000:18:00.0, GPU 1 0000:3b:00.0]; under FASTEST_FIRST CUDA numbers them "
        "the same"), said["order"]
    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # set before CuPy started, as for a worker
    assert not [p for p in os.listdir("/dev/shm") if p.startswith("rig-standin-ipc-")], "the buffer was freed"


def test_a_selection_by_uuid_and_a_differing_order_are_each_caught(standin_cupy, monkeypatch):
    st = selftest()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")  # CUDA's device 0 is then the GPU at 3b
    cp = importlib.import_module("cupy")
    cp.BUS[:] = ["0000:3B:00.0"]
    status, detail = st.check_order(cp, "CUDA_DEVICE_ORDER=PCI_BUS_ID (the caller's)")
    assert status == "passed"
    assert detail.endswith("CUDA [0 0000:3b:00.0] = the rig's NVML probe [GPU-bbbb 0000:3b:00.0]")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # fastest first, CUDA's 0 is not NVML's 0
    status, detail = st.check_order(cp, "CUDA_DEVICE_ORDER=FASTEST_FIRST (the caller's, ...)")
    assert status == "failed" and "CUDA [0 0000:3b:00.0] != the rig's NVML probe [GPU 0 0000:18:00.0]" in detail


def test_a_producer_the_backend_would_misread_fails_the_capsule_check_and_the_exit_status(standin_cupy, monkeypatch,
                                                                                          capsys):
    monkeypatch.setenv("STANDIN_DUNDER", "versioned")
    st = selftest()
    assert st.main([]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("self-test capsules: failed: CuPy 14.2.0+standin: toDlpack() dltensor_versioned, "
                               "__dlpack__() dltensor_versioned,")
    assert [ln.split(": ")[1] for ln in lines[1:]] == ["passed", "passed", "passed"]


def test_a_gpu_that_cupy_cannot_use_fails_every_check(monkeypatch, tmp_path):
    from test_gpu_probes import FakeNvml

    from rig.common import gpu

    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text('raise ImportError("numpy.core.multiarray failed to import")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    real = gpu.Gpu
    monkeypatch.setattr(gpu, "Gpu", lambda *a, **k: real(FakeNvml(), environ={}, pid_namespace=False))
    got = selftest().run()
    why = "CuPy does not import: ImportError: numpy.core.multiarray failed to import, but NVML sees Fake GPU"
    assert got == [(c, "failed", why) for c in ("capsules", "kernel", "ipc", "order")]
