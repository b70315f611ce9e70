"""``cupy.ndarray`` and the functions the rig and its models call, over host memory."""

import ctypes
import warnings

import numpy as np

from cupy import _log
from cupy.cuda import Device, MemoryPointer, UnownedMemory, _streams, runtime

kDLCPU, kDLCUDA = 1, 2  # DLDeviceType (dlpack.h)

_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.argtypes = (ctypes.py_object, ctypes.c_char_p)
_is_valid.restype = ctypes.c_int


def capsule_name(capsule):
    """``"dltensor"``, ``"dltensor_versioned"``, a used one's name, or None for a non-capsule."""
    for name in (b"dltensor", b"dltensor_versioned", b"used_dltensor", b"used_dltensor_versioned"):
        try:
            if _is_valid(capsule, name):
                return name.decode()
        except ctypes.ArgumentError:
            return None
    return None


def _poison(dtype, shape):
    buf = np.empty(shape, dtype=dtype)
    if buf.dtype.kind in "fc":
        buf.fill(np.nan)
    else:
        buf.view(np.uint8).fill(0xA5)
    return buf


class ndarray:
    """A device array whose device memory is the host buffer ``_buf``."""

    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if memptr is None:
            self._buf = np.empty(shape, dtype=dtype)
            self._keep = None
        else:
            size = int(np.prod(shape)) * dtype.itemsize
            raw = (ctypes.c_char * max(size, 1)).from_address(memptr.ptr)
            self._buf = np.frombuffer(raw, dtype=dtype, count=int(np.prod(shape))).reshape(shape)
            self._keep = memptr  # the memory (and its owner) lives as long as this array
        self._device_id = memptr.device_id if memptr is not None else runtime.getDevice()

    @classmethod
    def _over(cls, buf, device_id=None):
        self = cls.__new__(cls)
        self._buf = np.ascontiguousarray(buf)
        self._keep = None
        self._device_id = runtime.getDevice() if device_id is None else device_id
        return self

    # -- what others see
    shape = property(lambda self: self._buf.shape)
    dtype = property(lambda self: self._buf.dtype)
    size = property(lambda self: self._buf.size)
    ndim = property(lambda self: self._buf.ndim)
    nbytes = property(lambda self: self._buf.nbytes)
    itemsize = property(lambda self: self._buf.itemsize)
    strides = property(lambda self: self._buf.strides)

    @property
    def device(self):
        return Device(self._device_id)

    @property
    def data(self):
        return MemoryPointer(UnownedMemory(self._buf.ctypes.data, self.nbytes, self, self._device_id), 0)

    def __array__(self, *args, **kwargs):
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy array "
            "explicitly."
        )

    def __len__(self):
        return len(self._buf)

    def __repr__(self):
        return f"standin.ndarray(shape={self.shape}, dtype={self.dtype}, device={self._device_id})"

    # -- work on this process's current stream: what was queued on it lands first
    def _ready(self):
        _streams.complete(_streams.current_ptr())
        return self._buf

    def get(self, stream=None, order="C", out=None, blocking=True):
        return self._ready().copy()

    def reshape(self, *shape):
        return ndarray._over(self._ready().reshape(*shape), self._device_id)

    def astype(self, dtype, copy=True):
        return ndarray._over(self._ready().astype(dtype), self._device_id)

    def copy(self):
        return ndarray._over(self._ready().copy(), self._device_id)

    def _binary(self, other, op):
        b = other._ready() if isinstance(other, ndarray) else other
        return ndarray._over(op(self._ready(), b), self._device_id)

    def __truediv__(self, other):
        return self._binary(other, np.true_divide)

    def __mul__(self, other):
        return self._binary(other, np.multiply)

    def __add__(self, other):
        return self._binary(other, np.add)

    def __sub__(self, other):
        return self._binary(other, np.subtract)

    def __matmul__(self, other):
        return matmul(self, other)

    # -- DLPack, as CuPy 14 exports
    def toDlpack(self, use_versioned=True, to_cpu=False, ensure_copy=False, stream=None):
        capsule = self._buf.__dlpack__(max_version=(1, 0)) if use_versioned else self._buf.__dlpack__()
        _log.event("export", via="toDlpack", use_versioned=use_versioned, capsule=capsule_name(capsule))
        return capsule

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("unsupported device requested.")
        if copy is True:
            raise BufferError("copy=True only supported for copy to CPU.")
        if stream is not None:
            if not isinstance(stream, int) or stream < -1:
                raise ValueError(
                    f"On CUDA, the valid stream for the DLPack protocol is -1, 1, 2, or any larger value, but {stream} "
                    "was provided"
                )
            if stream == 0:
                warnings.warn("Stream 0 is passed from a library that you are converting to; CuPy assumes 0 as a "
                              "legacy default stream.", stacklevel=2)
        if stream != -1:
            # the consumer's stream is made to wait for this process's current one (an event), or is it
            _streams.complete(_streams.current_ptr())
        versioned = max_version is not None and max_version[0] >= 1
        import os

        if os.environ.get("CUPY_STANDIN_MISBEHAVE") == "versioned":
            versioned = True
        capsule = self._buf.__dlpack__(max_version=(1, 0)) if versioned else self._buf.__dlpack__()
        _log.event("export", via="__dlpack__", stream=stream, max_version=max_version, capsule=capsule_name(capsule))
        return capsule

    def __dlpack_device__(self):
        return (kDLCPU, 0)  # host memory, said as such (see the package's docstring)


