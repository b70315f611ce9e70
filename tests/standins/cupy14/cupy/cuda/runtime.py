"""``cupy.cuda.runtime`` as far as the rig and its models call it."""

import ctypes
import os

from cupy.cuda import _streams

memcpyHostToHost, memcpyHostToDevice, memcpyDeviceToHost, memcpyDeviceToDevice, memcpyDefault = 0, 1, 2, 3, 4
streamLegacy = 1
streamPerThread = 2
_device = 0


class CUDARuntimeError(RuntimeError):
    pass


def getDeviceCount():
    return int(os.environ.get("CUPY_STANDIN_DEVICES", "1"))


def _valid(device):
    if not 0 <= int(device) < getDeviceCount():
        raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
    return int(device)


def getDevice():
    return _device


def setDevice(device):
    global _device
    _device = _valid(device)


def getDeviceProperties(device):
    _valid(device)
    return {"name": b"CuPy stand-in (host memory)", "pciBusID": 0x10 + int(device), "pciDeviceID": 0,
            "pciDomainID": 0, "totalGlobalMem": 1 << 30, "major": 9, "minor": 0}


def deviceSynchronize():
    _streams.complete()


def memcpy(dst, src, size, kind):
    """Synchronous, as cudaMemcpy is: queued work on the legacy stream lands first."""
    _streams.complete(0)
    ctypes.memmove(int(dst), int(src), int(size))


def runtimeGetVersion():
    return 13000


def driverGetVersion():
    return 13000
