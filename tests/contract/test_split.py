"""Issue 54, item 5: the client's time beyond Triton's is the rig's own only where Triton's
statistics cover a request's life. Where a model is decoupled, or answers after ``execute`` returns
(its ``execute`` returned None), the summary, the bench table, the report and a slowing note say so
and never call the difference the rig's own. Pure functions over windows as the store holds them;
the evidence hook's ``execute`` wrapper on a class of its own; the real core: tests/e2e/test_split_real.py."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rig.contract import server_stats as ss
from rig.contract.rows import WindowRow, window_row


def _w(i: int, request: float = 200.0, client: float = 528.0, n: int = 100, why: str | None = None, **kw) -> dict:
    """Window ``i`` (1 s): ``n`` requests of ``request`` us in Triton (queue 50, infer 140, 5 each of
    input and output) and ``client`` us at the client."""
    return {"window": i, "start_s": float(i - 1), "length_s": 1.0, "requests": n, "mean_us": client,
            "server_success": n, "server_failures": 0, "server_inferences": n, "server_executions": n,
            "server_request_ns": int(request * 1000 * n), "server_queue_ns": int((request - 150) * 1000 * n),
            "server_compute_input_ns": 5000 * n, "server_compute_infer_ns": 140_000 * n,
            "server_compute_output_ns": 5000 * n, "batch_sizes": '{"1": %d}' % n, ss.UNCOVERED: why, **kw}


def test_covered_windows_give_the_rigs_own_and_uncovered_ones_do_not():
    t = ss.over_windows([_w(1), _w(2)])
    assert t["uncovered"] is None and t["own_us"] == pytest.approx(328.0) and t["beyond_us"] is None
    why = "stream is decoupled"
    t = ss.over_windows([_w(1, why=why), _w(2, why=why)])
    assert t["uncovered"] == why and t["own_us"] is None and t["beyond_us"] == pytest.approx(328.0)
    # reasons of several windows together, each once; one window is enough
    t = ss.over_windows([_w(1), _w(2, why="a is decoupled; b answers after execute returns"), _w(3, why=why)])
    assert t["uncovered"] == "a is decoupled; b answers after execute returns; stream is decoupled"
    assert ss.not_split(328.4, why) == (
        "client - Triton = 328 us: not split (stream is decoupled: Triton's statistics of a request end when "
        "execute returns, and its answer may leave later)")
    # a window without the server's columns says nothing, whatever it holds
    assert ss.uncovered([{**_w(1, why=why), "server_success": None}]) is None


def test_a_window_from_before_schema_17_that_streamed_reads_as_decoupled():
    old = [{k: v for k, v in _w(i).items() if k != ss.UNCOVERED} | {"responses": 300} for i in (1, 2)]
    t = ss.over_windows(old)
    assert t["uncovered"] == "the model streams (decoupled)" and t["own_us"] is None
    assert ss.over_windows([_w(1, responses=None)])["uncovered"] is None


def test_the_reason_names_decoupled_models_then_those_answering_after_return():
    assert ss.uncovered_reason([], []) is None
    assert ss.uncovered_reason(["chat"], ["chat", "score"]) == "chat is decoupled; score answers after execute returns"
    assert ss.uncovered_reason([], ["b", "a", "a"]) == "a answers after execute returns; b answers after execute returns"


def test_a_slowing_note_never_names_an_uncovered_difference_the_rigs_own():
    why = "stream is decoupled"
    grew = [_w(i, client=528.0 + 50 * (i - 1), why=why) for i in range(1, 5)]
    growth = ss.part_growth(grew)
    assert "own" not in growth and growth["beyond"] == pytest.approx(150.0)
    text = ss.growth_text(growth)
    assert text.startswith("the client's time beyond Triton's (not split") and "rig's own" not in text
    held = ss.growth_text(ss.part_growth([_w(i, why=why) for i in range(1, 5)]))
    assert held == "no part of a request's time grew, Triton's or the client's beyond it"
    covered = ss.growth_text(ss.part_growth([_w(i, client=528.0 + 50 * (i - 1)) for i in range(1, 5)]))
    assert covered == "the rig's own +150 us a request"  # the control: covered, it is the rig's


def _tally(why):
    from helpers import cycle_row

    from rig.workflows.tally import Tally

    t = Tally()
    rows = [window_row("r1", "capi", "m", {"cycle": 1, **_w(i, why=why)}) for i in (1, 2)]
    t.add(cycle_row(shape="unbatched", throughput=100.0), tuple(rows))
    return t


def test_the_summary_says_not_split_where_the_statistics_cannot_cover_a_request():
    from rig.workflows.tally import summary_table

    text = summary_table(_tally("stream is decoupled"))
    assert "the rig's own" not in text
    line = next(x for x in text.splitlines() if "client - Triton" in x).strip()
    assert line.startswith("client - Triton = 328 us: not split (stream is decoupled: Triton's statistics")
    assert line.endswith("the streaming lane's own cost, measured apart: under 2 us a request "
                         "(docs/measurements/speed.md)")
    after = summary_table(_tally("score answers after execute returns"))
    assert "the rig's own" not in after and "streaming lane" not in after
    assert "the rig's own: client - Triton = 328 us" in summary_table(_tally(None))  # the control


def _bench_row(beyond: float | None):
    from rig.workflows import bench

    server = {"client_us": 528.0, "request_us": 200.0, "queue_us": 50.0, "compute_input_us": 5.0,
              "compute_infer_us": 140.0, "compute_output_us": 5.0, "overhead_us": 0.0,
              "own_us": None if beyond else 328.0, "beyond_us": beyond, "mean_batch_size": 1.0}
    pa_server = {**server, "client_us": 600.0, "own_us": 400.0, "beyond_us": None}
    return bench.point_medians(1, None, [{"throughput": 1.0, "server": server}],
                               [{"throughput": 1.0, "server": pa_server}])


def test_the_bench_table_marks_the_own_column_not_split():
    from rig.workflows import bench

    text = bench.format_table([_bench_row(328.0)], True, 1)
    lines = text.splitlines()
    for tool in ("rig", "perf_analyzer"):  # the same model for both tools: neither difference is its own
        line = next(x for x in lines if x.split()[2:3] == [tool])
        assert line.split()[10] == "n/s", line
    ratio = next(x for x in lines if "rig / PA" in x and x.split()[0] == "-")
    assert ratio.split()[12] == "n/s"
    note = next(x for x in lines if x.startswith("n/s: not split"))
    assert "328 us at 1" in note and "not the tool's own" in note
    plain = bench.format_table([_bench_row(None)], True, 1)  # the control: the number, no note
    rig_line = next(x for x in plain.splitlines() if x.split()[2:3] == ["rig"])
    assert rig_line.split()[10] == "328" and "n/s" not in plain


def _write_old(tmp_path, rows, schema_version: int):
    """``rows`` as a store of ``schema_version`` wrote them: without ``server_uncovered``."""
    from rig.store import arrow_schema

    fields = [f for f in dataclasses.fields(WindowRow) if f.name != ss.UNCOVERED]
    schema = pa.schema([arrow_schema(WindowRow).field(f.name) for f in fields])
    data = {f.name: [getattr(r, f.name) if f.name != "schema_version" else schema_version for r in rows]
            for f in fields}
    d = tmp_path / "windows" / "triton_version=2.51.0" / "date=2026-01-01"
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pydict(data, schema=schema), d / f"{rows[0].run_id}-c000001.parquet")


def test_the_report_says_not_split_and_an_older_store_still_reads(tmp_path):
    from rig.analysis.report import page as report, server as report_server
    from rig.store import Store

    def rows(run, why=None, **kw):
        return [window_row(run, "capi", "m", {"cycle": 1, "concurrency": 1, "throughput": 100.0, "tool": "rig",
                                              "mode": "closed", **_w(i, why=why, **kw)}) for i in (1, 2)]

    _write_old(tmp_path, rows("r0"), 16)  # a control and a streaming model before schema 17
    _write_old(tmp_path, rows("r1", responses=200), 16)
    store = Store(tmp_path)
    store.write("windows", rows("r2", why="stream is decoupled"), "2.51.0", "c000001", date="2026-01-01")
    w = store.read("windows")
    assert w.loc[w.run_id == "r0", ss.UNCOVERED].isna().all()
    frame = report_server.server_section(w, ["run_id"]).blocks[0].frame.set_index("run_id")
    assert frame.loc["r0", "own µs"] == pytest.approx(328.0) and frame.loc["r0", "not split"] == "-"
    for run, why in (("r1", "the model streams (decoupled)"), ("r2", "stream is decoupled")):
        assert frame.loc[run, "own µs"] is None or frame.loc[run, "own µs"] != frame.loc[run, "own µs"]
        assert frame.loc[run, "not split"] == ss.not_split(328.0, why)
    md, page = report.build(report.load(str(tmp_path)))
    assert "Where the time goes" in page and "not split" in page


def test_the_hook_leaves_one_marker_per_instance_the_first_time_execute_returns_none(tmp_path, monkeypatch):
    import asyncio

    from rig.contract.evidence import ANSWERS_AFTER_RETURN, answering_after_return
    from rig.worker.hook import evidence

    monkeypatch.setattr(evidence, "_EVIDENCE_DIR", str(tmp_path))

    class Inside:
        def execute(self, requests):
            return [r * 2 for r in requests]

    class Later:
        def execute(self, requests):
            return None

    class Async:
        async def execute(self, requests):
            return None

    for cls in (Inside, Later, Async):
        evidence._instrument(cls)
    for cls, name in ((Inside, "inside"), (Later, "later"), (Async, "async")):
        m = cls()
        m.initialize({"model_name": name, "model_instance_name": f"{name}_0"})
        for _ in range(3):
            got = m.execute([1, 2])
            got = asyncio.run(got) if cls is Async else got
        assert got == ([2, 4] if cls is Inside else None)
    files = sorted(p.name for p in tmp_path.glob(f"*-{ANSWERS_AFTER_RETURN}.json"))
    assert len(files) == 2 and answering_after_return(tmp_path) == {"later", "async"}
    assert json.loads(next(tmp_path.glob(f"*later_0-{ANSWERS_AFTER_RETURN}.json")).read_text())["model"] == "later"
    assert answering_after_return(None) == set() and answering_after_return(tmp_path / "none") == set()
