"""The GPU probes' error paths (``rig.common.probes.Gpu``), with no GPU: this is not a GPU test.

A small fake of the ``pynvml`` module stands in for NVML, and its functions raise the real error
classes of nvidia-ml-py (``pynvml.NVMLError(code)`` gives the subclass NVML itself would raise):
NOT_SUPPORTED for memory, for utilisation, for the process list; LIBRARY_NOT_FOUND at init;
GPU_IS_LOST; a MIG device's handle. One error at a time, each must give a None figure, its reason
recorded once, and never an exception. Also the parsing of the visible devices, the fallback to the
devices' used memory where PIDs cannot match, and the worker's paths that call the probe (a window's
row, the growth sampler) completing with a failing NVML.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
import types

import pytest

from rig.common import probes

pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is in the test extra: its real NVML error classes")

MIB = 2**20


def err(code: int):
    return pynvml.NVMLError(code)


class FakeNvml(types.SimpleNamespace):
    """A ``pynvml``-like module: devices by index and UUID, each a dict of its figures; an entry of
    ``fail`` (``"nvmlDeviceGetMemoryInfo"`` -> code) makes that function raise the real error."""

    def __init__(self, devices=None, fail=None, mig=(), mig_mode=(), init_fails=None, slices=None):
        consts = {k: v for k, v in vars(pynvml).items() if k.startswith(("NVML_ERROR_", "NVMLError"))}
        super().__init__(**consts, NVML_DEVICE_MIG_ENABLE=pynvml.NVML_DEVICE_MIG_ENABLE)
        self.devs = devices if devices is not None else [dict(uuid="GPU-aaaa1111", name="Fake GPU", used=1 * MIB,
                                                              util=40, procs={})]
        self.fail = dict(fail or {})
        self.mig = set(mig)            # indices whose handle is a MIG device's
        self.mig_mode = set(mig_mode)  # indices of GPUs in MIG mode
        self.init_fails = init_fails
        self.slices = slices or {}     # a GPU's index -> the indices in ``devices`` of its MIG slices
        self.calls: dict[str, int] = {}

    def _do(self, fn: str):
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if fn in self.fail:
            raise err(self.fail[fn])

    def nvmlInit(self):
        if self.init_fails is not None:
            raise err(self.init_fails)

    def nvmlDeviceGetCount(self):  # the whole GPUs: a MIG slice is reached through its GPU or its UUID
        sliced = {i for v in self.slices.values() for i in v}
        return len(self.devs) - len(sliced)

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return 7 if h in self.mig_mode else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, j):
        got = self.slices.get(h, [])
        if j >= len(got):
            raise err(pynvml.NVML_ERROR_NOT_FOUND)  # a slot with no instance in it
        return got[j]

    def nvmlDeviceGetHandleByIndex(self, i):
        self._do("nvmlDeviceGetHandleByIndex")
        if i >= self.nvmlDeviceGetCount():
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for i, d in enumerate(self.devs):
            if d["uuid"] == uuid:
                return i
        raise err(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, h):
        return self.devs[h]["uuid"]

    def nvmlDeviceGetName(self, h):
        self._do("nvmlDeviceGetName")
        return self.devs[h]["name"].encode()  # older nvidia-ml-py gives bytes

    def nvmlDeviceIsMigDeviceHandle(self, h):
        return int(h in self.mig)

    def nvmlDeviceGetMigMode(self, h):
        if h in self.mig_mode:
            return [1, 1]
        raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)  # a GPU without MIG

    def nvmlDeviceGetMemoryInfo(self, h):
        self._do("nvmlDeviceGetMemoryInfo")
        return types.SimpleNamespace(used=self.devs[h]["used"], total=80 * 2**30)

    def nvmlDeviceGetUtilizationRates(self, h):
        self._do("nvmlDeviceGetUtilizationRates")
        return types.SimpleNamespace(gpu=self.devs[h]["util"], memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._do("nvmlDeviceGetComputeRunningProcesses")
        return [types.SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in self.devs[h]["procs"].items()]

    def nvmlDeviceGetPciInfo(self, h):
        self._do("nvmlDeviceGetPciInfo")
        if h in self.mig:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)  # asked of a MIG slice: its GPU has the bus
        return types.SimpleNamespace(busId=self.devs[h].get("bus", f"00000000:{0x18 + h:02X}:00.0").encode())

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, h):
        return next(gpu for gpu, sliced in self.slices.items() if h in sliced)


PCI = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # what the rig's workers run under (rig.common.gpu.with_pci_order)


def gpu(nvml=None, env=None, pid_namespace=False, **fake) -> probes.Gpu:
    return probes.Gpu(nvml or FakeNvml(**fake), environ={**PCI, **(env or {})}, pid_namespace=pid_namespace)


# ------------------------------------------------------------------ the visible devices


# The device plugin's forms of NVIDIA_VISIBLE_DEVICES (k8s-device-plugin's deviceListStrategy):
# envvar gives the UUIDs, volume-mounts a path (the list is in files mounted under it), and the
# container runtime reads `all`, `none`, `void` and indices. Only the container runtime reads it:
# inside the container NVML and CUDA already see just those GPUs, so it selects nothing here.
PLUGIN_FORMS = ["/var/run/nvidia-container-devices", "GPU-aaaa-0,GPU-bbbb-1", "all", "none", "void", "5,6,7",
                "MIG-bbbb-slice", ""]


@pytest.mark.parametrize("env, want", [
    ({}, (None, None)),
    ({"CUDA_VISIBLE_DEVICES": "1,0"}, ("CUDA_VISIBLE_DEVICES", ["1", "0"])),
    ({"CUDA_VISIBLE_DEVICES": " 01 , 2"}, ("CUDA_VISIBLE_DEVICES", ["1", "2"])),
    ({"CUDA_VISIBLE_DEVICES": "GPU-8932f937,MIG-4a5b"}, ("CUDA_VISIBLE_DEVICES", ["GPU-8932f937", "MIG-4a5b"])),
    ({"CUDA_VISIBLE_DEVICES": "0,x,1"}, ("CUDA_VISIBLE_DEVICES", ["0"])),      # CUDA stops at what it cannot take
    ({"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}, ("CUDA_VISIBLE_DEVICES", ["0", "2"])),  # CUDA's own example
    ({"CUDA_VISIBLE_DEVICES": "0,,1"}, ("CUDA_VISIBLE_DEVICES", ["0"])),
    ({"CUDA_VISIBLE_DEVICES": "0,1,0,2"}, ("CUDA_VISIBLE_DEVICES", ["0", "1"])),  # and at a repeat
    ({"CUDA_VISIBLE_DEVICES": "-1"}, ("CUDA_VISIBLE_DEVICES", [])),
    ({"CUDA_VISIBLE_DEVICES": ""}, ("CUDA_VISIBLE_DEVICES", [])),             # set and empty: none
    ({"CUDA_VISIBLE_DEVICES": "all"}, ("CUDA_VISIBLE_DEVICES", [])),          # not CUDA's word: no entry taken
    ({"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "all"}, ("CUDA_VISIBLE_DEVICES", [])),
    ({"CUDA_VISIBLE_DEVICES": "2", "NVIDIA_VISIBLE_DEVICES": "3"}, ("CUDA_VISIBLE_DEVICES", ["2"])),
    ({"CUDA_VISIBLE_DEVICES": "GPU-"}, ("CUDA_VISIBLE_DEVICES", [])),
    *[({"NVIDIA_VISIBLE_DEVICES": form}, (None, None)) for form in PLUGIN_FORMS],  # CUDA never reads it
])
def test_visible_devices_are_read_as_cuda_reads_them(env, want):
    assert probes.visible_devices(env) == want


def _three():
    return [dict(uuid=f"GPU-{c * 4}-{i}", name="Fake GPU", used=(i + 1) * MIB, util=10 * (i + 1), procs={})
            for i, c in enumerate("abc")]


@pytest.mark.parametrize("env, labels", [
    ({}, ["GPU 0", "GPU 1", "GPU 2"]),
    ({"CUDA_VISIBLE_DEVICES": "2,0"}, ["GPU 2", "GPU 0"]),               # indices, in the order given
    ({"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1,GPU-aaaa-0"}, ["GPU-bbbb-1", "GPU-aaaa-0"]),  # whole UUIDs, in order
    ({"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, ["GPU-bbbb"]),              # a prefix, as CUDA takes one
    ({"CUDA_VISIBLE_DEVICES": "GPU-cccc-2,1"}, ["GPU-cccc-2", "GPU 1"]),
    ({"CUDA_VISIBLE_DEVICES": "1,7,0"}, ["GPU 1"]),                    # no device 7: it and those after it
    ({"CUDA_VISIBLE_DEVICES": "1,GPU-ffff,0"}, ["GPU 1"]),             # no such UUID: the same
    ({"CUDA_VISIBLE_DEVICES": "0,GPU-aaaa-0,1"}, ["GPU 0"]),           # GPU 0 twice (index, then UUID): a repeat
    *[({"NVIDIA_VISIBLE_DEVICES": form}, ["GPU 0", "GPU 1", "GPU 2"]) for form in PLUGIN_FORMS],
    ({"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices", "CUDA_VISIBLE_DEVICES": "1"}, ["GPU 1"]),
    ({"NVIDIA_VISIBLE_DEVICES": "GPU-aaaa-0,GPU-bbbb-1", "CUDA_VISIBLE_DEVICES": "GPU-cccc"}, ["GPU-cccc"]),
])
def test_the_visible_devices_map_to_nvml_handles(env, labels):
    g = gpu(devices=_three(), env=env)
    assert [label for label, _ in g.devices] == labels
    assert g.available and g.name == (f"Fake GPU x{len(labels)}" if len(labels) > 1 else "Fake GPU")
    stopped = env.get("CUDA_VISIBLE_DEVICES") in ("1,7,0", "1,GPU-ffff,0", "0,GPU-aaaa-0,1")
    assert ("devices" in g.notes) == stopped
    assert "order" not in g.notes  # PCI_BUS_ID: CUDA's indices are NVML's


def test_a_repeat_and_an_unknown_entry_say_where_the_list_ended():
    g = gpu(devices=_three(), env={"CUDA_VISIBLE_DEVICES": "0,GPU-aaaa-0,1"})
    assert g.notes["devices"] == ("CUDA_VISIBLE_DEVICES names GPU-aaaa-0, a GPU named before it: it and those after "
                                  "it left out")
    g = gpu(devices=_three(), env={"CUDA_VISIBLE_DEVICES": "1,7,0"})
    assert g.notes["devices"] == "CUDA_VISIBLE_DEVICES names 7, which NVML does not see: it and those after it left out"


def test_devices_named_that_nvml_does_not_see_leave_no_gpu_and_say_why():
    g = gpu(env={"CUDA_VISIBLE_DEVICES": "GPU-ffff"})
    assert not g.available and g.why == "CUDA_VISIBLE_DEVICES names no GPU that NVML sees"
    assert g.memory_used() is None and g.utilization() is None and g.memory_of([1]) == probes.GpuMemory()
    g = gpu(devices=_three(), env={"CUDA_VISIBLE_DEVICES": "GPU-"})  # no UUID at all: CUDA takes no entry
    assert not g.available and g.notes["init"] == "CUDA_VISIBLE_DEVICES leaves this process no GPU"
    g = gpu(devices=_three(), env={"CUDA_VISIBLE_DEVICES": "-1", "NVIDIA_VISIBLE_DEVICES": "all"})
    assert not g.available and g.why == "CUDA_VISIBLE_DEVICES leaves this process no GPU"
    g = gpu(devices=[], env={"NVIDIA_VISIBLE_DEVICES": "void"})  # what NVML sees in a container given none
    assert not g.available and g.why == "NVML sees no GPU"
    devices = _three()
    devices[1]["uuid"] = "GPU-aaaa-1"
    g = gpu(devices=devices, env={"CUDA_VISIBLE_DEVICES": "GPU-aaaa"})  # the prefix of two: neither
    assert not g.available and g.notes["devices"] == "GPU-aaaa is the prefix of 2 GPUs' UUIDs"
    g = gpu(devices=_three(), env={"CUDA_VISIBLE_DEVICES": "GPU-aaaa-0,none"})
    assert [label for label, _ in g.devices] == ["GPU-aaaa-0"]


# ------------------------------------------------------------------ CUDA's device order against NVML's


@pytest.mark.parametrize("before, after", [
    ({}, "PCI_BUS_ID"),
    ({"CUDA_DEVICE_ORDER": ""}, "PCI_BUS_ID"),
    ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "PCI_BUS_ID"),
    ({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, "FASTEST_FIRST"),  # the user's word is kept (and noted)
])
def test_the_workers_get_pci_order_where_it_is_unset(before, after):
    from rig.common import gpu as gpu_mod

    env = dict(before, CUDA_VISIBLE_DEVICES="1")
    assert gpu_mod.with_pci_order(env) is env and env == dict(before, CUDA_VISIBLE_DEVICES="1", CUDA_DEVICE_ORDER=after)
    assert gpu_mod.device_order(env) == (after, after)
    assert gpu_mod.device_order({}) == ("FASTEST_FIRST", None)  # CUDA's default, where the rig did not set it


def test_a_runtimes_worker_environment_sets_pci_order_and_keeps_the_users():
    from rig.contract.runtime import EmbeddedRuntime

    rt = EmbeddedRuntime("embedded-x", "2.51.0", "/nowhere", "/nowhere/lib.so", "/nowhere/backends")
    assert rt.worker_env({"PATH": "/bin"})["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert rt.worker_env({"PATH": "/bin", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"})["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"
    assert "NVIDIA_VISIBLE_DEVICES" not in rt.worker_env({"PATH": "/bin"})  # nothing of the container runtime's


@pytest.mark.parametrize("order", [None, "FASTEST_FIRST", "fastest"])
def test_an_order_other_than_pci_is_noted_where_nvml_sees_several_gpus(order):
    env = {"CUDA_VISIBLE_DEVICES": "1"} | ({"CUDA_DEVICE_ORDER": order} if order is not None else {})
    g = probes.Gpu(FakeNvml(devices=_three()), environ=env, pid_namespace=False)
    assert [label for label, _ in g.devices] == ["GPU 1"]  # NVML's GPU 1: what CUDA calls 1 under PCI_BUS_ID
    said = g.notes["order"]
    assert said.startswith(f"CUDA_DEVICE_ORDER is {order or 'unset'}: CUDA numbers the GPUs fastest first, NVML by "
                           "PCI bus id")
    assert g.survey()["order"] == said  # into the run's gpu_notes
    from rig.workflows.doctor import gpu_lines

    assert f"gpu         order: {said}" in gpu_lines(g)
    one = probes.Gpu(FakeNvml(), environ={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, pid_namespace=False)
    assert "order" not in one.notes  # one GPU: no order to differ


def test_bus_ids_read_as_cuda_writes_them_and_a_slice_gives_its_gpus():
    from rig.common import gpu as gpu_mod

    assert gpu_mod.pci_bus_id("0000:1B:00.0") == gpu_mod.pci_bus_id(b"00000000:1b:00.0") == "0000:1b:00.0"
    assert gpu_mod.pci_bus_id("not a bus") is None and gpu_mod.pci_bus_id(None) is None
    g = gpu(devices=_three(), env={"CUDA_VISIBLE_DEVICES": "2,0"})
    assert g.bus_ids() == ["0000:1a:00.0", "0000:18:00.0"]
    devices = [dict(uuid="GPU-aaaa", name="Fake A100", used=5 * MIB, util=1, procs={}, bus="00000000:3B:00.0"),
               dict(uuid="MIG-bbbb-slice", name="Fake A100 MIG 1g.5gb", used=2 * MIB, util=0, procs={})]
    g = gpu(devices=devices, env={"CUDA_VISIBLE_DEVICES": "MIG-bbbb"}, mig={1}, mig_mode={0}, slices={0: [1]})
    assert g.bus_ids() == ["0000:3b:00.0"] and "pci" not in g.notes
    g = gpu(devices=_three(), fail={"nvmlDeviceGetPciInfo": pynvml.NVML_ERROR_NOT_SUPPORTED})
    assert g.bus_ids() == [None, None, None] and g.notes["pci"] == "NOT_SUPPORTED on GPU 0"


# ------------------------------------------------------------------ one error at a time


def test_a_working_fake_reads_every_figure():
    g = gpu(devices=_three())
    assert g.memory_used() == 6 * MIB and g.utilization() == pytest.approx(20.0)
    assert g.notes == {}


@pytest.mark.parametrize("fn, probe, read", [
    ("nvmlDeviceGetMemoryInfo", "memory", lambda g: g.memory_used()),
    ("nvmlDeviceGetUtilizationRates", "utilization", lambda g: g.utilization()),
])
@pytest.mark.parametrize("code, reason", [
    (pynvml.NVML_ERROR_NOT_SUPPORTED, "NOT_SUPPORTED on GPU 0"),
    (pynvml.NVML_ERROR_GPU_IS_LOST, "GPU_IS_LOST on GPU 0"),
    (pynvml.NVML_ERROR_UNKNOWN, "UNKNOWN on GPU 0"),
])
def test_a_figure_nvml_cannot_read_is_none_and_its_reason_is_noted_once(fn, probe, read, code, reason):
    nvml = FakeNvml(fail={fn: code})
    g = gpu(nvml)
    assert read(g) is None
    assert read(g) is None  # asked again: still None, still one note
    assert g.notes == {probe: reason}
    assert nvml.calls[fn] == 2  # the figure is asked each time (a lost GPU may come back), only noted once
    other = g.utilization() if probe == "memory" else g.memory_used()
    assert other is not None  # one probe's failure is no other's


def test_one_unreadable_device_makes_the_figure_none_rather_than_a_partial_sum():
    nvml = FakeNvml(devices=_three())
    g = gpu(nvml)
    assert g.memory_used() == 6 * MIB
    real = nvml.nvmlDeviceGetMemoryInfo
    nvml.nvmlDeviceGetMemoryInfo = lambda h: real(h) if h != 1 else (_ for _ in ()).throw(
        err(pynvml.NVML_ERROR_GPU_IS_LOST))
    assert g.memory_used() is None and g.notes == {"memory": "GPU_IS_LOST on GPU 1"}


def test_a_mig_device_says_mig_where_nvml_does_not_support_a_figure():
    g = gpu(fail={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED}, mig={0})
    assert g.utilization() is None and g.memory_used() == 1 * MIB  # a MIG slice's memory reads
    assert g.notes["utilization"].startswith("MIG: GPU 0 is a MIG device or in MIG mode")
    assert "NOT_SUPPORTED" in g.notes["utilization"]
    # a whole GPU in MIG mode (no visible variable: NVML's GPUs, not their slices)
    g = gpu(fail={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED}, mig_mode={0})
    assert g.utilization() is None and g.notes["utilization"].startswith("MIG: ")


def test_a_mig_uuid_opens_the_slice():
    devices = [dict(uuid="GPU-aaaa", name="Fake A100", used=5 * MIB, util=1, procs={}),
               dict(uuid="MIG-bbbb-slice", name="Fake A100 MIG 1g.5gb", used=2 * MIB, util=0, procs={})]
    # a prefix: matched among the slices of every GPU in MIG mode
    g = gpu(devices=devices, env={"CUDA_VISIBLE_DEVICES": "MIG-bbbb"}, mig={1}, mig_mode={0}, slices={0: [1]},
            fail={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED})
    assert [label for label, _ in g.devices] == ["MIG-bbbb"] and g.name == "Fake A100 MIG 1g.5gb"
    assert g.memory_used() == 2 * MIB and g.utilization() is None and g.notes["utilization"].startswith("MIG: ")


@pytest.mark.parametrize("code, why", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML unavailable: LIBRARY_NOT_FOUND"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVML unavailable: DRIVER_NOT_LOADED"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "NVML unavailable: NO_PERMISSION"),
])
def test_an_nvml_that_cannot_start_leaves_no_gpu_and_says_why_once(code, why):
    g = gpu(init_fails=code)
    assert not g.available and g.why == why and g.name is None
    for _ in range(2):
        assert g.memory_used() is None and g.utilization() is None and g.process_memory() == {}
        assert g.memory_of([os.getpid()]) == probes.GpuMemory()
    assert g.notes == {"init": why} and g.survey() == {"init": why}


def test_no_nvidia_ml_py_says_so(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pynvml(name, *a, **k):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    g = probes.Gpu()
    assert not g.available and g.why == "nvidia-ml-py is not installed"
    assert g.notes == {"init": "nvidia-ml-py is not installed"} and g.memory_used() is None


def test_a_name_nvml_cannot_read_is_the_devices_label():
    g = gpu(fail={"nvmlDeviceGetName": pynvml.NVML_ERROR_NOT_SUPPORTED})
    assert g.available and g.name == "GPU 0" and g.notes == {"name": "NOT_SUPPORTED on GPU 0"}


# ------------------------------------------------------------------ per-process memory and its fallback


def _with_procs(procs: dict, used=7 * MIB):
    return [dict(uuid="GPU-aaaa", name="Fake GPU", used=used, util=0, procs=procs)]


def test_the_processes_own_memory_where_their_pids_are_listed():
    me = os.getpid()
    two = _with_procs({me: 3 * MIB, 999_999: 1 * MIB}) + _with_procs({me: 3 * MIB, 999_999: 1 * MIB})
    two[1]["uuid"] = "GPU-bbbb"  # two GPUs, each its own UUID (one UUID twice is one GPU named twice)
    g = gpu(devices=two)
    got = g.memory_of([me, 12345])
    assert got == probes.GpuMemory("process", {me: 6 * MIB})  # summed over the two devices
    assert g.notes == {}


def test_pids_that_do_not_match_fall_back_to_the_devices_used_memory():
    g = gpu(devices=_with_procs({999_998: 3 * MIB, 999_999: 1 * MIB}))
    for _ in range(2):
        assert g.memory_of([os.getpid()]) == probes.GpuMemory("device", {}, 7 * MIB)
    assert list(g.notes) == ["process_memory"] and "none of the processes asked" in g.notes["process_memory"]


def test_a_process_list_nvml_cannot_give_falls_back_to_the_devices():
    g = gpu(fail={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NOT_SUPPORTED})
    assert g.memory_of([os.getpid()]) == probes.GpuMemory("device", {}, 1 * MIB)
    assert g.process_memory() == {}
    assert g.notes == {"processes": "NOT_SUPPORTED on GPU 0"}
    # and with the devices' memory unreadable too: nothing read, two reasons
    g = gpu(fail={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NOT_SUPPORTED,
                  "nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_NOT_SUPPORTED})
    assert g.memory_of([os.getpid()]) == probes.GpuMemory()
    assert set(g.notes) == {"processes", "memory"}


def test_inside_a_pid_namespace_the_devices_are_read_without_asking_for_processes():
    nvml = FakeNvml(devices=_with_procs({os.getpid(): 3 * MIB}))  # a host PID that happens to be ours
    g = gpu(nvml, pid_namespace=True)
    assert g.memory_of([os.getpid()]) == probes.GpuMemory("device", {}, 7 * MIB)
    assert "PID namespace" in g.notes["process_memory"]
    assert "nvmlDeviceGetComputeRunningProcesses" not in nvml.calls


def test_a_source_once_read_is_kept():
    me = os.getpid()
    g = gpu(devices=_with_procs({}))
    assert g.memory_of([me]) == probes.GpuMemory()  # no process on the GPU yet: nothing to match
    g._nvml.devs[0]["procs"] = {me: 2 * MIB}
    assert g.memory_of([me]).source == "process"
    g._nvml.devs[0]["procs"] = {999_999: 2 * MIB}
    assert g.memory_of([me], "process") == probes.GpuMemory("process", {})  # not a switch mid-series
    assert g.memory_of([me], "device") == probes.GpuMemory("device", {}, 7 * MIB)


def test_the_pid_namespace_is_read_from_nspid_else_from_inits_sched(tmp_path):
    (tmp_path / "self").mkdir()
    (tmp_path / "1").mkdir()
    status = tmp_path / "self" / "status"
    status.write_text("Name:\tpython\nNSpid:\t4242\t17\n")
    assert probes.in_pid_namespace(tmp_path)
    status.write_text("Name:\tpython\nNSpid:\t4242\n")
    assert not probes.in_pid_namespace(tmp_path)
    status.write_text("Name:\tpython\n")  # a kernel before 4.1
    (tmp_path / "1" / "sched").write_text("bash (31337, #threads: 1)\n----\n")
    assert probes.in_pid_namespace(tmp_path)
    (tmp_path / "1" / "sched").write_text("systemd (1, #threads: 1)\n----\n")
    assert not probes.in_pid_namespace(tmp_path)
    assert not probes.in_pid_namespace(tmp_path / "nowhere")
    assert isinstance(probes.in_pid_namespace(), bool)


def test_survey_reads_every_figure_once_for_the_run_row():
    g = gpu(fail={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED,
                  "nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NOT_SUPPORTED}, mig={0})
    notes = g.survey()
    assert set(notes) == {"utilization", "processes"} and all(v.startswith("MIG: ") for v in notes.values())
    assert json.loads(json.dumps(notes)) == notes


# ------------------------------------------------------------------ the worker's paths complete


@pytest.fixture
def failing_gpu(monkeypatch):
    """The worker's one probe (``probes.gpu()``) on an NVML that supports nothing but the memory
    of the devices and lists only other hosts' PIDs, as in a container on a vGPU."""
    g = gpu(devices=_with_procs({999_999: 1 * MIB}),
            fail={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED})
    monkeypatch.setattr(probes, "_GPU", g)
    return g


