"""The streaming measures' parts that run with Locust in the process (windows, the sink) and the
analysis over their rows: run by ``test_streaming.py`` in a process of their own,
``python -m pytest tests/inproc_streaming.py``, never collected into the main session (Locust
monkey-patches its process for gevent)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd


def test_a_window_keeps_stream_columns_null_unless_a_request_streamed():
    from rig.worker.load.windows import Window
    from rig.contract.rows import SCHEMA_VERSION, WindowRow

    w = Window(1, 0.0)
    w.record(np.array([90_000_000, 91_000_000]), 0)
    row = w.row(1.0)
    for k in ("first_response_histogram", "gap_histogram", "first_p50_us", "first_p99_us", "gap_p50_us",
              "gap_p99_us", "responses", "responses_per_request"):
        assert row[k] is None, k
        assert k in {f.name for f in dataclasses.fields(WindowRow)}
    assert SCHEMA_VERSION >= 7
    # Two requests of 3 responses, one answered by the final flag alone: 6 responses over 3.
    w.record_stream(np.array([30_000_000, 31_000_000, 29_000_000]), np.array([30_000_000] * 4),
                    np.array([3, 3, 0]))
    row = w.row(1.0)
    assert row["responses"] == 6 and row["responses_per_request"] == 2.0
    assert abs(row["first_p50_us"] - 30_000) <= 30 and abs(row["gap_p99_us"] - 30_000) <= 30
    from rig.common import hdr
    assert hdr.merge([row["first_response_histogram"]]).get_total_count() == 3
    assert hdr.merge([row["gap_histogram"]]).get_total_count() == 4


def test_the_sink_carries_a_lanes_stream_into_its_window():
    from rig.worker.load.lanes import TaskLane
    from rig.worker.load.sink import Sink
    from rig.worker.load.windows import Window

    class Streaming(TaskLane):  # a lane (rig.worker.engines.base.Lane) whose drains carry a stream
        kind = "native"

        def __init__(self):
            super().__init__()
            self.given = [(np.array([30_000_000]), np.array([30_000_000, 30_000_000]), np.array([3]))]

        def drain(self):
            lat, self.lat = getattr(self, "lat", np.array([90_000_000])), np.empty(0, dtype=np.int64)
            return lat, 0

        def stream(self):
            return self.given.pop() if self.given else None

        def first_error(self):
            return None

    sink = Sink()
    sink.switch(Window(1, 0.0))
    sink.add(Streaming(), "m")
    sink.take_all()
    w = sink.switch(None)
    assert w.requests == 1 and w.responses == 3
    assert w.first_hist.get_total_count() == 1 and w.gap_hist.get_total_count() == 2


def test_streaming_frames_merge_exactly_and_the_verdict_holds_the_bound():
    from rig.analysis import frames, verdict
    from rig.worker.load.windows import Window

    rows = []
    for i, (first, gaps, counts) in enumerate([([20e6, 40e6], [30e6], [2, 0]), ([30e6], [30e6, 30e6], [3])]):
        w = Window(i + 1, float(i))
        w.record(np.array([60_000_000] * len(first)), 0)
        w.record_stream(np.array(first, dtype=np.int64), np.array(gaps, dtype=np.int64), np.array(counts))
        rows.append(w.row(1.0, run_id="r", cycle=1, tool="rig", mode="closed", concurrency=2, rate=None))
    rows.append(Window(3, 2.0).row(1.0, run_id="r", cycle=1, tool="rig", mode="closed", concurrency=4, rate=None))
    s = frames.streaming(pd.DataFrame(rows), by=[])
    assert len(s) == 1, "the point without streaming windows has no row"
    r = s.iloc[0]
    assert r.point == "concurrency 2" and r.windows == 2 and r.first_from == "HDR, 2 windows"
    # 5 responses over 3 requests; first responses 20, 30, 40 ms: p50 30 ms, p99 40 ms
    assert r.responses == 5 and abs(r.responses_per_request - 5 / 3) < 1e-9
    assert abs(r.first_p50_us - 30_000) <= 30 and abs(r.first_p99_us - 40_000) <= 40
    assert verdict.first_response(s, 50_000) == []
    assert verdict.first_response(s, None) == []
    why = verdict.first_response(s, 35_000)
    assert len(why) == 1 and why[0].startswith("first response p99 at concurrency 2: ")
    assert frames.streaming(pd.DataFrame(rows[2:]), by=[]).empty
