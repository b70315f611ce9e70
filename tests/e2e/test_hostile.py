"""The machine around the rig: a model that cannot load says why, a small /dev/shm says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from pathlib import Path

import pytest

from helpers import ROOT, cycles, rig

pytestmark = pytest.mark.slow

# Regions that no live process mapped before these tests ran (another run on this machine, killed
# earlier): the final test counts only what these tests leave.
_SHM_BEFORE: set = set()


@pytest.fixture(scope="module", autouse=True)
def _shm_before():
    from rig.common import probes

    _SHM_BEFORE.update(probes.orphaned_shm_regions())

RAISES = '''
class TritonPythonModel:
    def initialize(self, args):
        raise ValueError("weights file /models/w.bin not found")

    def execute(self, requests):
        return []
'''


def _one_model(tmp_path, name: str, source: str) -> None:
    d = tmp_path / "models" / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
                                    'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                                    'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
    (d / "1" / "model.py").write_text(source)


def test_a_model_whose_initialize_raises_gives_its_exception(tmp_path, runtime):
    _one_model(tmp_path, "bad", RAISES)
    res = tmp_path / "r"
    p = rig("cycle", "--model-repository", str(tmp_path / "models"), "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(res).iloc[0]
    assert r.outcome == "load_failed"
    assert "ValueError: weights file /models/w.bin not found" in r.detail


def test_a_bench_over_a_model_that_fails_to_load_ends_in_one_line(tmp_path, runtime):
    """Every point says why it measured nothing; the bench then ends in one FAIL line and exit
    status 1: no plot of nothing, no traceback."""
    _one_model(tmp_path, "bad", RAISES)
    p = rig("bench", "--model-repository", str(tmp_path / "models"), "--concurrency", "1,2", "--windows", "1",
            "--window-seconds", "1", "--repeats", "1", "--cpu-idle", "os", "--results", str(tmp_path / "r"))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert p.stdout.count("load_failed") >= 2  # each point's own line
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("FAIL: no point was measured (load_failed") and "weights file" in last, last
    assert not list((tmp_path / "r").rglob("*.png"))


DIES = '''
import os, sys
class TritonPythonModel:
    def initialize(self, args):
        sys.stderr.write("cannot open /dev/nvidia0: the stub gives up\\n")
        sys.stderr.flush()
        os._exit(3)

    def execute(self, requests):
        return []
'''


def test_a_stub_that_dies_while_loading_is_noticed_at_once_with_its_last_words(tmp_path, runtime):
    _one_model(tmp_path, "dies", DIES)
    res = tmp_path / "r"
    startup_timeout = 120
    p = rig("cycle", "--model-repository", str(tmp_path / "models"), "--startup-timeout", str(startup_timeout),
            "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(res).iloc[0]
    assert r.outcome == "load_failed" and "not healthy" in r.detail
    assert "cannot open /dev/nvidia0: the stub gives up" in r.detail  # the stub's own last output
    assert r.cycle_wall_s < startup_timeout / 2, "the dead stub was noticed only near the startup deadline"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_a_small_dev_shm_is_named_as_the_reason(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("cycle", "--results", str(res), "--startup-timeout", "30",
            within=["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=512k tmpfs /dev/shm && "$@"', "sh"])
    if "mount" in p.stderr and p.returncode != 0 and not (res / "cycles").exists():
        pytest.skip(f"cannot mount a small /dev/shm here: {p.stderr.strip()[-200:]}")
    r = cycles(res).iloc[0]
    assert r.outcome == "load_failed"
    assert "shared memory" in r.detail and "shm-size" in r.detail, r.detail


def test_an_unwritable_results_folder_is_one_line(tmp_path):
    p = rig("soak", "--results", "/proc/nonexistent/r")
    assert p.returncode == 2 and "cannot write results to /proc/nonexistent/r" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_a_full_disk_is_one_line_and_leaves_no_half_file(tmp_path, runtime):
    res = tmp_path / "tiny"
    res.mkdir()
    script = (f"mount -t tmpfs -o size=120k tmpfs {res} && \"$@\"; echo rc=$?; "
              f"find {res} -name '*.tmp' -o -name '.*.tmp'")
    p = rig("soak", "--cycles", "3", "--workload", "steady", "--workload-seconds", "1", "--results", f"{res}/r",
            within=["unshare", "-m", "sh", "-c", script, "sh"])
    assert "rc=4" in p.stdout, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("rig: error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "Traceback" not in p.stderr
    assert ".tmp" not in p.stdout.split("rc=4", 1)[1], "no temporary file left behind"


def test_a_damaged_parquet_file_is_skipped_and_named(tmp_path, runtime):
    from rig import Store

    res = tmp_path / "r"
    for _ in range(2):  # two files of a cycle each (a soak merges its cycles into one file when it ends)
        p = rig("cycle", "--results", str(res))
        assert p.returncode == 0, p.stdout + p.stderr
    files = sorted((res / "cycles").rglob("*.parquet"))
    files[0].write_bytes(files[0].read_bytes()[:100])  # cut short, as a full disk would
    store = Store(res)
    df = store.read("cycles")
    assert len(df) == 1 and store.damaged == [files[0]]


def test_resuming_a_run_that_is_still_running_is_refused(tmp_path, runtime):
    import time

    from helpers import spawn

    res = tmp_path / "r"
    first = spawn("soak", "--cycles", "4", "--workload", "steady", "--workload-seconds", "1", "--results", str(res))
    try:
        deadline = time.monotonic() + 60
        while not list((res / "_work").glob("*/.lock")) and time.monotonic() < deadline:
            time.sleep(0.1)
        run_id = next((res / "_work").glob("*/.lock")).parent.name
        p = rig("soak", "--resume", run_id, "--results", str(res))
        assert p.returncode == 2 and f"run {run_id} is running in pid {first.pid}" in p.stderr
    finally:
        assert first.wait(300) == 0
    p = rig("soak", "--resume", run_id, "--results", str(res))  # once it is over, resuming is fine
    assert p.returncode == 0 and "0 to go" in p.stdout


def test_resuming_a_run_whose_lock_is_held_before_its_row_is_stored_is_refused(tmp_path):
    """The window between a run taking its lock and storing its run row: a resume then is refused as
    running, not told there is no such run."""
    from rig.parent.preflight import lock_run

    work = tmp_path / "r" / "_work" / "20260101T000000-1"
    work.mkdir(parents=True)
    held = lock_run(work, "20260101T000000-1")
    try:
        p = rig("soak", "--resume", "20260101T000000-1", "--results", str(tmp_path / "r"))
        assert p.returncode == 2 and f"run 20260101T000000-1 is running in pid {os.getpid()}" in p.stderr, p.stderr
    finally:
        held.close()
    p = rig("soak", "--resume", "20260101T000000-1", "--results", str(tmp_path / "r"))
    assert p.returncode == 2 and "no run '20260101T000000-1'" in p.stderr, p.stderr


def test_files_in_the_working_folder_named_like_modules_shadow_nothing(tmp_path, runtime):
    """Python puts a child's working folder first on its module path: the rig's children must not
    import a user's ``http.py`` or ``queue.py`` in place of the standard library's."""
    for name in ("http", "queue", "select", "locust", "numpy"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the user\\'s {name}.py was imported')\n")
    # ... while the user's locustfile still opens its files relative to the folder it was started in
    (tmp_path / "data.txt").write_text("inputs")
    (tmp_path / "wl.py").write_text("from rig.worker.load import TritonUser\n"
                                    "assert open('data.txt').read() == 'inputs'\n\n\n"
                                    "class Reader(TritonUser):\n    pass\n")
    # the console script, as users run it (``python -m rig`` would put the folder first itself)
    p = rig("cycle", "--workload", "wl.py", "--workload-seconds", "1", "--results", str(tmp_path / "r"),
            script=True, cwd=tmp_path)
    assert p.returncode == 0 and "clean" in p.stdout, p.stdout + p.stderr
    assert "was imported" not in p.stdout + p.stderr


def test_a_second_install_of_a_runtime_waits_for_the_first_and_takes_its_result(tmp_path, runtime):
    """Two processes installing the same embedded runtime on a fresh machine: the later one says it
    waits, then runs from what the first installed (it neither downloads again nor removes it)."""
    import fcntl

    from rig.parent import runtime as rt

    version = runtime.name[len("embedded-"):]
    real = Path(runtime.server_dir).parent  # the installed runtime's folder in the real cache
    home = tmp_path / "home"
    (home / "runtimes").mkdir(parents=True)
    for site in Path(rt.cache_dir()).parent.glob("stub-site-py*"):  # no numpy<2 install here
        os.symlink(site, home / site.name)
    env = {**os.environ, "RIG_HOME": str(home)}
    with open(home / "runtimes" / f".install-{version}.lock", "a") as held:  # "the first" process
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        second = subprocess.Popen(
            [sys.executable, "-c", "from rig.parent import runtime as rt; import sys; "
             f"r = rt.install_embedded({version!r}, log=lambda m: print(m, flush=True)); "
             "print('triton', r.triton_version, r.server_dir)"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        first_line = second.stdout.readline()
        assert first_line.startswith(f"waiting for another process that is installing nvidia-pytriton=={version}"), \
            first_line
        os.symlink(real, home / "runtimes" / f"embedded-{version}")  # the first one's install lands
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert "downloading" not in out
    assert out.strip().endswith(f"triton {runtime.triton_version} {home / 'runtimes' / f'embedded-{version}' / Path(runtime.server_dir).name}")
    assert (real / "wheel").is_dir()  # nothing removed


def test_zz_after_all_of_them_no_stub_and_no_shared_memory_of_the_rig_is_left(tmp_path_factory):
    """Runs last in this module: whatever the faults above did, the rig left nothing behind
    (stubs of this test session's runs: their models live under its temporary folder)."""
    from rig.common import probes

    orphans = probes.orphaned_stubs(str(tmp_path_factory.getbasetemp()))
    assert not orphans, f"stub processes left without a parent: {[p.pid for p in orphans]}"
    new = probes.orphaned_shm_regions() - _SHM_BEFORE
    assert not new, f"shared-memory regions no live process maps: {sorted(new)}"