def test_a_window_closes_with_a_failing_nvml(failing_gpu):
    from rig.worker.load.windows import Window

    w = Window(0, 0.0)
    w.requests = 10
    for lost in (False, True):
        if lost:
            failing_gpu._nvml.fail["nvmlDeviceGetMemoryInfo"] = pynvml.NVML_ERROR_GPU_IS_LOST
        row = w.row(1.0, cycle=1)
        assert row["gpu_utilization"] is None and row["requests"] == 10
        assert row["gpu_memory_bytes"] == (None if lost else 7 * MIB)
    assert failing_gpu.notes == {"utilization": "NOT_SUPPORTED on GPU 0", "memory": "GPU_IS_LOST on GPU 0"}


def test_the_growth_sampler_reads_the_devices_where_pids_do_not_match(failing_gpu):
    """``ProcessMemory`` through a paced load (a sample each tick): its GPU series is the device's
    used memory, growing 1 MiB a sample, and the cycle row says it read the device."""
    from rig.worker import observers

    pm = observers.ProcessMemory()
    sent = []
    ctx = observers.Context(engine=None, spec=None, inputs={}, cycle=1, unload_all=lambda t: None,
                            send=sent.append, paced=True)
    pm.load_started(ctx)
    ctx.t_load = pm_t0 = time.monotonic()
    for k in range(10):
        failing_gpu._nvml.devs[0]["used"] = 100 * MIB + k * MIB
        pm.tick(ctx)
        pm.samples[-1]["t"] = pm_t0 + k + 0.5  # a fake clock: one sample a second, inside its window
    ctx.windows = [dict(requests=100, errors=0, monotonic_end=pm_t0 + k + 1) for k in range(10)]
    ctx.t_load_end = pm_t0 + 10
    row = {"requests": 1000}
    pm.load_ended(ctx, row)
    assert row["gpu_memory_source"] == "device"
    assert row["gpu_growth_per_1k_b"] == pytest.approx(10 * MIB)  # 1 MiB per 100 requests
    assert all(s["gpu_bytes"] is None and "device_gpu_bytes" not in s for s in sent[0].rows)
    assert "none of the processes asked" in failing_gpu.notes["process_memory"]


