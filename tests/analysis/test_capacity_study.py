"""`rig capacity`'s study of a results folder (rig.analysis.capacity.study): the bench windows it reads
and keeps, and the text it yields piece by piece. (The command around it, the models and the fleet
check: tests/analysis/test_capacity.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from rig.analysis.capacity import study
from rig.common import hdr
from rig.common.errors import RigError
from rig.contract.rows import RunRow, window_row
from rig.store import Store


def _hist(latency_us: int, n: int = 200) -> str:
    h = hdr.new()
    for _ in range(n):
        h.record_value(latency_us)
    return hdr.encode(h)


def _window(run_id: str, cycle: int, point: int, tput: float, lat: int, engine: str = "capi"):
    return window_row(
        run_id,
        engine,
        "numpy",
        {
            "cycle": cycle,
            "window": 1,
            "tool": "rig",
            "mode": "closed",
            "concurrency": point,
            "requests": int(tput),
            "errors": 0,
            "length_s": 1.0,
            "throughput": tput,
            "p99_us": float(np.percentile([lat] * 10, 99)),
            "histogram": _hist(lat),
            "instances": 1,
        },
    )


def _run(run_id: str, command: str = "bench", engine: str = "capi") -> RunRow:
    return RunRow(
        run_id=run_id,
        started_at="2026-01-01T00:00:00+00:00",
        command=command,
        host="h",
        cpu="c",
        gpu=None,
        engine=engine,
        runtime="embedded-0.7.0",
        model="numpy",
        config="",
        rig_version="0",
        python_version="3.11",
    )


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "r")
    s.write("runs", [_run("b1"), _run("s1", command="soak")], "2.51.0", "run")
    s.write("windows", [_window("b1", 1, 1, 5000, 200), _window("b1", 2, 2, 8000, 400)], "2.51.0", "c1")
    s.write("windows", [_window("s1", 1, 1, 99999, 10)], "2.51.0", "c2")  # a soak's: not read
    return Store.open(tmp_path / "r")


def test_read_keeps_the_bench_windows_tagged_with_their_share(store):
    tables = study.read(store, "R", [], check=False)
    assert set(tables.windows["run_id"]) == {"b1"} and "cpu_share" in tables.windows
    assert set(tables.every["run_id"]) == {"b1", "s1"} and (tables.fleet is None or tables.fleet.empty)


@pytest.mark.parametrize(
    "where, check, says",
    [
        (["engine=tritonserver"], False, "--where engine=tritonserver matches no bench window in the results"),
        (["colour=red"], False, "no such column"),
        ([], True, "R holds no `rig fleet` runs to check against"),
    ],
)
def test_read_says_in_one_line_what_is_missing(store, where, check, says):
    with pytest.raises(RigError, match=says):
        study.read(store, "R", where, check=check)


def test_select_by_a_column_of_the_runs(store):
    runs, windows = store.read("runs"), store.read("windows")
    assert set(study.select(windows, runs, ["command=bench"])["run_id"]) == {"b1"}
    assert set(study.select(windows, runs, ["run_id=s1"])["run_id"]) == {"s1"}


def test_the_text_piece_by_piece(store, tmp_path):
    tables = study.read(store, "R", [], check=False)
    pieces = list(study.text(tables, [20000.0], 1.0, 0.3, 0, check=False))
    assert "fewest nodes: 4 with 1 instance(s), each at 5,600 of 8,000 infer/s" in pieces[0]
    assert pieces[1] == "" and pieces[2].startswith("Triton 2.51.0, engine capi, model numpy")
    assert pieces[2].endswith(":")
    assert len(pieces) == 4  # no law across instance counts (one count), no check, no figure
    # without a target (--check alone): no plan; each node's model still
    assert next(study.text(tables, [], 1.0, 0.3, 0, check=False)) == ""
