"""The store as nights add up: compaction keeps every row exactly once (while readers read, while
a run writes, when killed midway), a running run is left alone, damaged and foreign files are
skipped once with a warning and listed by `rig check`, and a file:// URI reads like its path."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers import ROOT, cycle_row, rig
from rig.cli import main
from rig.parent.preflight import lock_run
from rig.store import KEYS, MERGED, Store
from rig.contract.rows import RunRow, window_row


def run_row(run_id: str) -> RunRow:
    return RunRow(run_id=run_id, started_at="t", command="soak", host="h", cpu="c", gpu=None, engine="capi",
                  runtime="embedded-0.7.0", model="numpy", config="cycles = 2\n", rig_version="0.1.0",
                  python_version="3.11.0")


def write_run(store: Store, run_id: str, cycles: int, version: str = "2.51.0", date: str = "2026-01-02",
              tools=("rig",)) -> None:
    """A run as the rig writes it: its row, then per cycle its windows, then the cycle's row."""
    store.write("runs", [run_row(run_id)], version, "run", date=date)
    for c in range(1, cycles + 1):
        for tool in tools:
            ws = [window_row(run_id, "capi", "numpy", {"cycle": c, "window": w, "requests": 10 * w,
                                                     "throughput": 100.0 + w}, tool=tool) for w in (1, 2, 3)]
            store.write("windows", ws, version, f"c{c:06d}" if tool == "rig" else f"pa-c{c:06d}", date=date)
        store.write("cycles", [cycle_row(c, run_id)], version, f"c{c:06d}", date=date)


def build(root, runs: int = 4, cycles: int = 6) -> Store:
    store = Store(root)
    for k in range(runs):
        write_run(store, f"2026010{k}T000000-{k:06x}", cycles, version=("2.50.0", "2.51.0")[k % 2],
                  date=f"2026-01-0{1 + k % 3}", tools=("rig", "perf_analyzer") if k == 0 else ("rig",))
    return store


def frame(store: Store, table: str) -> pd.DataFrame:
    keys = list(KEYS[table])
    return Store(store.root).read(table).sort_values(keys).reset_index(drop=True)


def keys_of(df: pd.DataFrame, table: str) -> list[tuple]:
    return list(df[list(KEYS[table])].itertuples(index=False, name=None))


def test_compaction_keeps_every_row_exactly_once(tmp_path):
    store = build(tmp_path)
    written = ("runs", "cycles", "windows")  # a soak's tables (no fleet rows here)
    before = {t: frame(store, t) for t in written}
    summary = store.compact()
    assert len(summary["compacted"]) == 4 and not summary["skipped"]
    for t in written:
        after = frame(store, t)
        pd.testing.assert_frame_equal(before[t], after)
        assert len(set(keys_of(after, t))) == len(after), "no row twice"
        names = [os.path.basename(f) for f in store.files(t)]
        assert all(n.endswith(f"-{MERGED}.parquet") for n in names), names  # one per run and partition
        assert len(names) == 4
    assert len(frame(store, "windows")) == 4 * 6 * 3 + 6 * 3  # perf_analyzer's windows of run 0 kept apart
    assert store.compact() == {"compacted": {}, "skipped": {}}, "a second compaction has nothing to do"
    merged = store.files("cycles")[0]
    assert list(pq.read_table(merged).column("cycle").to_pylist()) == [1, 2, 3, 4, 5, 6], "sorted by key"


def test_a_resumed_run_is_compacted_again_with_its_new_cycles(tmp_path):
    store = Store(tmp_path)
    write_run(store, "r1", 3)
    store.compact("r1")
    store.write("cycles", [cycle_row(4, "r1")], "2.51.0", "c000004", date="2026-01-02")
    assert sorted(store.read("cycles", "r1").cycle) == [1, 2, 3, 4]
    store.compact("r1")
    assert sorted(Store(tmp_path).read("cycles", "r1").cycle) == [1, 2, 3, 4]
    assert [os.path.basename(f) for f in store.files("cycles")] == [f"r1-{MERGED}.parquet"]


