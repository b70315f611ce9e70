"""The quiet section: where cells of a conformance matrix run side by side (``rig matrix
--jobs N``), each cycle's start and load, the parts whose figures the machine's load can move
(start latency, throughput, the growth and slowdown trends), run one at a time across them; the
stops, exit timeouts and settling, which wait and barely compute, overlap.

``RIG_QUIET_LOCK`` names the lock file (the matrix sets it for its cells: one a machine, in the
runtime cache, so that two matrices side by side share it); unset, nothing waits.
An advisory ``flock``: it goes with the process, so a cell killed mid-load never holds it.
"""

from __future__ import annotations

import fcntl
import os

ENV = "RIG_QUIET_LOCK"


class Quiet:
    """Held from ``enter()`` to ``leave()`` (either may be called again: both are idempotent)."""

    def __init__(self, path: str | None = None):
        self.path = path if path is not None else os.environ.get(ENV)
        self._fd: int | None = None

    def enter(self) -> Quiet:
        if self.path and self._fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._fd = fd
        return self

    @property
    def waits(self) -> bool:
        """Whether ``enter()`` may wait: a lock is named and not held."""
        return bool(self.path) and self._fd is None

    def leave(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
