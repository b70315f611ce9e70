"""The rows of the results tables through Parquet and back: every column, the runs and windows
tables, partitions, a unit written twice, a write killed midway."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers import cycle_row
from rig.contract.rows import CycleRow, RunRow, WindowRow
from rig.store import Store


def test_window_row_fills_what_a_window_message_lacks():
    from rig.contract.rows import window_row

    w = window_row("r9", "capi", "numpy", {"cycle": "3", "window": None, "throughput": None, "p50_us": 120.0,
                            "requests": 10.0, "unknown": 1})
    assert isinstance(w, WindowRow)
    assert (w.run_id, w.cycle, w.window, w.tool, w.mode) == ("r9", 3, 0, "rig", "closed")
    assert (w.requests, w.errors, w.throughput, w.start_s, w.p50_us, w.p99_us) == (10, 0, 0.0, 0.0, 120.0, None)
    assert type(w.requests) is int
    assert window_row("r9", "capi", "numpy", {"tool": "perf_analyzer", "mode": "open"}).tool == "perf_analyzer"


def test_every_column_round_trips(tmp_path):
    store = Store(tmp_path)
    row = cycle_row(7, start_latency_s=0.125, stop_latency_s=None, finalize_expected=3, outputs_ok=False,
                    throughput=1e6, worker_rss_bytes=2**40, stop_error="Exit timeout — ünïcode",
                    detail=None, cleanup="ok")
    store.write("cycles", [row], "2.51.0", "c000007", date="2026-02-03")
    df = pd.read_parquet(tmp_path / "cycles")
    assert len(df) == 1
    got = df.iloc[0]
    for f in dataclasses.fields(CycleRow):
        want = getattr(row, f.name)
        value = got[f.name]
        if want is None:
            assert pd.isna(value), f.name
        else:
            assert value == want, f.name
    assert str(got["triton_version"]) == "2.51.0" and str(got["date"]) == "2026-02-03"
    back = store.read("cycles", "r1")
    assert back.loc[0, "stop_error"] == "Exit timeout — ünïcode"


def test_runs_windows_and_filters(tmp_path):
    store = Store(tmp_path)
    run = RunRow(run_id="r1", started_at="t", command="soak", host="h", cpu="c", gpu=None, engine="capi",
                 runtime="embedded-0.7.0", model="numpy", config="cycles = 2\n", rig_version="0.1.0",
                 python_version="3.11.0")
    store.write("runs", [run], "2.51.0", "run")
    stored = store.run_row("r1")
    assert stored["config"] == "cycles = 2\n" and stored["command"] == "soak"
    assert pd.isna(stored["gpu"]), "a missing value reads back missing"
    assert store.run_row("nope") is None
    windows = [WindowRow(run_id="r1", cycle=1, window=i, engine="capi", model="numpy", tool="rig", start_s=i * 1.0,
                         length_s=1.0, mode="closed", concurrency=2, rate=None, requests=10 * i, errors=0,
                         throughput=10.0 * i, p50_us=None, p90_us=None, p99_us=None, p999_us=None, max_us=None,
                         mean_us=None, stable=None, hub_block_max_ms=None, worker_rss_bytes=None,
                         gpu_memory_bytes=None, gpu_utilization=None, histogram=None) for i in (1, 2, 3)]
    store.write("windows", windows, "2.51.0", "c000001")
    w = store.read("windows", "r1")
    assert sorted(w.window) == [1, 2, 3] and sorted(w.requests) == [10, 20, 30]
    assert len(store.read("windows", "r2")) == 0


def test_empty_store_reads_as_empty_frames(tmp_path):
    store = Store(tmp_path / "none")
    for table, row_type in (("cycles", CycleRow), ("runs", RunRow), ("windows", WindowRow)):
        df = store.read(table)
        assert len(df) == 0 and list(df.columns) == [f.name for f in dataclasses.fields(row_type)]
    assert store.cycles_done("r1") == set()


def test_a_unit_written_again_replaces_the_first(tmp_path):
    store = Store(tmp_path)
    first = store.write("cycles", [cycle_row(1, outcome="hung")], "2.51.0", "c000001")
    second = store.write("cycles", [cycle_row(1, outcome="clean")], "2.51.0", "c000001")
    assert first == second
    assert list(store.read("cycles").outcome) == ["clean"]


def test_partition_names(tmp_path):
    store = Store(tmp_path)
    a = store.write("cycles", [cycle_row(1)], "25.01/py3", "c000001", date="2026-01-01")
    b = store.write("cycles", [cycle_row(2)], "", "c000002", date="2026-01-01")
    assert a.parent.relative_to(tmp_path).as_posix() == "cycles/triton_version=25.01_py3/date=2026-01-01"
    assert b.parent.name == "date=2026-01-01" and b.parent.parent.name == "triton_version=unknown"
    assert a.name == "r1-c000001.parquet"
    assert sorted(store.read("cycles").triton_version) == ["25.01_py3", "unknown"]


def test_a_write_that_dies_midway_leaves_no_partial_file_where_readers_look(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.write("cycles", [cycle_row(1)], "2.51.0", "c000001")
    real = pq.write_table

    def dies_halfway(table, where, **kw):
        real(table, where, **kw)
        data = Path(where).read_bytes()
        Path(where).write_bytes(data[: len(data) // 2])  # what a SIGKILL mid-write leaves
        raise OSError("killed")

    monkeypatch.setattr(pq, "write_table", dies_halfway)
    with pytest.raises(OSError):
        store.write("cycles", [cycle_row(2)], "2.51.0", "c000002")
    monkeypatch.undo()
    files = list((tmp_path / "cycles").rglob("*"))
    visible = [f for f in files if f.is_file() and not f.name.startswith((".", "_"))]
    assert [f.name for f in visible] == ["r1-c000001.parquet"], "no half file under a reader's name"
    assert not [f for f in files if f.name.startswith(".")], "a write that fails removes its temporary file"
    # a SIGKILL would leave the hidden temporary file: readers never look at it
    (visible[0].parent / ".r1-c000002.parquet.dead.tmp").write_bytes(b"PAR1 cut short")
    assert store.cycles_done("r1") == {1}
    assert len(pd.read_parquet(tmp_path / "cycles")) == 1  # pandas skips the hidden file too
