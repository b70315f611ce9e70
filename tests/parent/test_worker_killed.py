"""The scenario worker-killed (python_backend#446): the parent SIGKILLs a cycle's worker, the
process that hosts the server, in the middle of its load, then watches what the server left
(backend stubs, its /dev/shm regions) for a bound, cleans it up and counts it before and after
(rig.parent.orchestrator.reap). Fast: when the parent kills, the note, the watch over a process
that outlives the bound; slow, on the real core: three cycles whose middle one is killed, every
row stored, nothing of the run left, the next cycle clean."""

import shutil
import subprocess
import time

import psutil
import pytest
from helpers import cycles, rig

from rig.common import probes
from rig.parent import config
from rig.scenarios import catalog as scenarios
from rig.parent.orchestrator import reap


def test_the_scenario_is_listed_with_its_report_and_its_control_runs_without_the_kill():
    s = scenarios.get("worker-killed")
    assert s.upstream == ("python_backend#446",) and s.kills_worker and s.expected == ("crashed", "not_measured")
    assert not s.shared_control  # its control is the same load, not the template's
    cfg = config.load(None, {"scenario": "worker-killed"})
    assert (cfg.fault, cfg.client, cfg.requests) == ("none", "none", 5000)
    assert reap.kills(cfg, 1) and reap.kills(cfg, 7)
    assert not reap.kills(config.load(None, {"scenario": "worker-killed", "control": True}), 1)
    assert not reap.kills(config.load(None, {"scenario": "stub-exits"}), 1)
    assert not reap.kills(config.load(None, {}), 1)
    proc = rig("scenarios")
    assert proc.returncode == 0 and "worker-killed" in proc.stdout and "python_backend#446" in proc.stdout


def test_the_cycles_killed_can_be_narrowed(monkeypatch):
    monkeypatch.setattr(reap, "KILL_CYCLES", frozenset({2}))
    cfg = config.load(None, {"scenario": "worker-killed"})
    assert [reap.kills(cfg, c) for c in (1, 2, 3)] == [False, True, False]


def test_the_killer_arms_as_the_load_begins_and_never_waits_past_the_kill(monkeypatch):
    monkeypatch.setattr(reap, "KILL_AFTER_S", 0.2)
    k = reap.Killer(config.load(None, {"scenario": "worker-killed"}))
    assert k.wait(0.5) == 0.5
    k.phase(1, "start")
    assert k.at is None
    k.phase(1, "infer")
    assert k.at is not None and k.wait(0.5) <= 0.2
    k.disarm()
    assert k.at is None and k.wait(0.5) == 0.5
    control = reap.Killer(config.load(None, {"scenario": "worker-killed", "control": True}))
    control.phase(1, "infer")
    assert control.at is None


def _kill(pid: int, **kw) -> reap.Kill:
    return reap.Kill(**{"pid": pid, "pgid": pid, "phase": "infer", "into_phase_s": 0.5, "died_at": time.monotonic(),
                        "stubs": [], "regions": set(), **kw})


def test_the_note_says_what_was_left_before_and_after_the_cleanup():
    gone = reap.Leftovers(stubs=2, gone_s=0.31, outlived=0, regions=0, stubs_left=0, regions_left=0, crashes=0)
    text = reap.text(_kill(1), gone)
    assert text.startswith("worker killed by SIGKILL (the scenario's) in phase infer, 0.5 s into it, with 0 stub(s)")
    assert "2 alive once it was dead, all gone 0.31 s after its death" in text
    assert "0 shared-memory region(s) of its server left" in text and text.endswith("nothing left after the cleanup")
    stuck = reap.Leftovers(stubs=1, gone_s=None, outlived=1, regions=1, stubs_left=0, regions_left=1, crashes=1)
    text = reap.text(_kill(1), stuck)
    assert "1 outlived it by 10 s (killed by the rig)" in text and "died of a signal of their own" in text
    assert text.endswith("left after the cleanup: 0 stub(s), 1 region(s)")
    assert gone.figures()["orphan_stubs_gone_s"] == 0.31 and stuck.figures()["orphan_stubs_outlived"] == 1
    # the row's cleanup: one of three words, counted per cell in a matrix's table
    assert (gone.cleanup(), stuck.cleanup()) == ("killed: nothing outlived it", "killed: a stub outlived it")
    assert reap.Leftovers(1, 0.2, 0, 1, 0, 0, 0).cleanup() == "killed: its shm outlived it"


