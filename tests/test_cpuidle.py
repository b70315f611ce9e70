"""`rig bench --cpu-idle`: the CPUs held out of idle by real idle-priority pollers (or a PM QoS
request), recorded in the run's row, and never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from rig import cpuidle


@pytest.mark.parametrize("mode, driver, qos, method", [
    ("os", "intel_idle", True, "os"),
    ("hold", "intel_idle", True, "pm_qos"),
    ("hold", "intel_idle", False, "poll"),   # PM QoS not open to this user
    ("hold", "none", True, "poll"),         # no cpuidle driver: PM QoS would change nothing
    ("hold", None, True, "poll"),
])
def test_choose(mode, driver, qos, method):
    assert cpuidle.choose(mode, driver, qos) == method


def test_choose_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="hold, os"):
        cpuidle.choose("deep", "none", True)


def test_idle_driver_reads_the_kernels_word(tmp_path):
    f = tmp_path / "current_driver"
    f.write_text("haltpoll\n")
    assert cpuidle.idle_driver(str(f)) == "haltpoll"
    assert cpuidle.idle_driver(str(tmp_path / "absent")) is None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pids, seconds=10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_pollers_run_at_idle_priority_on_every_cpu_and_stop_with_the_block():
    with cpuidle.Hold("hold") as h:
        if h.method == "pm_qos":
            pytest.skip("this kernel has a cpuidle driver: the hold is a PM QoS request, no pollers")
        assert h.method == "poll", h.detail
        assert len(h.pids) == len(os.sched_getaffinity(0))
        for pid in h.pids:
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        pids = h.pids
    assert _gone(pids, 0.5)


def test_os_mode_starts_nothing():
    with cpuidle.Hold("os") as h:
        assert h.method == "os" and h.pids == [] and h.detail == ""


@pytest.mark.slow
def test_pollers_die_with_a_killed_parent():
    """SIGKILL of the process that holds (a killed bench) leaves no poller spinning."""
    code = ("import sys, time\nfrom rig import cpuidle\n"
            "h = cpuidle.Hold('hold').__enter__()\n"
            "print(h.method, *h.pids, flush=True)\ntime.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        method, *pids = p.stdout.readline().split()
        if method != "poll":
            pytest.skip(f"the hold here is {method}: no pollers")
        assert pids and all(_alive(int(x)) for x in pids)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert _gone([int(x) for x in pids]), "a poller outlived the killed process"
