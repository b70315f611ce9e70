"""Streams and the copies queued on them (the stand-in's only asynchronous work)."""

import threading

_local = threading.local()
_pending = {}  # stream ptr -> [(device buffer, host snapshot)], in queue order
_lock = threading.Lock()


def current_ptr():
    stack = getattr(_local, "stack", None)
    return stack[-1].ptr if stack else 0


def push(stream):
    if not hasattr(_local, "stack"):
        _local.stack = []
    _local.stack.append(stream)


def pop():
    _local.stack.pop()


def queue(ptr, dst, src):
    with _lock:
        _pending.setdefault(ptr, []).append((dst, src))


def complete(ptr=None):
    """Land the copies queued on stream ``ptr`` (every stream where None)."""
    with _lock:
        ptrs = list(_pending) if ptr is None else [ptr]
        work = [job for p in ptrs for job in _pending.pop(p, [])]
    for dst, src in work:
        dst[...] = src


def pending_count():
    with _lock:
        return sum(len(v) for v in _pending.values())