def test_the_growth_sampler_without_any_gpu_records_no_source(monkeypatch):
    from rig.worker import observers

    monkeypatch.setattr(probes, "_GPU", gpu(init_fails=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    pm = observers.ProcessMemory()
    ctx = observers.Context(engine=None, spec=None, inputs={}, cycle=1, unload_all=lambda t: None, paced=True)
    pm.load_started(ctx)
    pm.tick(ctx)
    row = {"requests": 10}
    pm.load_ended(ctx, row)
    assert "gpu_memory_source" not in row and "gpu_growth_per_1k_b" not in row


def test_the_soaks_summary_says_which_gpu_memory_it_read():
    from helpers import cycle_row

    from rig.workflows.tally import Tally, summary_table

    rows = [cycle_row(k, gpu_growth_per_1k_b=2000.0 * k, gpu_memory_source="device") for k in (1, 2, 3)]
    said = summary_table(Tally(rows))
    assert ("memory        gpu: median +4.0 KB per 1,000 requests (max +6.0), read from each visible device's "
            "used memory (NVML's PIDs could not match the cycle's)") in said.splitlines()
    said = summary_table(Tally([cycle_row(1, gpu_growth_per_1k_b=-1000.0, gpu_memory_source="process")]))
    assert "memory        gpu: median -1.0 KB per 1,000 requests (max -1.0), read from the cycle's processes by PID" in said
    assert "gpu:" not in summary_table(Tally([cycle_row(1)]))  # no GPU figure, no line


def test_survey_asks_for_the_process_list_but_matches_no_pid():
    g = gpu(devices=_with_procs({999_999: 1 * MIB}))
    assert g.survey() == {}  # the parent is on no GPU: that says nothing of the worker's processes
    g = gpu(devices=_with_procs({999_999: 1 * MIB}), pid_namespace=True)
    assert list(g.survey()) == ["process_memory"] and "PID namespace" in g.notes["process_memory"]



def test_doctor_says_which_gpu_figures_will_be_null_and_why():
    """`rig doctor`'s GPU lines on a GPU whose utilisation NVML does not support (a vGPU): one line
    for it. (``doctor.gpu_lines``: the whole report imports Locust, which patches this process.)"""
    from rig.workflows.doctor import gpu_lines

    lines = gpu_lines(gpu(fail={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_NOT_SUPPORTED}))
    assert lines[0] == "gpu         NVML: Fake GPU"
    assert len(lines) == 2 and "null (" in lines[1] and "NOT_SUPPORTED" in lines[1], lines
    assert gpu_lines(gpu(init_fails=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))[0].startswith("gpu         none: ")


# ------------------------------------------------------------------ the CuPy check (rig doctor's, the runs')

# A stand-in for CuPy, numpy behind it: only what rig.common.gpu.cupy_check asks of CuPy, each step
# able to fail as a CuPy without that library does. Loaded into this process (the check's logic)
# and, as a package on PYTHONPATH, into the child the rig asks (rig.parent.preflight.cupy_usable).
STANDIN = '''
import os
import signal
import types

import numpy as _np

__version__ = "14.2.0+standin"
FAIL = {}  # step -> the exception CuPy raises there: count, copy, kernel, cublas; "values": wrong results
_mode = os.environ.get("STANDIN_MODE", "")
if _mode == "import":
    raise ImportError("numpy.core.multiarray failed to import")


class CompileException(Exception):  # CuPy's own class (cupy.cuda.compiler), no RuntimeError
    pass


def _step(name):
    if name in FAIL:
        raise FAIL[name]


def _device_count():
    if _mode == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    _step("count")
    return FAIL.get("devices", 1)


def asarray(a):
    _step("copy")
    return _np.array(a)


def asnumpy(a):
    return _np.array(a) * (0 if "values" in FAIL else 1)


def ElementwiseKernel(in_params, out_params, operation, name):
    _step("kernel")
    return lambda x: x * 2 + 1


def _cublas_handle():
    _step("cublas")
    return 1234


cuda = types.SimpleNamespace(
    runtime=types.SimpleNamespace(getDeviceCount=_device_count, runtimeGetVersion=lambda: 13000,
                                  driverGetVersion=lambda: 13010),
    nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0)),
    cublas=types.SimpleNamespace(getVersion=lambda handle: 130100),
    device=types.SimpleNamespace(get_cublas_handle=_cublas_handle),
    compiler=types.SimpleNamespace(CompileException=CompileException),
)
'''


def standin(**fail) -> types.ModuleType:
    mod = types.ModuleType("cupy")
    exec(STANDIN, mod.__dict__)
    mod.FAIL.update(fail)
    return mod


NO_NVRTC = RuntimeError("CuPy failed to load libnvrtc.so.13: OSError: libnvrtc.so.13: cannot open shared object "
                        "file")
NO_CUBLAS = RuntimeError("CuPy failed to load libcublas.so.13: OSError: libcublas.so.13: cannot open shared object "
                         "file")
HEAD = "CuPy 14.2.0+standin (CUDA runtime 13.0, driver 13.1), 1 CUDA device(s)"


@pytest.mark.parametrize("fail, ok, why", [
    ({}, True, f"{HEAD}: a kernel compiled (NVRTC 13.0) and a matmul run (cuBLAS 13.1.0), each read back right"),
    ({"kernel": NO_NVRTC}, False, (f"{HEAD}, but NVRTC: a kernel did not compile or run (RuntimeError: CuPy failed "
                                   "to load libnvrtc.so.13: OSError: libnvrtc.so.13: cannot open shared object file)")),
    ({"cublas": NO_CUBLAS}, False, (f"{HEAD}, but cuBLAS: a matmul did not run (RuntimeError: CuPy failed to load "
                                    "libcublas.so.13: OSError: libcublas.so.13: cannot open shared object file)")),
    ({"kernel": None, "cublas": NO_CUBLAS}, False, None),  # both named, in one line (the kernel's filled below)
    ({"values": True}, False, (f"{HEAD}, but an array copied to the device and back reads [0.0, 0.0, 0.0, 0.0], "
                               "not [0.0, 1.0, 2.0, 3.0]")),
    ({"copy": RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")}, False,
     (f"{HEAD}, but CUDA cannot copy an array to the device and back (RuntimeError: cudaErrorInsufficientDriver: "
      "CUDA driver version is insufficient)")),
    ({"count": RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")}, False,
     "no CUDA device (CuPy 14.2.0+standin: RuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected)"),
    ({"devices": 0}, False, "no CUDA device (CuPy 14.2.0+standin)"),
])
def test_the_cupy_check_names_the_library_that_fails(fail, ok, why):
    from rig.common.gpu import cupy_check

    cp = standin(**fail)
    if "kernel" in fail and fail["kernel"] is None:
        cp.FAIL["kernel"] = cp.CompileException("rig_cupy_check.cu(3): catastrophic error: cannot open source file "
                                                "\"cuda_fp16.h\"\n1 catastrophic error detected")
        why = (f"{HEAD}, but NVRTC: a kernel did not compile or run (CompileException: rig_cupy_check.cu(3): "
               "catastrophic error: cannot open source file \"cuda_fp16.h\"); cuBLAS: a matmul did not run "
               "(RuntimeError: CuPy failed to load libcublas.so.13: OSError: libcublas.so.13: cannot open shared "
               "object file)")
    assert cupy_check(cp) == {"ok": ok, "installed": True, "why": why}


def test_the_cupy_check_checks_each_result():
    from rig.common.gpu import cupy_check

    cp = standin()
    cp.ElementwiseKernel = lambda *a: (lambda x: x * 0)  # compiles, runs, gives the wrong answer
    real = cp.asarray
    cp.asarray = lambda a: real(a).T if getattr(a, "ndim", 1) == 2 else real(a)  # a matmul of the wrong operand
    said = cupy_check(cp)
    assert not said["ok"]
    assert said["why"] == (f"{HEAD}, but NVRTC: a kernel compiled and ran, but gave [0.0, 0.0, 0.0, 0.0], not "
                           "[1.0, 3.0, 5.0, 7.0]; cuBLAS: a matmul ran, but gave [[7.0, 15.0], [10.0, 22.0]], not "
                           "[[7.0, 10.0], [15.0, 22.0]]")


def test_the_cupy_check_without_cupy_says_so_in_one_line():
    from rig.common.gpu import cupy_check
    from rig.parent import preflight

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here: this is the check on a machine without it")
    assert cupy_check() == {"ok": False, "installed": False, "why": "CuPy is not installed (No module named 'cupy')"}
    assert preflight.cupy_usable() == (False, "CuPy is not installed (No module named 'cupy')")


@pytest.mark.parametrize("mode, ok, why", [
    ("", True, f"{HEAD}: a kernel compiled (NVRTC 13.0) and a matmul run (cuBLAS 13.1.0), each read back right"),
    ("import", False, "CuPy does not import: ImportError: numpy.core.multiarray failed to import"),
    ("segv", False, "the CuPy check's process was killed by SIGSEGV"),
])
def test_the_rig_asks_the_cupy_check_of_a_child(tmp_path, monkeypatch, mode, ok, why):
    """``cupy_usable`` runs the check in a child (``python -m rig.common.gpu``) under the worker's
    device order: a CuPy that does not import, or crashes, is one line, never a traceback."""
    from rig.parent import preflight

    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(STANDIN)
    monkeypatch.syspath_prepend(str(tmp_path))  # found here, imported only in the child
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("STANDIN_MODE", mode)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setattr(preflight, "_CUPY_CHECKS", {})
    got_ok, got_why = preflight.cupy_usable()
    assert got_ok is ok and "\n" not in got_why and "Traceback" not in got_why
    assert got_why.startswith(why) if mode == "segv" else got_why == why
    if ok:
        assert preflight._CUPY_CHECKS == {(None, "PCI_BUS_ID"): (ok, why)}  # asked once per devices and order
