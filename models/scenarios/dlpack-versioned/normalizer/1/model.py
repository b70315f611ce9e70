"""Scenario `dlpack-versioned` (found here: python_backend's `PbTensor::FromDLPackCapsule` never
checks a capsule's name): a model that scales its input to unit length and returns the result
through `pb_utils.Tensor.from_dlpack("OUTPUT0", capsule)`, as a model whose output comes from
CuPy or another array library does.

With `fault` "on" the capsule is a DLPack 1.0 one: named "dltensor_versioned", over a
`DLManagedTensorVersioned`, what numpy 2's `__dlpack__(max_version=(1, 0))` and CuPy 14's
`toDlpack()` hand over. python_backend casts every capsule to the unversioned `DLManagedTensor`,
whose fields lie 32 bytes further on: it reads `ndim` from the low half of the producer's deleter
address and `shape` from the flags (0: NULL). Where that half is a positive int32 it copies the
shape from NULL and the stub dies (SIGSEGV); where it is negative, `std::vector` refuses the
length and `from_dlpack` raises. Either way no output comes back; which one, the address decides
(ASLR: a draw per stub process, as for numpy's or CuPy's deleter). With "off" (the negative
control) the same array goes in an unversioned capsule ("dltensor", `DLManagedTensor`), which it
reads right.

Both capsules are made here with ctypes over the numpy array's memory (dlpack.h v1.0's layouts),
so that neither depends on numpy's version (numpy 1 has no `max_version`). The consumer calls
the producer's deleter when it is done with the tensor; the deleter releases the array.
The file stands alone: numpy, ctypes and the backend's utils."""

import ctypes
import json

import numpy as np
import triton_python_backend_utils as pb_utils

KDL_CPU = 1  # DLDeviceType kDLCPU
KDL_FLOAT = 2  # DLDataTypeCode kDLFloat
VERSIONED, UNVERSIONED = b"dltensor_versioned", b"dltensor"  # the capsule names of DLPack 1.0 and before


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*deleter)(DLManagedTensor[Versioned] *self)


class DLManagedTensor(ctypes.Structure):  # before DLPack 1.0: the capsule "dltensor"
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):  # DLPack 1.0: the capsule "dltensor_versioned"
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_LIVE = {}  # a struct's address -> (the struct, its shape, the array): held until its deleter runs


def _release(address):
    _LIVE.pop(address, None)


_DELETER = DELETER(_release)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def to_capsule(array, versioned):
    """A DLPack capsule over ``array``'s memory (float32, C order, on the CPU): DLPack 1.0's
    versioned one, or the unversioned one before it."""
    array = np.ascontiguousarray(array, dtype=np.float32)
    shape = (ctypes.c_int64 * array.ndim)(*array.shape)
    tensor = DLTensor(
        data=array.ctypes.data,
        device=DLDevice(KDL_CPU, 0),
        ndim=array.ndim,
        dtype=DLDataType(KDL_FLOAT, 32, 1),
        shape=shape,
        strides=None,  # compact, row-major
        byte_offset=0,
    )
    if versioned:
        managed = DLManagedTensorVersioned(
            version=DLPackVersion(1, 0), manager_ctx=None, deleter=_DELETER, flags=0, dl_tensor=tensor
        )
    else:
        managed = DLManagedTensor(dl_tensor=tensor, manager_ctx=None, deleter=_DELETER)
    address = ctypes.addressof(managed)
    _LIVE[address] = (managed, shape, array)
    # No capsule destructor: one written in Python would run with from_dlpack's exception pending and
    # lose it (a C one, as numpy's, saves it). Every capsule here is handed to from_dlpack, which
    # takes it and calls the deleter when done; one it refuses keeps its array (a few bytes).
    return _capsule_new(address, VERSIONED if versioned else UNVERSIONED, None)


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.versioned = params.get("fault", {}).get("string_value", "off") != "off"
        # What a reader of the versioned struct as an unversioned one takes for ndim: the low half of
        # the deleter's address, as an int32 (where positive the stub reads the shape from NULL).
        address = ctypes.cast(_DELETER, ctypes.c_void_p).value
        print(
            f"normalizer: {'DLPack 1.0 capsules (dltensor_versioned)' if self.versioned else 'unversioned capsules'}, "
            f"the deleter at {address:#x}, its low half as an int32 {ctypes.c_int32(address & 0xFFFFFFFF).value}",
            flush=True,
        )

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            y = x / max(float(np.sqrt((x * x).sum())), 1e-12)
            out = pb_utils.Tensor.from_dlpack("OUTPUT0", to_capsule(y, self.versioned))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses

    def finalize(self):
        print(f"normalizer: finalize ({len(_LIVE)} tensor(s) whose deleter was never called)")
