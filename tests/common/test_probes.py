"""The probes that need no GPU and no Triton core, on real processes and real shared memory:
stubs below a pid and in a group, shared-memory regions, process figures, the GPU's absence, and
the redaction of credentials."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import time
import uuid

import psutil
import pytest

from rig.common import probes


def _fake_stub(**popen) -> subprocess.Popen:
    """A process the probes take for a backend stub: argv[0] is the stub's name (returned once
    its exec is done: until then it is a copy of this interpreter, under this one's name)."""
    proc = subprocess.Popen([probes.STUB_NAME, "60"], executable=shutil.which("sleep"), **popen)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if psutil.Process(proc.pid).cmdline()[:1] == [probes.STUB_NAME]:
                break
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            break
        time.sleep(0.01)
    return proc


def test_stubs_are_found_below_a_pid_and_in_a_group_then_killed():
    plain = subprocess.Popen([shutil.which("sleep"), "60"])
    stub = _fake_stub(start_new_session=True)
    try:
        mine = [p.pid for p in probes.stubs_of(os.getpid())]
        assert stub.pid in mine and plain.pid not in mine
        assert [p.pid for p in probes.stubs_in_group(stub.pid)] == [stub.pid]
        assert probes.stubs_in_group(plain.pid) == []
        assert probes.total_rss(probes.stubs_of(os.getpid())) > 0
        assert probes.kill_processes(probes.stubs_in_group(stub.pid)) == 1
        assert not psutil.pid_exists(stub.pid), "killed and reaped"
        assert stub.pid not in [p.pid for p in probes.stubs_of(os.getpid())]
    finally:
        for p in (plain, stub):
            p.kill()
            p.wait()
    assert probes.stubs_of(2**22 + 1) == [] and probes.total_rss([]) is None


def test_shared_memory_regions_mapped_present_and_removed():
    name = f"{probes.SHM_PREFIX}_rigtest_{uuid.uuid4().hex[:8]}"
    path = probes.SHM_DIR / name
    if not probes.SHM_DIR.is_dir():
        pytest.skip(f"no {probes.SHM_DIR} here")
    path.write_bytes(b"\0" * 4096)
    try:
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 4096) as m:
            assert name in probes.shm_regions_mapped([os.getpid()])
            assert name not in probes.orphaned_shm_regions(), "mapped by a live process"
            assert probes.shm_regions_present({name, name + "_gone"}) == {name}
            path.unlink()  # the mapping outlives the name: /proc shows it "(deleted)"
            assert name in probes.shm_regions_mapped([os.getpid()])
            assert probes.shm_regions_present({name}) == set()
            m[0] = 1
        path.write_bytes(b"\0")
        assert name in probes.orphaned_shm_regions(), "nobody maps it any more"
        assert probes.remove_shm_regions({name}) == 1 and not path.exists()
        assert probes.remove_shm_regions({name}) == 0
    finally:
        path.unlink(missing_ok=True)
    assert probes.shm_regions_mapped([2**22 + 1]) == set()


def test_process_stats():
    s = probes.process_stats()
    assert s["rss_bytes"] > 10**6 and s["fds"] >= 3 and s["threads"] >= 1
    assert probes.process_stats(2**22 + 1) == {"rss_bytes": None, "fds": None, "threads": None}


def test_gpu_says_why_when_there_is_none():
    g = probes.Gpu()
    if g.available:
        assert isinstance(g.memory_used(), int) and g.name
    else:
        assert g.why and g.memory_used() is None and g.utilization() is None
    assert probes.gpu() is probes.gpu()


def test_redact_hides_the_credentials_a_uri_or_option_carries():
    from rig.common.text import redact

    text = ('results = "s3://AKIA:pw0@minio:9000/b/p?access_key=AKIA1&secret_key=a/b+c'
            '&session_token=T0KEN9&region=eu"')
    out = redact(text)
    for secret in ("pw0", "AKIA1", "a/b+c", "T0KEN9"):
        assert secret not in out
    assert "region=eu" in out and "s3://AKIA:***@minio:9000/b/p" in out
    assert redact("results = \"/tmp/plain folder\"") == "results = \"/tmp/plain folder\""