@pytest.mark.slow
def test_readers_never_see_a_row_twice_or_miss_one_while_compaction_runs_and_a_run_writes(tmp_path):
    store = build(tmp_path, runs=6, cycles=10)
    want = {t: set(keys_of(frame(store, t), t)) for t in KEYS}
    work = tmp_path / "_work" / "live"
    work.mkdir(parents=True)
    lock = lock_run(work, "live")  # a soak writing into the same folder holds its run's lock
    stop, problems, reads = threading.Event(), [], [0]

    def reader():
        while not stop.is_set():
            for t in ("cycles", "windows"):
                got = keys_of(Store(tmp_path).read(t), t)
                old = [k for k in got if k[0] != "live"]
                if len(set(got)) != len(got):
                    problems.append(f"{t}: a row twice")
                if set(old) != want[t]:
                    problems.append(f"{t}: {len(want[t] - set(old))} row(s) missing")
            reads[0] += 1

    store.write("runs", [run_row("live")], "2.51.0", "run", date="2026-01-02")

    def writer():
        store_w = Store(tmp_path)
        for c in range(1, 40):
            store_w.write("cycles", [cycle_row(c, "live")], "2.51.0", f"c{c:06d}", date="2026-01-02")

    threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
    for th in threads:
        th.start()
    try:
        summary = Store(tmp_path).compact()
    finally:
        threads[1].join()
        time.sleep(0.2)
        stop.set()
        threads[0].join()
    assert summary["skipped"] == {"live": "running: a process holds its lock"}
    assert len(summary["compacted"]) == 6
    assert reads[0] >= 1 and not problems, problems[:5]
    assert sorted(Store(tmp_path).read("cycles", "live").cycle) == list(range(1, 40))
    lock.close()  # the run ended: now it is compacted too
    assert list(Store(tmp_path).compact()["compacted"]) == ["live"]


