"""Hold the CPUs out of their idle state while a bench measures (``rig bench --cpu-idle hold``).

An idle CPU halts, and waking it costs time: on a virtual machine a halted vCPU exits to the
hypervisor, and each wake-up is an inter-processor interrupt through it. Under in-process load the
server's threads and its Python-backend stubs wake each other for every request, so the cost of
those wake-ups, not the server's work, can decide the figure, and it varies with how busy the
machine happens to be. Measured on a 2-vCPU KVM guest with no cpuidle driver (docs/measurements/speed.md, "CPU idle
states"): the same bench points read 10.7-14.7k infer/s with the CPUs left to idle and mostly
15.6-23.4k with them held awake.

``hold`` keeps them awake for the measurement, for every tool measured (the rig and perf_analyzer
alike), as latency benchmarks such as cyclictest do:
- ``pm_qos``: where the kernel has a cpuidle driver, a PM QoS request of 0 µs
  (``/dev/cpu_dma_latency``, held open): the kernel then polls instead of entering idle states.
- ``poll``: where it has none (``current_driver`` reads ``none``, common in VMs), or PM QoS is
  not open to this user, as many pollers as this process may use CPUs, scheduled ``SCHED_IDLE``:
  they run only when nothing else wants a CPU, so the server and the load lose no time to them.
  They are not pinned: pinned ones (one per CPU) measured worse than none, with 3-6 ms p99 tails.
  The CPUs read 100 % busy meanwhile. The pollers die with the process that started them.
  Under a cgroup CPU quota (a container's ``--cpus``, a pod's CPU limit) pollers would spend the
  quota and get the server throttled: there the hold does not start them, and says so.
``os`` leaves idle to the kernel. The run's row stores which (``runs.cpu_idle``).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys

MODES = ("hold", "os")
DRIVER = "/sys/devices/system/cpu/cpuidle/current_driver"
PM_QOS = "/dev/cpu_dma_latency"

# One poller: dies with its parent (PR_SET_PDEATHSIG = 1, SIGKILL = 9), SCHED_IDLE, not pinned.
_POLLER = """
import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
sys.stdout.write("ok\\n"); sys.stdout.flush()
while True:
    pass
"""


def idle_driver(path: str = DRIVER) -> str | None:
    """The kernel's cpuidle driver (``intel_idle``, ``acpi_idle``, ``haltpoll``, ``none``), or None
    where the kernel does not say."""
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def cpu_quota(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> str | None:
    """The CPU quota of this process's cgroup or an ancestor (cgroup v2 ``cpu.max``, v1
    ``cpu.cfs_quota_us``), as ``quota/period`` text, or None where none caps it."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            files = [(os.path.join(root, "unified" if os.path.isdir(os.path.join(root, "unified")) else ""), "cpu.max")]
        elif "cpu" in controllers.split(","):
            files = [(os.path.join(root, d), "cpu.cfs_quota_us") for d in (controllers, "cpu", "cpu,cpuacct")]
        else:
            continue
        for base, name in files:
            parts = [p for p in path.strip("/").split("/") if p]
            for depth in range(len(parts), -1, -1):
                got = _read_quota(os.path.join(base, *parts[:depth], name))
                if got:
                    return got
    return None


def _read_quota(path: str) -> str | None:
    try:
        with open(path) as f:
            text = f.read().split()
    except OSError:
        return None
    if not text or text[0] in ("max", "-1"):
        return None
    if path.endswith("cfs_quota_us"):
        try:
            with open(path.replace("cfs_quota_us", "cfs_period_us")) as f:
                return f"{text[0]}/{f.read().strip()}"
        except OSError:
            return text[0]
    return "/".join(text[:2])


def choose(mode: str, driver: str | None, pm_qos_writable: bool) -> str:
    """How to hold: ``os`` (not held), ``pm_qos`` or ``poll``."""
    if mode not in MODES:
        raise ValueError(f"cpu idle mode {mode!r}: one of {', '.join(MODES)}")
    if mode == "os":
        return "os"
    if driver not in (None, "none") and pm_qos_writable:
        return "pm_qos"
    return "poll"


def plan(mode: str, pm_qos_writable: bool | None = None) -> tuple[str, str]:
    """How ``mode`` would hold here, without holding: the method (``os``, ``pm_qos``, ``poll``) and,
    where a hold asked for cannot happen, why."""
    if pm_qos_writable is None:
        pm_qos_writable = os.access(PM_QOS, os.W_OK)
    method = choose(mode, idle_driver(), pm_qos_writable)
    if method == "poll":
        quota = cpu_quota()
        if quota:
            return "os", (
                f"this cgroup caps CPU time ({quota} us per period): idle-priority pollers would "
                "spend the quota and get the server throttled, so none are started"
            )
    return method, ""


class Hold:
    """``with Hold(mode) as h:`` keeps the CPUs awake inside the block; ``h.method`` says how.
    Start it from the thread that outlives the measurement (the pollers die with that thread)."""

    def __init__(self, mode: str = "hold"):
        self.mode = mode
        self.method = "os"
        self.detail = ""  # why a hold asked for did not happen
        self._fd: int | None = None
        self._pollers: list[subprocess.Popen] = []

    def __enter__(self) -> Hold:  # noqa: PYI034
        self.method, self.detail = plan(self.mode)
        if self.method == "pm_qos":
            try:
                self._fd = os.open(PM_QOS, os.O_WRONLY)
                os.write(self._fd, struct.pack("i", 0))
            except OSError:
                self._close_fd()
                self.method, self.detail = plan(self.mode, pm_qos_writable=False)
        if self.method == "poll":
            self._start_pollers()
        return self

    def _start_pollers(self) -> None:
        for _ in os.sched_getaffinity(0):
            self._pollers.append(
                subprocess.Popen(
                    [sys.executable, "-S", "-c", _POLLER, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            )
        failed = sum(p.stdout.readline().strip() != b"ok" for p in self._pollers)
        if failed:  # SCHED_IDLE refused: a poller at normal priority would steal time
            n = len(self._pollers)
            self._stop_pollers()
            self.method = "os"
            self.detail = f"{failed} of {n} idle-priority pollers did not start (SCHED_IDLE refused)"

    def _stop_pollers(self) -> None:
        for p in self._pollers:
            p.kill()
        for p in self._pollers:
            p.wait()
            p.stdout.close()
        self._pollers = []

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the kernel drops the PM QoS request with the file
            self._fd = None

    def __exit__(self, *exc) -> None:
        self._stop_pollers()
        self._close_fd()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._pollers]


def describe(hold: Hold, who: str = "for every tool") -> str:
    """How a hold left the CPUs, in words (a run's log line; ``who``: what it held them for)."""
    if hold.method == "pm_qos":
        return f"held awake {who} (PM QoS request of 0 us)"
    if hold.method == "poll":
        return f"held awake {who} ({len(hold.pids)} idle-priority pollers, one per CPU)"
    if hold.detail:
        return f"left to the kernel: --cpu-idle hold failed, {hold.detail}"
    return (
        "left to the kernel (--cpu-idle os): figures depend on wake-up costs, "
        "see docs/guide/workloads.md, CPU idle states"
    )