def test_a_stub_that_outlives_the_bound_is_killed_and_its_servers_regions_removed(tmp_path):
    """A process the probes take for a backend stub (argv[0] is the stub's name), in a group of its
    own, outlives a short bound: it is killed, and the region named with its server's prefix is
    removed; each counted, and nothing is left."""
    stub = subprocess.Popen(["triton_python_backend_stub", "300"], executable=shutil.which("sleep"),
                            start_new_session=True)
    region = probes.SHM_DIR / f"{probes.own_shm_prefix(stub.pid)}rig-test"
    try:
        region.write_bytes(b"x")
        # until it has exec'd, the child is a copy of this interpreter, not yet named as a stub (a
        # fresh CI's busy machine saw that window: 0 stubs)
        deadline = time.monotonic() + 10
        while not probes.stubs_in_group(stub.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        kill = _kill(stub.pid, stubs=probes.stubs_in_group(stub.pid))
        left = reap.watch(kill, tmp_path, bound_s=0.3)
        assert (left.stubs, left.gone_s, left.outlived, left.regions) == (1, None, 1, 1)
        assert (left.stubs_left, left.regions_left) == (0, 0)
        assert left.crashes in (0, None) and not region.exists()
        assert stub.poll() is not None  # (reaped by the watch: psutil waits for its own children)
    finally:
        stub.kill()
        region.unlink(missing_ok=True)


def test_stubs_that_go_on_their_own_are_timed():
    # a stub that lives 1.5 s: long enough to be seen alive even where a busy machine is slow to
    # start watching (it failed with 0.3 s under a loaded CI), bounds far from any machine's speed
    stub = subprocess.Popen(["triton_python_backend_stub", "1.5"], executable=shutil.which("sleep"),
                            start_new_session=True)
    try:
        left = reap.watch(_kill(stub.pid), None, bound_s=20)
        assert left.stubs == 1 and left.outlived == 0 and 0.5 < left.gone_s < 15
    finally:
        stub.kill()
        stub.wait()


def _run_leftovers(tmp_path, pids: list[int]) -> tuple[list[int], list[str]]:
    stubs = [p.pid for p in psutil.process_iter(["cmdline"])
             if probes._is_stub(p) and any(str(tmp_path) in a for a in p.info["cmdline"] or ())]
    regions = sorted(name for pid in pids for name in reap.server_regions(pid))
    return stubs, regions


@pytest.mark.slow
def test_three_cycles_whose_middle_worker_is_killed_store_three_rows_and_leave_nothing(tmp_path, monkeypatch):
    """The parent kills cycle 2's worker in the middle of its load: three rows stored, the killed
    one crashed with what its server left counted before and after the cleanup; no stub and no
    region of the run left once the rig returns; cycle 3 clean."""
    from rig.workflows import soak

    monkeypatch.setattr(reap, "KILL_CYCLES", frozenset({2}))
    results = tmp_path / "results"
    cfg = config.load(None, {"scenario": "worker-killed", "cycles": 3, "exit_timeout": 3, "engine": "capi",
                             "results": str(results)})
    status, tally, run_id, reasons = soak.execute(cfg, "soak", log=lambda line: None)
    got = cycles(results).sort_values("cycle").reset_index(drop=True)
    assert list(got.cycle) == [1, 2, 3] and len(tally.rows) == 3
    killed = got.iloc[1]
    assert (killed.outcome, killed.load_outcome) == ("crashed", "not_measured")
    assert "killed by SIGKILL (the scenario's) in phase infer" in killed.detail
    assert "with 1 stub(s)" in killed.detail  # (one may be gone before the worker is reaped: seen once on 2.51.0)
    assert killed.orphan_stubs <= 1 and killed.orphan_stubs_left == 0 and killed.orphan_shm_left == 0
    # the stub went on its own (and its region with it), or outlived the bound and was killed
    assert (killed.orphan_stubs_outlived == 0) == (killed.orphan_stubs_gone_s == killed.orphan_stubs_gone_s)
    assert killed.stubs_killed == killed.orphan_stubs_outlived
    assert killed.shm_regions_leaked == killed.orphan_shm_regions
    assert killed.cleanup.startswith("killed: ")
    for i in (0, 2):
        row = got.iloc[i]
        assert (row.outcome, row.load_outcome) == ("clean", "ok"), row.detail
        assert row.requests == 5000 and row.stubs_killed == 0 and row.shm_regions_leaked == 0
        assert row.orphan_stubs != row.orphan_stubs  # null: not a killed cycle
    assert status == 1 and any("crashed=1" in r for r in reasons)  # a soak judges; the run went on
    assert _run_leftovers(tmp_path, [int(p) for p in got.worker_pid]) == ([], [])
