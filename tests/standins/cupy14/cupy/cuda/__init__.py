"""``cupy.cuda`` as far as the rig and its models use it: devices, streams, memory."""

import numpy as np

from cupy.cuda import _streams, runtime


class Device:
    def __init__(self, device=None):
        self.id = runtime.getDevice() if device is None else runtime._valid(device)
        self._prev = []

    def __enter__(self):
        self._prev.append(runtime.getDevice())
        runtime.setDevice(self.id)
        return self

    def __exit__(self, *exc):
        runtime.setDevice(self._prev.pop())
        return False

    def use(self):
        runtime.setDevice(self.id)

    def synchronize(self):
        _streams.complete()

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


class Stream:
    """A stream; ``Stream.null`` is the default (legacy) stream, ptr 0."""

    _next = 0x1000

    def __init__(self, null=False, non_blocking=False, ptr=None):
        if null:
            self.ptr = 0
        elif ptr is not None:
            self.ptr = int(ptr)
        else:
            Stream._next += 0x10
            self.ptr = Stream._next

    def __enter__(self):
        _streams.push(self)
        return self

    def __exit__(self, *exc):
        _streams.pop()
        return False

    def synchronize(self):
        _streams.complete(self.ptr)

    def record(self, event=None):
        return object()

    def wait_event(self, event):
        pass


Stream.null = Stream(null=True)


def ExternalStream(ptr, device_id=-1):
    return Stream(ptr=ptr)


def get_current_stream(device_id=None):
    ptr = _streams.current_ptr()
    return Stream.null if ptr == 0 else Stream(ptr=ptr)


class BaseMemory:
    def __init__(self, ptr, size, device_id):
        self.ptr, self.size, self.device_id = int(ptr), int(size), int(device_id)


class Memory(BaseMemory):
    """Device memory of the stand-in: a host buffer it owns."""

    identity = "Memory"

    def __init__(self, size, device_id=None):
        self._buf = np.empty(max(int(size), 1), dtype=np.uint8)
        super().__init__(self._buf.ctypes.data, size, runtime.getDevice() if device_id is None else device_id)


class UnownedMemory(BaseMemory):
    """Memory owned by ``owner`` (kept alive as long as this is)."""

    identity = "UnownedMemory"

    def __init__(self, ptr, size, owner, device_id=-1):
        super().__init__(ptr, size, runtime.getDevice() if device_id < 0 else device_id)
        self.owner = owner


class MemoryPointer:
    def __init__(self, mem, offset):
        self.mem = mem
        self.ptr = mem.ptr + int(offset)
        self.device_id = mem.device_id

    @property
    def device(self):
        return Device(self.device_id)


def alloc(size):
    return MemoryPointer(Memory(size), 0)
