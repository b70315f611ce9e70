"""A node as a CPU quota (``--cpus quota:X``, rig.common.cpuquota): parsed, found, and held for
real where this machine lets a root process make a cgroup (its children inside it, the time they
get capped, the cgroup gone when the run ends)."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from helpers import rig
from rig.common import cpuquota, cpushare
from rig.common.errors import RigError


@pytest.mark.parametrize("text, want", [("quota:0.5", 0.5), ("quota:2", 2.0), (" quota:1.25 ", 1.25)])
def test_quota_parses_cpus(text, want):
    assert cpuquota.parse(text, 2) == want


@pytest.mark.parametrize("text", ["quota:", "quota:x", "quota:0", "quota:-1", "quota:3"])
def test_a_bad_quota_is_one_line(text):
    with pytest.raises(RigError) as e:
        cpuquota.parse(text, 2)
    assert "quota:X takes a number of CPUs from 0.01 to the 2 this process may use" in str(e.value)
    assert "\n" not in str(e.value)


def test_the_cpu_hierarchy_is_found_in_v1_and_v2(tmp_path):
    cg = tmp_path / "cgroup"
    cg.write_text("12:cpu,cpuacct:/pods/a\n0::/user.slice\n")
    v1 = [("/sys/fs/cgroup/cpu,cpuacct", "cgroup", {"rw", "cpu", "cpuacct"})]
    assert cpuquota.where(str(cg), v1) == ("/sys/fs/cgroup/cpu,cpuacct/pods/a", "v1")
    root = tmp_path / "unified"
    (root / "user.slice").mkdir(parents=True)
    (root / "user.slice" / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    cg.write_text("0::/user.slice\n")
    assert cpuquota.where(str(cg), [(str(root), "cgroup2", {"rw"})]) == (str(root / "user.slice"), "v2")
    (root / "user.slice" / "cgroup.controllers").write_text("memory pids\n")
    assert cpuquota.where(str(cg), [(str(root), "cgroup2", {"rw"})]) is None  # no cpu controller delegated


def test_the_share_a_quota_of_the_options_own_records():
    assert cpushare.share({0, 1}, "50000/100000", 2, [0, 1], by_quota=True) == {
        "cpu_share": 0.5, "cpus": "0-1", "cpu_share_from": "--cpus"}
    assert cpushare.share({0, 1}, "50000/100000", 2, None)["cpu_share_from"] == "cgroup"  # a container's


def _can_make_a_cgroup() -> str | None:
    found = cpuquota.where()
    if found is None:
        return "no cgroup hierarchy with the cpu controller is mounted here"
    probe = os.path.join(found[0], f"{cpuquota.PREFIX}probe{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError as e:
        return f"this user may not make a cgroup ({e.strerror}): --cpus quota:X needs root or a delegated cgroup"
    os.rmdir(probe)
    return None


def test_a_held_quota_caps_the_process_and_what_it_starts_and_is_removed_at_exit():
    why = _can_make_a_cgroup()
    if why:
        pytest.skip(why)
    code = (
        "import os, subprocess, sys, time; from rig.common import cpushare; cpushare.hold('quota:0.25'); "
        "print(cpushare.current()); "
        "print(subprocess.run([sys.executable, '-c', 'print(open(\"/proc/self/cgroup\").read())'], "
        "capture_output=True, text=True).stdout); "
        "t, c = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - t < 1.5: pass\n"
        "print('busy', (time.process_time() - c) / (time.monotonic() - t))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'cpu_share': 0.25" in out and "'cpu_share_from': '--cpus'" in out, out
    groups = {line.split(":", 2)[2] for line in out.splitlines() if cpuquota.PREFIX in line}
    assert len(groups) == 1, out  # the grandchild is in the same cgroup as its parent
    busy = float(out.rsplit("busy", 1)[1])
    assert busy < 0.5, out  # a spinning process held to a quarter of a CPU gets about that, not a whole one
    name = groups.pop().rsplit("/", 1)[-1]
    assert name not in os.listdir(cpuquota.where()[0])  # removed at exit


@pytest.mark.slow
def test_a_soak_held_to_a_quota_records_it(tmp_path):
    why = _can_make_a_cgroup()
    if why:
        pytest.skip(why)
    res = tmp_path / "r"
    p = rig("cycle", "--cpus", "quota:0.5", "--results", str(res), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    runs = pd.read_parquet(res / "runs")
    assert runs.cpu_share.iloc[0] == 0.5 and runs.cpu_share_from.iloc[0] == "--cpus"
    assert pd.read_parquet(res / "cycles").outcome.iloc[0] == "clean"
