"""The ``dlpack-versioned`` scenario (issue 62, found here: python_backend's
``PbTensor::FromDLPackCapsule`` casts any capsule to the unversioned ``DLManagedTensor``). Its
definition and its model's fault switch; the model's two capsules, made with ctypes, read back
right by a consumer that checks the name (numpy 2's ``from_dlpack``) and read wrong the way the
backend reads them, whatever numpy the stub has (fast); the scenario and its control on the
embedded core through the C API, each cycle's verdicts those the deleter's address decides, and
its reproducer run on its own (slow)."""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from helpers import cycles, rig

from rig.scenarios import catalog as scenarios
from rig.scenarios import setup as scenario_setup

NAME = "dlpack-versioned"
NO_RIG_IMPORT = re.compile(r"^\s*(import\s+rig\b|from\s+rig\b)", re.M)
DELETER_SAID = re.compile(r"normalizer: (DLPack 1\.0 capsules|unversioned capsules).*its low half as an int32 (-?\d+)")


def _model():
    """The scenario's model.py, imported as a module (its ``triton_python_backend_utils`` a stand-in:
    only the capsules are tried here)."""
    s = scenarios.get(NAME)
    path = scenario_setup.repository_of(s) / "normalizer" / "1" / "model.py"
    sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
    spec = importlib.util.spec_from_file_location("dlpack_versioned_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def test_it_is_listed_with_its_models_its_control_and_what_it_shows(tmp_path):
    s = scenarios.get(NAME)
    assert s.repository == NAME and s.has_control and s.client == "none" and s.shapes == ("unbatched",)
    assert s.expected == ("exit_timeout", "errors") and s.upstream[0].startswith("found here")
    assert "dltensor_versioned" in s.what and "its control" in s.what
    for control in (False, True):
        dest = scenario_setup.materialize(scenario_setup.repository_of(s), tmp_path / str(control), control, "unbatched")
        text = (dest / "normalizer" / "config.pbtxt").read_text()
        assert f'string_value: "{"off" if control else "on"}"' in text


def test_the_model_stands_alone():
    _, path = _model()
    text = path.read_text()
    assert not NO_RIG_IMPORT.search(text) and "max_version" not in text.split('"""', 2)[2]
    imports = set(re.findall(r"^import (\w+)", text, re.M)) | set(re.findall(r"^from (\w+)", text, re.M))
    assert imports == {"ctypes", "json", "numpy", "triton_python_backend_utils"}


def test_the_layouts_are_dlpack_1_0s():
    m, _ = _model()
    assert ctypes.sizeof(m.DLTensor) == 48 and ctypes.sizeof(m.DLManagedTensor) == 64
    assert ctypes.sizeof(m.DLManagedTensorVersioned) == 80
    assert m.DLManagedTensorVersioned.dl_tensor.offset == 32  # after version, manager_ctx, deleter, flags
    assert m.DLManagedTensor.deleter.offset == 56


class _Exported:
    """An array library's object over a capsule: what numpy's from_dlpack takes."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def _address(capsule) -> int:
    """The struct a capsule holds (DLManagedTensor or DLManagedTensorVersioned), by its own name."""
    name, pointer = ctypes.pythonapi.PyCapsule_GetName, ctypes.pythonapi.PyCapsule_GetPointer
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return pointer(capsule, name(capsule))


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.1.0", reason="numpy's from_dlpack takes DLPack 1.0 from 2.1")
@pytest.mark.parametrize("versioned", [False, True])
def test_both_capsules_read_back_right_where_the_name_is_checked(versioned):
    """numpy 2's from_dlpack checks the name and reads either struct as what it is: the same values,
    the same memory, and the producer's deleter called once the consumer lets go."""
    m, _ = _model()
    source = np.array([3.0, 4.0, 0.0, 12.0], dtype=np.float32)
    capsule = m.to_capsule(source, versioned)
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    assert name(capsule) == (b"dltensor_versioned" if versioned else b"dltensor")
    address = _address(capsule)
    held = m._LIVE[address][2]
    got = np.from_dlpack(_Exported(capsule))
    assert got.tolist() == source.tolist() and got.ctypes.data == held.ctypes.data
    del got, capsule
    gc.collect()
    assert address not in m._LIVE


def test_the_backends_cast_reads_ndim_from_the_deleter_and_shape_from_the_flags():
    """What ``static_cast<DLManagedTensor*>`` reads of the versioned struct: the data pointer its
    version (1.0: 1), ndim the low half of the deleter's address (as the model says at initialize),
    shape NULL (the flags), strides the real data."""
    m, _ = _model()
    capsule = m.to_capsule(np.ones(4, dtype=np.float32), True)
    address = _address(capsule)
    misread = m.DLManagedTensor.from_address(address).dl_tensor
    deleter = ctypes.cast(m._DELETER, ctypes.c_void_p).value
    assert misread.data == 1 and misread.ndim == ctypes.c_int32(deleter & 0xFFFFFFFF).value
    assert not misread.shape and ctypes.cast(misread.strides, ctypes.c_void_p).value == m._LIVE[address][2].ctypes.data
    m._release(address)


def _soak(tmp_path, *extra, cycles_n=1):
    results = tmp_path / ("off" if extra else "on")
    proc = rig("soak", "--scenario", NAME, *extra, "--cycles", str(cycles_n), "--exit-timeout", "3",
               "--request-timeout", "5", "--engine", "capi", "--results", str(results), timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    c = cycles(results).sort_values("cycle")
    assert len(c) == cycles_n and set(c.scenario) == {NAME} and set(c.control) == {bool(extra)}
    logs = sorted((results / "_work").glob("*/logs/worker-*.log"))
    assert len(logs) == cycles_n, logs
    said = [DELETER_SAID.findall(p.read_text()) for p in logs]
    return c, said


@pytest.mark.slow
def test_the_scenario_follows_its_deleters_address_and_its_control_is_clean(tmp_path):
    """Each cycle's stub draws where its deleter lies: a positive low half copies the shape from NULL
    (SIGSEGV: the model stays loaded, the stop waits out the exit timeout, finalize never runs, its
    region is left), a negative one makes from_dlpack raise (every request fails, the stop is
    clean). No output comes back either way. The control's unversioned capsule is clean."""
    c, said = _soak(tmp_path, cycles_n=3)
    for (_, row), draws in zip(c.iterrows(), said):
        assert draws and {kind for kind, _ in draws} == {"DLPack 1.0 capsules"}, draws
        ndim = int(draws[0][1])
        assert row.load_outcome == "errors" and row.errors == row.requests > 0
        if ndim > 0 and "bad_alloc" not in row.detail and "MemoryError" not in row.detail:
            assert row.outcome == "exit_timeout" and row.stub_crashes >= 1, row.detail
            assert row.finalize_before_stop == 0 and row.shm_regions_leaked >= 1
            assert "is not healthy" in row.detail
        else:  # std::length_error (or, where the machine refused the allocation, std::bad_alloc)
            assert row.outcome == "clean" and not row.stub_crashes and row.finalize_before_stop == 1, row.detail
            assert "cannot create std::vector larger than max_size()" in row.detail or ndim > 0
    off, said = _soak(tmp_path, "--control")
    row = off.iloc[0]
    assert (row.outcome, row.load_outcome) == ("clean", "ok") and row.errors == 0 and not row.stub_crashes
    assert said[0][0][0] == "unversioned capsules"


@pytest.mark.slow
def test_its_reproducer_runs_on_its_own_with_env_i(tmp_path):
    """`rig repro` on the embedded default: the known verdicts (either draw), then the folder copied
    elsewhere and run with `env -i` (PATH and HOME alone); its report says where the code goes wrong."""
    from rig.parent import runtime

    runtime.resolve(runtime.DEFAULT_EMBEDDED, log=print)
    out = tmp_path / "repro"
    proc = rig("repro", "--scenario", NAME, "--runtime", "2.51.0", "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    readme = (out / "README.md").read_text()
    assert "## Where it goes wrong" in readme and "static_cast<DLManagedTensor*>(dlpack_tensor.get_pointer())" in readme
    assert "REPRODUCED" in readme and str(tmp_path) not in readme
    assert (out / "models" / "normalizer" / "1" / "model.py").read_text().startswith('"""Scenario `dlpack-versioned`')
    fresh = tmp_path / "fresh"
    shutil.copytree(out, fresh, symlinks=True)
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={os.environ.get('HOME', '/')}"]
    run = subprocess.run([*env, "./run.sh", "--work", str(tmp_path / "work")], cwd=fresh, capture_output=True,
                         text=True, timeout=300, check=False)
    said = run.stdout + run.stderr
    assert run.returncode == 0 and "REPRODUCED" in said, said
    ndim = int(DELETER_SAID.search(said).group(2))
    verdict = re.search(r"^verdict: (\w+).*; load: (\w+)$", said, re.M).groups()
    assert verdict[1] == "errors"
    if verdict[0] == "exit_timeout":
        assert ndim > 0 and "died of signal 11" in said and "still running" not in said
    else:
        assert verdict[0] == "clean" and "cannot create std::vector larger than max_size()" in said
    control = tmp_path / "control"
    proc = rig("repro", "--scenario", NAME, "--control", "--runtime", "2.51.0", "--out", str(control), timeout=600)
    assert proc.returncode == 0 and "observed clean (expected clean)" in proc.stdout, proc.stdout[-3000:]
    assert "## Where it goes wrong" not in (control / "README.md").read_text()