class _Capsule:
    """A bare capsule presented to numpy's importer, which takes objects only."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (kDLCPU, 0)


def from_dlpack(obj, *, device=None, copy=None):
    if not hasattr(obj, "__dlpack_device__"):
        name = capsule_name(obj)
        if name not in ("dltensor", "dltensor_versioned"):
            raise ValueError(
                "A DLPack tensor object cannot be consumed multiple times (or object was not a DLPack capsule). "
                f"Got: {obj!r}"
            )
        _log.event("import", via="capsule", capsule=name)
        return ndarray._over(np.from_dlpack(_Capsule(obj)))
    dev_type, _ = obj.__dlpack_device__()
    if dev_type not in (kDLCPU, kDLCUDA):
        raise TypeError(f"Unsupported array type: {dev_type}")
    try:
        capsule = obj.__dlpack__(stream=1, max_version=(1, 0), copy=copy)
    except TypeError:
        if copy is not None:
            raise
        capsule = obj.__dlpack__(stream=1)
    _log.event("import", via="__dlpack__", capsule=capsule_name(capsule))
    return ndarray._over(np.from_dlpack(_Capsule(capsule)))


fromDlpack = from_dlpack


def asarray(a, dtype=None, order=None):
    if isinstance(a, ndarray):
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
    host = np.array(a, dtype=dtype, order="C", copy=True)  # pageable memory is staged at once
    out = ndarray._over(_poison(host.dtype, host.shape))
    _streams.queue(_streams.current_ptr(), out._buf, host)
    _log.event("copy", direction="host-to-device", nbytes=int(host.nbytes), stream=_streams.current_ptr())
    return out


def array(a, dtype=None, copy=True, order="K"):
    return asarray(a, dtype=dtype)


def asnumpy(a, stream=None):
    return a.get() if isinstance(a, ndarray) else np.asarray(a)


def matmul(a, b):
    a_ = a._ready() if isinstance(a, ndarray) else a
    b_ = b._ready() if isinstance(b, ndarray) else b
    return ndarray._over(np.matmul(a_, b_), a._device_id if isinstance(a, ndarray) else None)


def arange(*args, dtype=None):
    return ndarray._over(np.arange(*args, dtype=dtype))


def empty(shape, dtype=float):
    return ndarray._over(np.empty(shape, dtype=dtype))


def zeros(shape, dtype=float):
    return ndarray._over(np.zeros(shape, dtype=dtype))