def test_a_run_that_holds_its_lock_is_not_compacted(tmp_path, capsys):
    store = build(tmp_path, runs=1, cycles=2)
    run_id = store.read("runs").run_id[0]
    work = tmp_path / "_work" / run_id
    work.mkdir(parents=True)
    lock = lock_run(work, run_id)
    before = sorted(store.files("cycles"))
    assert main(["compact", str(tmp_path), "--run", run_id]) == 3
    out = capsys.readouterr().out
    assert f"{run_id}: skipped (running: a process holds its lock)" in out
    assert sorted(store.files("cycles")) == before
    lock.close()
    assert main(["compact", str(tmp_path), "--run", run_id]) == 0
    out = capsys.readouterr().out
    assert "[1/1]" in out and "cycles 2 file(s) -> 2 row(s)" in out and "compacted 1 run(s)" in out
    assert main(["compact", str(tmp_path), "--run", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def _damage(store: Store, root) -> tuple[str, str]:
    """A cycle file cut short and a foreign Parquet file in the cycles table."""
    unit = next(f for f in store.files("cycles") if f.endswith("-c000002.parquet"))
    data = open(unit, "rb").read()
    open(unit, "wb").write(data[: len(data) // 2])
    foreign = os.path.join(os.path.dirname(unit), "notes-export.parquet")
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(foreign)
    return unit, foreign


def test_damaged_and_foreign_files_are_skipped_with_one_warning_each(tmp_path, caplog):
    store = build(tmp_path, runs=2, cycles=3)
    cut, foreign = _damage(store, tmp_path)
    reader = Store(tmp_path)
    with caplog.at_level(logging.WARNING, logger="rig.store"):
        df = reader.read("cycles")
        again = reader.read("cycles")
    assert len(df) == len(again) == 2 * 3 - 1
    assert sorted(map(str, reader.damaged)) == sorted([cut, foreign])
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and any(cut in w and "not a whole Parquet file" in w for w in warned)
    assert any(foreign in w and "foreign: no column run_id" in w for w in warned)
    summary = Store(tmp_path).compact()  # damaged files stay where they are; the rest is merged
    assert len(summary["compacted"]) == 2
    assert os.path.exists(cut) and os.path.exists(foreign)
    assert len(Store(tmp_path).read("cycles")) == 5


def test_rig_check_lists_moves_aside_and_exits(tmp_path, capsys):
    store = build(tmp_path, runs=2, cycles=3)
    assert main(["check", str(tmp_path)]) == 0
    assert "every file in its tables is readable" in capsys.readouterr().out
    cut, foreign = _damage(store, tmp_path)
    stray = tmp_path / "windows" / "README.txt"
    stray.write_text("not data")
    assert main(["check", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("3 damaged or foreign file(s)")
    assert any(line.startswith(f"{cut}: not a whole Parquet file") for line in lines)
    assert any(line.startswith(f"{foreign}: foreign") for line in lines)
    assert any(line.startswith(f"{stray}: foreign: not a file the rig writes") for line in lines)
    inside = tmp_path / "cycles" / "q"
    assert main(["check", str(tmp_path), "--move-aside", str(inside)]) == 2
    assert "inside a table folder" in capsys.readouterr().err
    aside = tmp_path / "_damaged"
    assert main(["check", str(tmp_path), "--move-aside", str(aside)]) == 1
    out = capsys.readouterr().out
    assert "moved to" in out and not os.path.exists(cut) and not stray.exists()
    assert (aside / os.path.relpath(cut, tmp_path)).exists()
    assert main(["check", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["check", str(tmp_path / "missing")]) == 2
    assert main(["check", str(ROOT / "rig")]) == 2
    assert "is not a results folder" in capsys.readouterr().err
    assert len(Store(tmp_path).read("cycles")) == 5 and not Store(tmp_path).damaged


def test_a_file_uri_reads_what_its_path_reads(tmp_path):
    store = build(tmp_path, runs=3, cycles=2)
    uri = Store(tmp_path.as_uri())
    for t in KEYS:
        pd.testing.assert_frame_equal(frame(store, t), frame(uri, t))
    assert uri.root == tmp_path
    uri.write("cycles", [cycle_row(1, "via-uri")], "2.51.0", "c000001", date="2026-01-05")
    uri.compact("via-uri")
    assert list(store.read("cycles", "via-uri", columns=["cycle", "date"]).itertuples(index=False, name=None)) == \
        [(1, "2026-01-05")]


def test_a_uri_with_credentials_never_shows_them():
    from rig.common.errors import RigError

    with pytest.raises(RigError) as e:
        Store("nosuchscheme://AKIAXXX:topsecret@bucket/p?secret_key=alsosecret")
    assert "topsecret" not in str(e.value) and "alsosecret" not in str(e.value)


def test_filters_prune_and_project(tmp_path):
    store = build(tmp_path)
    df = store.read("cycles", triton_version="2.50.0", columns=["run_id", "cycle"])
    assert list(df.columns) == ["run_id", "cycle"] and len(df) == 2 * 6
    assert set(store.read("cycles", date=["2026-01-01", "2026-01-03"]).date) == {"2026-01-01", "2026-01-03"}
    one = store.read("windows", "20260100T000000-000000", tool="perf_analyzer")
    assert len(one) == 18 and set(one.tool) == {"perf_analyzer"}
    assert len(store.read("cycles", triton_version="9.9.9")) == 0
    import pyarrow.compute as pc

    few = store.read("windows", columns=["histogram"], filter=(pc.field("cycle") <= 2) & (pc.field("date") == "2026-01-01"))
    assert list(few.columns) == ["histogram"] and len(few) == 2 * 3 * 2 + 2 * 3  # runs 0 (two tools) and 3
    from rig.common.errors import RigError

    with pytest.raises(RigError, match="no column 'speed'"):
        store.read("cycles", speed=1)


def test_a_compaction_killed_midway_leaves_every_row_once(tmp_path):
    """What a SIGKILL can leave: a half-written hidden merged file, or the merged file renamed into
    place with its units not yet removed. Readers see each row once; the next compaction tidies."""
    store = build(tmp_path, runs=2, cycles=4)
    before = {t: frame(store, t) for t in KEYS}
    run_id = "20260100T000000-000000"
    d = os.path.dirname(store.files("cycles", run_id=run_id)[0])
    open(os.path.join(d, f".{run_id}-{MERGED}.parquet.dead.tmp"), "wb").write(b"PAR1 half")
    units = store.files("cycles", run_id=run_id)
    merged = pq.read_table(units[0])  # the units merged by hand, and renamed into place: the units stay
    for u in units[1:]:
        merged = __import__("pyarrow").concat_tables([merged, pq.read_table(u)])
    store.put(merged, d, f"{run_id}-{MERGED}.parquet")
    for t in KEYS:
        pd.testing.assert_frame_equal(before[t], frame(store, t))
    Store(tmp_path).compact()
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]
    for t in KEYS:
        pd.testing.assert_frame_equal(before[t], frame(store, t))


@pytest.mark.slow
def test_a_sigkilled_compaction_leaves_a_readable_store(tmp_path):
    store = build(tmp_path, runs=30, cycles=8)
    before = {t: frame(store, t) for t in KEYS}
    code = f"from rig.store import Store; Store({str(tmp_path)!r}).compact(progress=lambda *a: print(a[0], flush=True))"
    for delay in (0.0, 0.3):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        proc.stdout.readline()  # one run merged: the next one is under way
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for t in KEYS:
            pd.testing.assert_frame_equal(before[t], frame(store, t))
    Store(tmp_path).compact()
    for t in KEYS:
        pd.testing.assert_frame_equal(before[t], frame(store, t))
        assert all(f.endswith(f"-{MERGED}.parquet") for f in store.files(t))


@pytest.mark.slow
def test_a_soak_compacts_its_run_and_resumes_over_a_damaged_file(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("soak", "--cycles", "2", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    store = Store(res)
    for t in ("runs", "cycles"):  # (no windows without a workload)
        assert [os.path.basename(f).split("-")[-1] for f in store.files(t)] == [f"{MERGED}.parquet"]
    run_id = store.read("runs").run_id[0]
    d = os.path.dirname(store.files("cycles")[0])
    cut = os.path.join(d, f"{run_id}-c000003.parquet")  # a third cycle's file cut short by a full disk
    open(cut, "wb").write(b"PAR1 not a whole file")
    p = rig("soak", "--resume", run_id, "--cycles", "3", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 to go" in p.stdout and f"skipped {cut}: not a whole Parquet file" in p.stderr
    assert sorted(Store(res).read("cycles", run_id).cycle) == [1, 2, 3]
    assert rig("check", str(res)).returncode == 0, "the cycle ran again; its file replaced the damaged one"
    shutil.rmtree(res / "_work")
    assert rig("compact", str(res)).stdout.startswith("nothing to compact")
