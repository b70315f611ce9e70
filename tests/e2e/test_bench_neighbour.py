"""`rig bench --neighbour burn:PCT` end to end: a real sweep over the embedded Triton core beside a real
burner process, pinned to the node's CPU, alive while the sweep measures, gone after; the run's row
says which neighbour."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
from helpers import ROOT

from rig.store import Store


@pytest.mark.slow
def test_a_bench_beside_a_burner_records_it_and_leaves_no_burner(tmp_path):
    cpu = max(os.sched_getaffinity(0))
    res = tmp_path / "r"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rig",
            "bench",
            "--cpus",
            str(cpu),
            "--concurrency",
            "1",
            "--windows",
            "1",
            "--window-seconds",
            "0.5",
            "--repeats",
            "1",
            "--cpu-idle",
            "os",
            "--neighbour",
            "burn:30",
            "--results",
            str(res),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    burners: dict[int, list[int]] = {}  # pid: its affinity
    workers = 0
    while proc.poll() is None:
        try:
            kids = psutil.Process(proc.pid).children(recursive=False)
            for child in kids:
                cmd = child.cmdline()
                if (
                    "-c" in cmd
                    and "prctl" in cmd[cmd.index("-c") + 1]
                    and "sched_setaffinity" in cmd[cmd.index("-c") + 1]
                ):
                    burners.setdefault(child.pid, child.cpu_affinity())
                elif "worker" in cmd:
                    workers += bool(burners)  # a worker seen while a burner was already running
        except psutil.Error:
            pass
        time.sleep(0.1)
    out = proc.stdout.read()
    assert proc.returncode == 0, out[-2000:]
    assert burners and all(aff == [cpu] for aff in burners.values()), burners
    assert workers, "no worker was seen while the burner ran"
    assert f"neighbour: burn:30: 1 burner process(es), one pinned to each CPU of {cpu}" in out
    assert not any(psutil.pid_exists(p) for p in burners)
    (row,) = Store(res).read("runs").to_dict("records")
    assert row["neighbour"] == "burn:30" and row["schema_version"] >= 18
