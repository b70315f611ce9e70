"""The rig's CuPy model: OUTPUT = INPUT @ W on the GPU; the output leaves from GPU memory by DLPack.

The same parameters as the numpy model (see models/numpy/1/model.py). An input may arrive in either
memory: the config sets FORCE_CPU_ONLY_INPUT_TENSORS to "no", which lets the Python backend pass an
input where it already is, and does not move a CPU input to the GPU (CuPy refuses a CPU DLPack
tensor). So each input is asked where it is (``is_cpu()``):
- in GPU memory (the rig's ``--input-memory gpu``): used in place, through DLPack;
- in CPU memory: read by DLPack (never through the stub's own numpy arrays), copied to this
  instance's device once, and the copy counted.
The counts (``input_copies``, ``inputs_in_place``) go to the rig's evidence folder, where the stub
has one (``RIG_EVIDENCE_DIR``), at most once a second and at finalize; the cycle records them.

The output goes to the backend as an object that speaks DLPack (``_Export``), never as a capsule
made here. Every python_backend the rig runs (PR #223, 2023: 2.36 on) then asks ``__dlpack__`` itself,
with its own CUDA stream and without ``max_version``, and synchronizes that stream before it reads the
data. Without ``max_version`` CuPy 13 and 14 both give the unversioned ``"dltensor"`` capsule, the only
kind the backend can read: ``PbTensor::FromDLPackCapsule`` casts any capsule to ``DLManagedTensor``
without looking at its name, so the DLPack 1.0 ``"dltensor_versioned"`` capsule that CuPy 14's
``toDlpack()`` gives by default is read at the wrong offsets and the stub dies at its first output.
``_Export`` checks the capsule's name and raises (an error response, not a dead stub) on any other.
"""

import ctypes
import json
import os
import time

_EVIDENCE_DIR = os.environ.get("RIG_EVIDENCE_DIR")
_COUNTS_EVERY_S = 1.0

import cupy as cp
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        self.size = int(params.get("size", "4"))
        self.delay_s = float(params.get("execute_delay_ms", "0")) / 1000.0
        self.finalize_mode = params.get("finalize", "ok")
        self.finalize_sleep_s = float(params.get("finalize_sleep_s", "3600"))
        self.exit_after = int(params.get("exit_after", "0"))
        self.raise_every = int(params.get("raise_every", "0"))
        self.leak_bytes = int(params.get("leak_bytes", "0"))
        self.leaked = []
        self.executed = 0
        if int(params.get("leak_per_load_bytes", "0")):  # as the numpy model's (models/numpy/1/model.py)
            name = f"rig-leak-{os.getppid()}-{os.getpid()}-{args.get('model_instance_name', 'm')}"
            with open(os.path.join("/dev/shm", "".join(c if c.isalnum() or c in "-_." else "_" for c in name)),
                      "wb") as f:
                f.write(b"\x01" * int(params["leak_per_load_bytes"]))
        if float(params.get("load_sleep_s", "0")):
            time.sleep(float(params["load_sleep_s"]))
        if params.get("fail_load", "0") == "1":
            raise pb_utils.TritonModelException("fault injection: this model fails to load")
        self.instance = str(args.get("model_instance_name", "m"))
        self.input_copies = 0     # CPU inputs copied to the device
        self.inputs_in_place = 0  # GPU inputs used where they were
        self.counts_written = 0.0
        device = int(args.get("model_instance_device_id", "0"))
        self.device = cp.cuda.Device(device)
        with self.device:
            n = self.size
            self.weight = (cp.arange(n * n, dtype=cp.float32).reshape(n, n) / (n * n)).astype(cp.float32)

    def execute(self, requests):
        self.executed += 1
        if self.exit_after and self.executed >= self.exit_after:
            os._exit(17)
        if self.raise_every and self.executed % self.raise_every == 0:
            # fault injection: execute raises (server#7481 class: the model can stay loaded)
            raise ValueError(f"fault injection: execute raises (call {self.executed})")
        if self.delay_s:
            time.sleep(self.delay_s)
        responses = []
        with self.device:
            for request in requests:
                x = self.on_device(pb_utils.get_input_tensor_by_name(request, "INPUT"))
                y = cp.matmul(x, self.weight)
                if self.leak_bytes:
                    self.leaked.append(cp.empty(self.leak_bytes, dtype=cp.uint8))
                out = pb_utils.Tensor.from_dlpack("OUTPUT", _Export(y))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        if _EVIDENCE_DIR and time.monotonic() - self.counts_written >= _COUNTS_EVERY_S:
            self.write_counts()
        return responses

    def on_device(self, tensor):
        """The input as a CuPy array on this instance's device: in place where it is in GPU memory,
        else copied there (once, counted)."""
        if tensor.is_cpu():
            self.input_copies += 1
            return cp.asarray(_host_array(tensor))
        self.inputs_in_place += 1
        x = cp.from_dlpack(tensor.to_dlpack())  # the backend's capsules are unversioned
        # an input on another device than this instance's (a GPU the rig chose): moved, and counted
        if x.device.id != self.device.id:
            self.input_copies += 1
            x = cp.asarray(x)
        return x

    def write_counts(self):
        """Where the inputs were, so far, as a marker in the rig's evidence folder (replaced whole)."""
        self.counts_written = time.monotonic()
        record = {"pid": os.getpid(), "instance": self.instance, "phase": "memory",
                  "input_copies": self.input_copies, "inputs_in_place": self.inputs_in_place,
                  "t_mono": self.counts_written}
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.instance)
        final = os.path.join(_EVIDENCE_DIR, f"{os.getpid()}-{safe}-memory.json")
        try:
            with open(final + ".tmp", "w") as f:
                json.dump(record, f)
            os.replace(final + ".tmp", final)
        except OSError:
            pass  # evidence is best effort: never fail a request for it

    def finalize(self):
        if _EVIDENCE_DIR:
            self.write_counts()
        if self.finalize_mode == "raise":
            raise RuntimeError("fault injection: finalize raises")
        if self.finalize_mode == "sleep":
            time.sleep(self.finalize_sleep_s)


def _host_array(tensor):
    """A CPU input as a numpy array by DLPack, not ``as_numpy()``: the stubs of the embedded cores
    (pybind11 2.10) hand numpy 2 arrays of 0 bytes, and CuPy 14 needs numpy 2 in the stub."""
    try:
        return np.from_dlpack(tensor)
    except (AttributeError, TypeError, BufferError):  # a backend whose Tensor is no DLPack producer
        return tensor.as_numpy()


# PyCapsule_IsValid(capsule, name): 1 when the capsule holds a pointer under exactly that name
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.argtypes = (ctypes.py_object, ctypes.c_char_p)
_capsule_is_valid.restype = ctypes.c_int


class _Export:
    """A CuPy array as the backend's ``Tensor.from_dlpack`` should meet it: ``__dlpack_device__`` as
    the array's, and ``__dlpack__`` with only the arguments the backend gives (its stream), whose
    capsule must be the unversioned one. A producer that answers with anything else (a DLPack 1.0
    capsule without being asked for one) is refused here: the backend would misread it and the stub
    would die, taking the model's other requests and its finalize with it."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, stream=None):
        capsule = self.array.__dlpack__(stream=stream)
        if not _capsule_is_valid(capsule, b"dltensor"):
            raise BufferError(
                "the output's DLPack capsule is not an unversioned 'dltensor', the only kind "
                "python_backend reads (PbTensor::FromDLPackCapsule does not check the name)"
            )
        return capsule
