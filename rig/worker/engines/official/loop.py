"""Where the official API's completions arrive: an asyncio loop on a native thread.

The worker imports Locust, which monkey-patches ``threading``, ``queue``, ``select`` and
``socket`` for gevent. The bindings complete requests from Triton's own threads: a blocking
``Model.infer`` then waits on a gevent primitive that a foreign thread cannot wake ("This
operation would block forever"), and an asyncio loop built from patched ``selectors`` would run
a gevent hub of its own. So the engine runs one asyncio loop on a real OS thread with a real
epoll selector, and callers wait on an eventfd through ``select.select``: cooperative under
gevent (a greenlet yields), blocking without it, and writable from any thread.
"""

from __future__ import annotations

import _socket
import asyncio

from rig.worker.crossthread import Signal
from rig.worker.unpatched import original


class _NativeEpollSelector(original("selectors", "EpollSelector")):
    """epoll as the kernel offers it (gevent's aggressive patching removes it from both modules)."""

    _selector_cls = staticmethod(original("select", "epoll"))


class _NativeLoop(asyncio.SelectorEventLoop):
    """The loop's wake-up pipe as plain kernel sockets: gevent's socket class in its place costs
    Python work on every ``call_soon_threadsafe``, i.e. on every completion the bindings deliver
    (measured: a third of the throughput at one request in flight)."""

    def _make_self_pipe(self):
        self._ssock, self._csock = _socket.socketpair()
        self._ssock.setblocking(False)
        self._csock.setblocking(False)
        self._internal_fds += 1
        self._add_reader(self._ssock.fileno(), self._read_from_self)


class LoopThread:
    """One asyncio loop on a daemon OS thread."""

    def __init__(self):
        self.loop = _NativeLoop(_NativeEpollSelector())
        self._done = Signal()
        # The original start_new_thread: gevent's patched threading.Thread (even the class that
        # monkey.get_original returns, whose module globals are patched) would make a greenlet.
        original("_thread", "start_new_thread")(self._run, ())

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()
            self._done.set()

    def submit(self, coro):
        """Run ``coro`` on the loop; returns a ``concurrent.futures.Future`` (do not wait on it
        from a greenlet: use a ``Signal``)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # already closed
            pass
        self._done.wait(timeout_s)
