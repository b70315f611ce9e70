"""`rig bench --cpu-idle`: the CPUs held out of idle by real idle-priority pollers (or a PM QoS
request), recorded in the run's row, and never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from rig.common import cpuidle


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
    assert _gone(pids), "the pollers end with the block"


def test_os_mode_starts_nothing():
    with cpuidle.Hold("os") as h:
        assert h.method == "os" and h.pids == [] and h.detail == ""


@pytest.mark.slow
def test_pollers_die_with_a_killed_parent():
    """SIGKILL of the process that holds (a killed bench) leaves no poller spinning."""
    code = ("import sys, time\nfrom rig.common import cpuidle\n"
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


def _tree(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        f = tmp_path / "fs" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return str(tmp_path / "fs")


@pytest.mark.parametrize("proc, files, quota", [
    ("0::/kubepods/pod1/c1\n", {"kubepods/pod1/c1/cpu.max": "max 100000\n",
                                "kubepods/pod1/cpu.max": "200000 100000\n"}, "200000/100000"),  # the pod's limit
    ("0::/\n", {"cpu.max": "150000 100000\n"}, "150000/100000"),          # a cgroup namespace: its own root
    ("0::/user.slice\n", {"user.slice/cpu.max": "max 100000\n"}, None),
    ("4:memory:/x\n1:cpu,cpuacct:/docker/abc\n", {"cpu,cpuacct/cpu.cfs_quota_us": "400000\n",
                                                   "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, "400000/100000"),
    ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n"}, None),
])
def test_cpu_quota_of_this_cgroup_or_an_ancestor(tmp_path, proc, files, quota):
    root = _tree(tmp_path, files)
    (tmp_path / "cgroup").write_text(proc)
    assert cpuidle.cpu_quota(str(tmp_path / "cgroup"), root) == quota


def test_no_cgroup_file_means_no_quota(tmp_path):
    assert cpuidle.cpu_quota(str(tmp_path / "absent"), str(tmp_path)) is None


def _quota_cgroup(tmp_name: str):
    """A real cgroup with a CPU quota of 1.5 CPUs (v1 cpu controller or v2), or a skip."""
    for base, files in (("/sys/fs/cgroup/cpu", {"cpu.cfs_quota_us": "150000"}),
                        ("/sys/fs/cgroup", {"cpu.max": "150000 100000"})):
        path = os.path.join(base, tmp_name)
        try:
            os.mkdir(path)
        except OSError:
            continue
        try:
            for name, value in files.items():
                with open(os.path.join(path, name), "w") as f:
                    f.write(value)
            return path
        except OSError:
            os.rmdir(path)
    pytest.skip("no writable cgroup CPU controller here (needs root): the quota case is covered by the unit test")


@pytest.mark.slow
def test_a_cpu_quota_keeps_the_pollers_from_starting():
    """In a real cgroup with a CPU quota, the hold starts nothing and says why."""
    path = _quota_cgroup(f"rig-test-{os.getpid()}")
    code = ("import os, sys\nopen(sys.argv[1] + '/cgroup.procs', 'w').write(str(os.getpid()))\n"
            "from rig.common import cpuidle\nwith cpuidle.Hold('hold') as h:\n    print(h.method, len(h.pids), h.detail)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=60)
    finally:
        os.rmdir(path)
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("pm_qos"):
        pytest.skip("this kernel has a cpuidle driver: the hold is a PM QoS request, which spends no quota")
    assert out.stdout.startswith("os 0 this cgroup caps CPU time (150000"), out.stdout
