"""A stand-in for CuPy 14 where it meets other code, for a machine without a GPU.

Written from CuPy 14's sources (``cupy/_core/core.pyx`` ``__dlpack__``, ``cupy/_core/dlpack.pyx``
``toDlpack`` and ``from_dlpack``), so that what the rig and its models hand to others, and take
from them, is what CuPy 14 would give and take:

- ``ndarray.toDlpack()`` gives a DLPack 1.0 capsule named ``"dltensor_versioned"``
  (``use_versioned=True`` is CuPy 14's default); ``toDlpack(use_versioned=False)`` the unversioned
  ``"dltensor"``;
- ``ndarray.__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)`` gives the
  versioned capsule only where ``max_version`` is (1, x) or later, else the unversioned one; a
  stream must be None, -1 or an int >= 1 (0 warns, as CuPy does), and any other order is refused;
- ``cupy.from_dlpack`` takes an object that speaks DLPack (asked with ``max_version=(1, 0)`` first,
  then without, as CuPy retries on TypeError) or a bare capsule of either kind;
- ``asarray`` of a host array copies asynchronously: the device buffer holds poison (NaN, or
  0xA5 bytes) until the stream is synchronized (``Stream.synchronize``, ``Device.synchronize``,
  ``runtime.deviceSynchronize``) or work queued after the copy on this process's stream reads it
  (``matmul``, arithmetic, ``get``, a DLPack export to a stream). Whoever reads the raw pointer
  (``a.data.ptr``) from elsewhere, as a stub does over CUDA IPC, sees the poison;
- ``numpy.asarray(cupy_array)`` raises TypeError, as CuPy's ``__array__`` does.

Where it must differ: its device memory is host memory, so ``__dlpack_device__`` and the capsules
say ``kDLCPU`` (a CPU-only backend stub would refuse a ``kDLCUDA`` pointer, rightly). The capsules
are numpy 2's (numpy 2.1 or newer: ``__dlpack__(max_version=...)``), over the device buffer.

``CUPY_STANDIN_LOG=FILE``: every export and copy is appended to FILE as a JSON line.
``CUPY_STANDIN_DEVICES=N``: the number of devices (default 1).
``CUPY_STANDIN_MISBEHAVE=versioned``: ``__dlpack__`` gives a versioned capsule even when not asked
(a producer that breaks the protocol), to test that a consumer refuses it.
"""

from numpy import bool_, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64  # noqa: F401

from cupy import cuda  # noqa: F401
from cupy._core import (  # noqa: F401
    arange,
    array,
    asarray,
    asnumpy,
    empty,
    from_dlpack,
    fromDlpack,
    matmul,
    ndarray,
    zeros,
)

__version__ = "14.2.0+standin"
