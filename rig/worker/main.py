"""The worker: hosts Triton in its own process and runs cycles from a spec file.

``python -m rig worker --spec FILE --result-fd N`` (or ``--result-fd -1`` for stdout) can be
re-run by hand to reproduce a cycle. It writes one JSON line per event to the result pipe, each
a ``rig.contract.rows`` message: ``CycleStart`` and ``Phase`` (what the watchdog bounds), ``Window``
(a measurement window's figures), ``Partial`` (the row once stop returned, and the shared memory
mapped), ``CycleDone`` (the cycle's row), ``Fatal`` (an exception escaped; exit status 3),
``Refused`` (the run's inputs do not fit a model: the parent refuses the run in that one line;
exit status 2). People's output (Triton's log) goes to files.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from rig.common.errors import RigError
from rig.common.probes import SHM_DIR
from rig.common.procs import python_m
from rig.contract.messages import CycleStart, Fatal, Message, Phase, Refused, Window
from rig.contract.runtime import BuiltRuntime, Runtime, stub_site_of
from rig.contract.spec import LEAK_PREFIX, CycleSpec
from rig.worker import cycle as cycle_mod
from rig.worker import engines
from rig.worker.cycle_reference import InputsRefused
from rig.worker.engines import memory
from rig.worker.hook import crashlib


class Channel:
    def __init__(self, fd: int):
        if fd >= 0:
            # Backend stubs are forked from this process: they must not hold the pipe open.
            os.set_inheritable(fd, False)
        self._f = sys.stdout if fd < 0 else os.fdopen(fd, "w", buffering=1)

    def send(self, msg: Message) -> None:
        self._f.write(msg.encode() + "\n")
        self._f.flush()


def _die_with_parent() -> None:
    """If the orchestrator is killed (even by SIGKILL), this worker goes too: no orphan servers."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)
    except (OSError, AttributeError):
        pass


def _own_environment(runtime: Runtime, spec_path: str, result_fd: int) -> None:
    """Re-execute this worker with the runtime's environment where it lacks it: the loader reads
    LD_LIBRARY_PATH only at exec, the stubs need RIG_STUB_SITE and this interpreter's bin/ on PATH,
    and CUDA reads CUDA_DEVICE_ORDER when it starts. The parent sets them all; a worker re-run by
    hand from its spec gets them here."""
    if os.environ.get("RIG_WORKER_ENV") == "1":
        return
    have = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    bindir = os.path.dirname(sys.executable)
    stub_site = stub_site_of(runtime)
    bindings = runtime.bindings if isinstance(runtime, BuiltRuntime) else None
    if (
        all(p in have for p in runtime.library_path)
        and (not stub_site or os.environ.get("RIG_STUB_SITE") == stub_site)
        and bindir in os.environ.get("PATH", "").split(os.pathsep)
        and (not bindings or bindings in os.environ.get("PYTHONPATH", "").split(os.pathsep))
        and os.environ.get("CUDA_DEVICE_ORDER")  # set (PCI_BUS_ID where the user did not): CUDA's order is NVML's
    ):
        return
    env = runtime.worker_env()
    env["RIG_WORKER_ENV"] = "1"  # once: never a loop
    os.execve(sys.executable, [*python_m("rig"), "worker", "--spec", spec_path, "--result-fd", str(result_fd)], env)


def main(spec_path: str, result_fd: int) -> int:
    if result_fd >= 0:
        _die_with_parent()
    spec = CycleSpec.read(spec_path)  # a field that does not fit: one line (rig.cli), exit 2
    runtime = spec.runtime
    _own_environment(runtime, spec_path, result_fd)
    chan = Channel(result_fd)
    # stubs that die of a signal of their own leave a marker (stub_crashes; None where no compiler)
    crashlib.arm_env(log=lambda msg: print(msg, file=sys.stderr, flush=True))

    def phase(name: str, timeout_s: float) -> None:
        chan.send(Phase(name, timeout_s, time.monotonic()))

    placement = memory.Placement.parse(spec.input_memory)
    memory.set_placement(placement)
    if placement.gpu:
        try:
            memory.device_memory()  # CuPy and the device, now: a node without them refuses the run
        except RigError as e:
            chan.send(Refused(str(e)))
            return 2

    workload = None
    if spec.workload is not None:
        from rig.worker.load import make_cycle_workload

        workload = make_cycle_workload(spec.workload, lambda **w: chan.send(Window(w)))
        if spec.engine == "capi":
            from rig.worker.engines.capi import lane as fastpath

            fastpath.available()  # compile the native lanes now, not while Locust's hub runs

    held = cycle_mod.Held() if spec.restart == "reload" else None
    try:
        for k in spec.cycles:
            chan.send(CycleStart(k, time.monotonic()))
            chan.send(
                cycle_mod.run_cycle(
                    lambda: engines.make(spec.engine, runtime),
                    spec,
                    k,
                    phase,
                    workload,
                    partial=chan.send,
                    held=held,
                    send=chan.send,
                )
            )
        if held is not None:  # every cycle reported: the server kept across them stops now
            held.close(phase, spec)
    except InputsRefused as e:  # bad input, not a failed cycle: the parent refuses the run
        chan.send(Refused(str(e)))
        return 2
    except Exception as e:  # noqa: BLE001 - reported to the parent as data, then exit non-zero
        chan.send(Fatal(f"{type(e).__name__}: {e}", traceback.format_exc()[-4000:]))
        return 3
    finally:
        _remove_leak_files()
    return 0


def _remove_leak_files() -> None:
    """The template's leaks-per-load files of this worker's stubs (rig-leak-<this pid>-...)."""
    for f in SHM_DIR.glob(f"{LEAK_PREFIX}{os.getpid()}-*"):
        try:
            f.unlink()
        except OSError:
            pass
