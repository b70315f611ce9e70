"""The quiet lock (rig.worker.quiet) and which phases of a cycle hold it (Scenario.waits)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from rig.scenarios import catalog as scenarios
from rig.parent.orchestrator.spec import _quiet_phases
from rig.worker.quiet import Quiet


def test_a_second_holder_waits_until_the_first_leaves(tmp_path):
    path = str(tmp_path / "quiet.lock")
    first = Quiet(path).enter()
    entered = threading.Event()

    def second():
        q = Quiet(path).enter()
        entered.set()
        q.leave()

    t = threading.Thread(target=second, daemon=True)
    t.start()
    time.sleep(0.3)
    assert not entered.is_set()  # held: the second waits
    first.leave()
    first.leave()  # idempotent
    assert entered.wait(10)
    t.join(10)


def test_no_path_no_lock(monkeypatch):
    monkeypatch.delenv("RIG_QUIET_LOCK", raising=False)
    q = Quiet().enter()
    assert q._fd is None
    q.leave()


def cfg(scenario, control=False):
    return SimpleNamespace(scenario=scenario, control=control)


def test_a_faulted_cell_leaves_the_lock_over_what_it_only_waits_in():
    assert _quiet_phases(cfg(None)) == ("start", "load")
    assert _quiet_phases(cfg("retained-response")) == ("start", "load")
    assert _quiet_phases(cfg("stub-exits")) == ("start",)           # requests that time out
    assert _quiet_phases(cfg("sender-kept")) == ("start",)
    assert _quiet_phases(cfg("stop-while-loading")) == ("load",)    # an initialize that sleeps
    # the control computes throughout: it holds the lock throughout
    assert _quiet_phases(cfg("stub-exits", control=True)) == ("start", "load")
    assert _quiet_phases(cfg("stop-while-loading", control=True)) == ("start", "load")


def test_waits_name_phases_only():
    for s in scenarios.SCENARIOS.values():
        assert set(s.waits) <= {"start", "load"}, s.name


def test_a_cycle_waiting_for_the_quiet_section_says_so_first(tmp_path):
    """The wait is other cells' turns: announced as the phase ``queue`` (its own long bound), so
    that the parent does not take a cycle queued behind a busy matrix for a hung start."""
    from rig.worker import cycle

    path = str(tmp_path / "quiet.lock")
    other = Quiet(path).enter()
    phases, entered = [], threading.Event()
    mine = Quiet(path)

    def run():
        cycle._enter_quiet(mine, lambda name, timeout: phases.append((name, timeout)))
        entered.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(0.3)
    assert phases == [("queue", cycle.QUEUE_S)] and not entered.is_set()
    other.leave()
    assert entered.wait(10) and not mine.waits
    cycle._enter_quiet(mine, lambda name, timeout: phases.append((name, timeout)))  # held: says nothing
    assert len(phases) == 1
    mine.leave()
    assert not Quiet(None).waits  # no lock named: nothing to wait for
