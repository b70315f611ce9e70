"""rig.contract.messages and rig.contract.rows: the worker's messages, one JSON line each, and the rows typed by their
dataclasses' own annotations (no Triton, no worker: pure functions)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from rig.contract import messages as M
from rig.contract import rows as P

MESSAGES = [
    M.CycleStart(3, 12.5),
    M.Phase("stop", 90.0, 13.0),
    M.Window({"cycle": 3, "window": 2, "throughput": 1500.0, "p99_us": 812.0, "mode": "closed"}),
    M.Partial({"cycle": 3, "outcome": "clean", "stop_latency_s": 0.25, "stubs_alive_after_stop": 1},
              ("triton_python_backend_shm_region_1", "triton_python_backend_shm_region_2")),
    M.CycleDone({"cycle": 3, "outcome": "clean", "load_outcome": "ok", "requests": 100, "outputs_ok": True},
                "2.51.0"),
    M.CycleDone({"cycle": 4, "outcome": "load_failed"}),
    M.Samples(3, ({"sample": 0, "t_s": 0.25, "requests": 812.0, "process": "stub", "model": "numpy",
                   "instance": "numpy_0_0", "pid": 4321, "rss_bytes": 41_000_000,
                   "gpu_bytes": None},)),
    M.Fatal("RuntimeError: boom", "Traceback ..."),
    M.Refused("model m: input X has 2 dims, the data 3"),
    M.CellDone(1, "20260101T000000-abcdef", ("outcomes not allowed: hung=1", "leaks: 1 stub(s)")),
    M.CellDone(2, None, error="the tritonserver engine does not load over 2.41.0"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_survives_one_line(msg):
    line = msg.encode()
    assert "\n" not in line
    assert json.loads(line)["type"] == msg.KIND.value
    assert M.decode(line) == msg
    assert M.decode(line.encode()) == msg, "bytes off the pipe read the same"


def test_every_kind_has_its_message():
    assert {m.KIND for m in MESSAGES} == set(M.Kind)


@pytest.mark.parametrize("line", [
    "", "not json", b"\xff\xfe\x00 binary", "null", "[1, 2]", '"cycle"', '{"type": "cycle", "row": ',
    '{"cycle": 1}',                                          # no type
    '{"type": "no-such-message"}',
    '{"type": "phase", "phase": "stop"}',                    # a field missing
    '{"type": "cycle_start", "cycle": "three", "t": 0}',    # a field of the wrong type
    '{"type": "window", "figures": [1, 2]}',
    '{"type": "cycle", "row": {"outcome": "clean"}}',       # a row of no cycle
    '{"type": "cycle", "row": {"cycle": 1, "requests": "many"}}',
    '{"type": "cell_done"}',                                  # a matrix cell's record without its exit status
    '{"type": "cell_done", "exit": "failed", "run_id": "r"}',
    '{"type": "cell_done", "exit": 1, "reasons": 5}',
])
def test_a_line_that_is_not_a_message_decodes_to_none(line):
    assert M.decode(line) is None


def test_rows_keep_only_cycle_row_fields_typed_as_the_row():
    line = json.dumps({"type": "partial", "shm_regions": ["r1"],
                       "row": {"cycle": 2.0, "stubs_killed": 1.0, "start_latency_s": 1, "outputs_ok": None,
                               "stop_error": "Exit timeout", "not_a_field": 5}})
    msg = M.decode(line)
    assert msg == M.Partial({"cycle": 2, "stubs_killed": 1, "start_latency_s": 1.0, "outputs_ok": None,
                             "stop_error": "Exit timeout"}, ("r1",))
    assert type(msg.row["cycle"]) is int and type(msg.row["start_latency_s"]) is float


def test_typed_row_uses_the_dataclass_types():
    values = {f.name: None for f in dataclasses.fields(P.CycleRow)}
    values.update(run_id="r", cycle=np.int64(3), engine="capi", model="m", retain="none", outcome="clean",
                  restart="fresh-process", stop_strategy="stop", started_at="t", requests=np.float64(10.0),
                  throughput=np.int64(5), outputs_ok=np.bool_(True), stop_error=RuntimeError("e"), extra="dropped")
    row = P.typed_row(P.CycleRow, values)
    assert (row.cycle, row.requests, row.throughput, row.outputs_ok, row.stop_error) == (3, 10, 5.0, True, "e")
    assert [type(v) for v in (row.cycle, row.requests, row.throughput, row.outputs_ok)] == [int, int, float, bool]
    assert row.lane is None and row.schema_version == P.SCHEMA_VERSION


def test_window_row_from_a_window_message():
    msg = M.decode(M.Window({"cycle": 2, "window": 1, "throughput": 10, "concurrency": 4.0, "requests": 40.0,
                             "mode": "open", "junk": 1}).encode())
    w = P.window_row("run", "capi", "m", msg.figures)
    assert (w.run_id, w.cycle, w.window, w.tool, w.mode, w.concurrency, w.requests, w.errors) == \
        ("run", 2, 1, "rig", "open", 4, 40, 0)
    assert type(w.throughput) is float and type(w.concurrency) is int


def test_a_cells_record_reads_back_typed():
    msg = M.decode('{"type": "cell_done", "exit": 1.0, "run_id": "r1", "reasons": ["leaks: 1 stub(s)"], "junk": 1}')
    assert msg == M.CellDone(1, "r1", ("leaks: 1 stub(s)",), "")
    assert type(msg.exit) is int and type(msg.reasons) is tuple
    assert M.decode('{"type": "cell_done", "exit": 3}') == M.CellDone(3, None, (), "")  # the rest at their defaults
