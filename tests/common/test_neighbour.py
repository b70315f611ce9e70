"""A neighbour on the node's CPUs (rig.common.neighbour): the option read, and real burner processes,
pinned, busy about their share, gone once the block ends, whatever ends it."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from rig.common import neighbour
from rig.common.errors import RigError


@pytest.mark.parametrize(
    ("text", "label"),
    [
        (None, "none"),
        ("none", "none"),
        (" NONE ", "none"),
        ("burn:30", "burn:30"),
        ("burn:100", "burn:100"),
        ("burn:07", "burn:7"),
    ],
)
def test_parse_gives_a_canonical_label(text, label):
    assert neighbour.parse(text) == label


@pytest.mark.parametrize(
    "text", ["burn:0", "burn:101", "burn", "burn:", "burn:3.5", "burn:-5", "spin:30", "locust-master", ""]
)
def test_a_bad_value_is_one_line(text):
    with pytest.raises(RigError) as e:
        neighbour.parse(text)
    assert "\n" not in str(e.value) and "burn:PCT" in str(e.value)


def test_none_starts_nothing():
    with neighbour.Burner("none") as b:
        assert b.pids == [] and b.text().startswith("none")


def test_burners_are_pinned_busy_their_share_and_reaped():
    cpus = sorted(os.sched_getaffinity(0))[:1]
    with neighbour.Burner("burn:50", cpus) as b:
        (pid,) = b.pids
        p = psutil.Process(pid)
        assert p.cpu_affinity() == cpus and pid != os.getpid()
        before, t0 = p.cpu_times(), time.monotonic()
        time.sleep(1.0)
        after, t1 = p.cpu_times(), time.monotonic()
        busy = (after.user + after.system - before.user - before.system) / (t1 - t0)
        assert 0.15 < busy < 0.75, busy  # about half a CPU (less where the machine is busy)
        assert "burn:50: 1 burner process(es), one pinned to each CPU of" in b.text()
    assert not psutil.pid_exists(pid)


def test_an_error_inside_the_block_still_stops_them():
    with pytest.raises(KeyboardInterrupt), neighbour.Burner("burn:10") as b:
        pids = b.pids
        assert len(pids) == len(os.sched_getaffinity(0))
        raise KeyboardInterrupt
    assert not any(psutil.pid_exists(p) for p in pids)
