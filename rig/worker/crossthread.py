"""A wake-up that any thread may set and a greenlet may wait on.

Triton completes requests on its own native threads (and the official API on its asyncio loop's
thread). A gevent primitive must never be touched from those, and a blocking wait would stall
the hub. An eventfd bridges them: written from any thread, waited on through ``select.select``,
which is cooperative where gevent has patched it (a greenlet yields) and blocking where not.
"""

from __future__ import annotations

import os
import select


class _Fd:
    """An eventfd closed when the last holder drops it (the waiter, or a late setter)."""

    __slots__ = ("fd",)

    def __init__(self):
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def __del__(self):
        os.close(self.fd)


class Signal:
    """Set from any thread; waited on by a greenlet (cooperatively) or a plain thread."""

    __slots__ = ("_fd", "value")

    def __init__(self):
        self._fd = _Fd()
        self.value = None

    def set(self, value=None) -> None:
        self.value = value
        os.eventfd_write(self._fd.fd, 1)

    def wait(self, timeout_s: float | None) -> bool:
        fd = self._fd.fd
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return bool(ready)
