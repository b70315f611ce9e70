"""Triton's own statistics in every window (issue 42): the pure arithmetic over real messages of the
core (``tests/data/server_stats``: read from core 2.51.0 through the capi engine), the worker's
reader over a fake engine, perf_analyzer's server summary, the tables that show where the time
goes, and a store written before schema 14 still reading and reporting."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import ROOT
from rig.contract import server_stats as ss
from rig.contract.rows import WindowRow, window_row
from rig.worker.engines.base import EngineError

DATA = json.loads((ROOT / "tests" / "data" / "server_stats" / "capi-2.51.0.json").read_text())


def test_totals_read_a_real_message_counts_times_and_batches():
    loaded, five, batched = (ss.totals(m) for m in DATA["batched"])
    assert loaded == {**dict.fromkeys(ss.FIGURES, 0), "batches": {}}
    assert five["success"] == five["inferences"] == five["executions"] == 5 and five["batches"] == {1: 5}
    assert batched["success"] == batched["inferences"] == 29 and batched["executions"] == 9
    assert batched["batches"] == {1: 6, 7: 1, 8: 2}
    assert sum(s * n for s, n in batched["batches"].items()) == batched["inferences"]
    plain = ss.totals(DATA["unbatched"])  # max_batch_size 0: every execution is one request
    assert plain["batches"] == {1: 7} and plain["executions"] == plain["inferences"] == 7
    with pytest.raises(ValueError):
        ss.totals({"error": "no model"})


def test_a_difference_is_what_happened_between_two_reads():
    _, five, batched = (ss.totals(m) for m in DATA["batched"])
    d = ss.difference(batched, five)
    assert d["success"] == 24 and d["executions"] == 4 and d["batches"] == {1: 1, 7: 1, 8: 2}
    assert d["request_ns"] == batched["request_ns"] - five["request_ns"]
    # counters that went back (the model loaded again): the later read is all of it
    assert ss.difference(five, batched) == five
    assert ss.difference(five, None) == five


def test_window_columns_are_window_rows_fields_and_null_without_figures():
    fields = {f.name for f in dataclasses.fields(WindowRow)}
    assert set(ss.ALL_COLUMNS) <= fields
    assert ss.window_columns(None) == dict.fromkeys(ss.ALL_COLUMNS)
    _, five, batched = (ss.totals(m) for m in DATA["batched"])
    cols = ss.window_columns(ss.difference(batched, five))
    assert cols["server_success"] == 24 and cols["server_executions"] == 4
    assert json.loads(cols["batch_sizes"]) == {"1": 1, "7": 1, "8": 2}
    assert cols["mean_batch_size"] == pytest.approx(6.0)
    row = window_row("r", "capi", "numpy", {"window": 1, "requests": 24, **cols})
    assert row.server_compute_infer_ns == cols["server_compute_infer_ns"] and row.batch_sizes == cols["batch_sizes"]


def _window(totals_now, totals_before, mean_us, requests):
    return {**ss.window_columns(ss.difference(totals_now, totals_before)), "mean_us": mean_us, "requests": requests}


def test_the_parts_add_up_to_the_request_and_the_client_pays_the_rest():
    reads = [ss.totals(m) for m in DATA["batched"]]
    windows = [_window(reads[1], reads[0], 20000.0, 5), _window(reads[2], reads[1], 12000.0, 24),
               {"mean_us": 99999.0, "requests": 1000}]  # a window without the server's columns: left out
    t = ss.over_windows(windows)
    assert t["windows"] == 2 and t["success"] == 29
    parts = sum(t[f"{p}_us"] for p in ss.PARTS)
    assert t["request_us"] == pytest.approx(parts + t["overhead_us"])
    assert t["request_us"] == pytest.approx(reads[2]["request_ns"] / 29 / 1000)
    assert t["client_us"] == pytest.approx((20000 * 5 + 12000 * 24) / 29)
    assert t["own_us"] == pytest.approx(t["client_us"] - t["request_us"])
    assert t["batch_sizes"] == {1: 6, 7: 1, 8: 2} and t["mean_batch_size"] == pytest.approx(29 / 9)
    assert ss.over_windows([{"mean_us": 1.0, "requests": 3, "server_success": None}]) == {}
    assert ss.batch_text(t["batch_sizes"]) == "1 x 6, 7 x 1, 8 x 2"
    assert ss.batch_text({}) == "-"


class _Engine:
    """model_statistics from a script: a message, an error, or None (an engine that cannot ask)."""

    def __init__(self, script):
        self.script = list(script)

    def model_statistics(self, model):
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def test_the_reader_differences_window_by_window_and_a_failed_read_costs_windows_not_the_load():
    from rig.worker.serverstats import ServerStats, reader

    b = DATA["batched"]
    stats = ServerStats(_Engine([b[0], b[1], EngineError("gone", "UNAVAILABLE"), b[1], b[2]]), ["numpy"])
    stats.begin()
    first = stats.take()
    assert first["server_success"] == 5 and first["batch_sizes"] == '{"1": 5}'
    assert stats.take() == ss.window_columns(None)  # the failed read: null, noted once
    assert "numpy" in stats.note and "gone" in stats.note
    assert stats.take()["server_success"] is None  # no start to difference from
    assert stats.take()["server_success"] == 24  # and back
    assert reader(_Engine([]), ["numpy"], on=False) is None
    quiet = ServerStats(_Engine([None]), ["numpy"])  # the engine cannot ask: null, no note
    quiet.begin()
    assert quiet.take() == ss.window_columns(None) and quiet.note is None


def test_the_reader_adds_the_runs_models_together():
    from rig.worker.serverstats import ServerStats

    b, u = DATA["batched"], DATA["unbatched"]
    stats = ServerStats(_Engine([b[1], {"model_stats": []}, b[2], u]), ["numpy", "plain"])
    stats.begin()
    cols = stats.take()
    assert cols["server_success"] == 24 + 7 and json.loads(cols["batch_sizes"]) == {"1": 8, "7": 1, "8": 2}


def test_the_engines_ask_the_core_through_their_own_api():
    from rig.worker.engines.official.engine import OfficialEngine

    class Handle:
        def statistics(self):
            return DATA["unbatched"]

    class Server:
        def model(self, name):
            return Handle()

    engine = OfficialEngine()
    engine._server = Server()  # the bindings' Server, as far as model_statistics goes
    assert engine.model_statistics("plain") == DATA["unbatched"]


# perf_analyzer 2.48's stdout over core 2.51.0 (C API mode, numpy model, concurrency 1), as printed
PA_LINES = """Request concurrency: 1
  Client: 
    Request count: 25915
    Throughput: 6877.07 infer/sec
    Avg latency: 142 usec (standard deviation 1286 usec)
    p50 latency: 101 usec
  Server: 
    Inference count: 25915
    Execution count: 25915
    Successful request count: 25915
    Avg request latency: 120 usec (overhead 1 usec + queue 21 usec + compute input 8 usec + compute infer 70 usec + compute output 18 usec)
""".splitlines()


def test_perf_analyzers_server_summary_is_read_and_spread_over_its_windows():
    from rig.workflows.bench_pa import pa_server_columns
    from rig.parent import perf_analyzer_output as pao

    kept = [line for line in PA_LINES if pao.is_server_line(line)]
    assert len(kept) == 4, "its client's Request count is not the server's"
    got = pao.parse_server_summary(kept)
    assert got == {"inferences": 25915, "executions": 25915, "success": 25915, "request_us": 120.0,
                   "overhead_us": 1.0, "queue_us": 21.0, "compute_input_us": 8.0, "compute_infer_us": 70.0,
                   "compute_output_us": 18.0}
    assert pao.parse_server_summary(PA_LINES[:6]) is None
    windows = [{"requests": 8000, "mean_us": 150.0}, {"requests": 9000, "mean_us": 140.0},
               {"requests": 8915, "mean_us": 136.0}]
    cols = pa_server_columns(got, windows)
    assert sum(c["server_success"] for c in cols) == 25915 and all(c["batch_sizes"] is None for c in cols)
    t = ss.over_windows([{**w, **c} for w, c in zip(windows, cols)])
    assert t["request_us"] == pytest.approx(120.0) and t["queue_us"] == pytest.approx(21.0)
    assert t["overhead_us"] == pytest.approx(3.0)  # its own figure is rounded to whole us: 120 - 117
    assert t["mean_batch_size"] == pytest.approx(1.0)
    assert pa_server_columns(None, windows) == [{}, {}, {}]


def test_the_bench_table_shows_where_the_time_goes_for_both_tools():
    from rig.workflows import bench

    rig = [{"throughput": 5000.0, "p50_us": 150.0, "p99_us": 300.0,
            "server": {"client_us": 186.0, "request_us": 175.0, "queue_us": 21.0, "compute_input_us": 19.0,
                       "compute_infer_us": 105.0, "compute_output_us": 28.0, "overhead_us": 2.0, "own_us": 11.0,
                       "mean_batch_size": 1.0}}]
    pa = [{"throughput": 6000.0, "p50_us": 100.0, "p99_us": 400.0, "server": {
        "client_us": 142.0, "request_us": 120.0, "queue_us": 21.0, "compute_input_us": 8.0,
        "compute_infer_us": 70.0, "compute_output_us": 18.0, "overhead_us": 3.0, "own_us": 22.0,
        "mean_batch_size": 1.0}}]
    row = bench.point_medians(1, None, rig, pa)
    assert row["server"]["rig"]["request_us"] == 175.0 and row["server"]["perf_analyzer"]["own_us"] == 22.0
    text = bench.format_table([row], True, 1)
    assert "where the time goes" in text
    rig_line = next(line for line in text.splitlines() if line.split()[2:3] == ["rig"])
    assert rig_line.split()[3:12] == ["186", "175", "21", "19", "105", "28", "2", "11", "1.00"]
    assert any(line.split()[2:3] == ["perf_analyzer"] for line in text.splitlines())
    ratio = next(line for line in text.splitlines() if "rig / PA" in line and line.split()[0] == "-")
    assert ratio.split()[5:8] == ["1.31", "1.46", "1.00"]  # client, server (175/120), queue
    off = bench.point_medians(1, None, [{"throughput": 1.0, "server": {}}], [])
    assert "where the time goes" not in bench.format_table([off], False, 1)  # --server-stats off


def _rows(batched: bool):
    reads = [ss.totals(m) for m in DATA["batched"]]
    w = [_window(reads[1], reads[0], 20000.0, 5), _window(reads[2], reads[1], 12000.0, 24)]
    if not batched:
        plain = ss.totals(DATA["unbatched"])
        w = [_window(plain, None, 19000.0, 7)]
    return [window_row("r1", "capi", "numpy", {"cycle": 1, "window": i + 1, **x}) for i, x in enumerate(w)]


def test_the_soak_summary_says_where_the_time_goes_and_the_batches_formed():
    from helpers import cycle_row

    from rig.workflows.tally import Tally, summary_table

    t = Tally()
    t.add(cycle_row(shape="batched", throughput=100.0), tuple(_rows(True)))
    text = summary_table(t)
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("per request"))
    assert lines[at] == ("per request   client 13,379 us; Triton 12,164 us = queue 5,795 + compute input 84 + "
                         "infer 5,802 + output 479 + overhead 3 (means over 2 windows)")
    assert lines[at + 1].split("(")[0].strip() == "the rig's own: client - Triton = 1,215 us"
    assert "batches       1 x 6, 7 x 1, 8 x 2 (size x executions); mean 3.22" in text
    plain = Tally()
    plain.add(cycle_row(shape="unbatched", throughput=100.0), tuple(_rows(False)))
    text = summary_table(plain)
    assert "per request" in text and "batches" not in text
    assert "per request" not in summary_table(Tally())
    # a fixed count of requests measures no window: the cycles' own batch sizes (schema 15) say
    counted = Tally()
    counted.add(cycle_row(shape="batched", throughput=100.0, batch_sizes='{"1": 3, "4": 9}'), ())
    counted.add(cycle_row(cycle=2, shape="batched", throughput=100.0, batch_sizes='{"4": 1}'), ())
    text = summary_table(counted)
    assert "per request" not in text
    assert "batches       1 x 3, 4 x 10 (size x executions, over the cycles); mean 3.31 requests per execution" in text


def _old_windows_file(tmp_path, rows):
    """``rows`` written as a store of schema 13 wrote them: without the server's columns."""
    new = set(ss.ALL_COLUMNS)
    fields = [f for f in dataclasses.fields(WindowRow) if f.name not in new]
    from rig.store import arrow_schema

    schema = pa.schema([arrow_schema(WindowRow).field(f.name) for f in fields])
    data = {f.name: [getattr(r, f.name) if f.name != "schema_version" else 13 for r in rows] for f in fields}
    d = tmp_path / "windows" / "triton_version=2.51.0" / "date=2026-01-01"
    d.mkdir(parents=True)
    pq.write_table(pa.Table.from_pydict(data, schema=schema), d / "r0-c000001.parquet")


def test_a_store_written_before_schema_14_still_reads_and_reports(tmp_path):
    from rig.analysis.report import page as report, server as report_server
    from rig.store import Store

    old = [window_row("r0", "capi", "numpy", {"cycle": 1, "window": i, "requests": 100, "throughput": 100.0,
                                              "p50_us": 10.0, "p99_us": 20.0, "mean_us": 11.0, "concurrency": 1})
           for i in (1, 2)]
    _old_windows_file(tmp_path, old)
    store = Store(tmp_path)
    w = store.read("windows")
    assert len(w) == 2 and w["server_success"].isna().all() and w["batch_sizes"].isna().all()
    assert report_server.server_section(w, []) is None  # nothing to show, nothing raised
    new = [dataclasses.replace(r, run_id="r1", concurrency=1, mean_us=13000.0) for r in _rows(True)]
    store.write("windows", new, "2.51.0", "c000001", date="2026-01-01")
    md, page = report.build(report.load(str(tmp_path)))
    assert "Where the time goes" in md and "Where the time goes" in page
    sec = report_server.server_section(store.read("windows"), [])
    frame = sec.blocks[0].frame
    assert len(frame) == 1 and frame["windows"].iloc[0] == 2 and frame["batch sizes"].iloc[0] == "1 x 6, 7 x 1, 8 x 2"
    assert frame["Triton µs"].iloc[0] == pytest.approx(
        sum(frame[c].iloc[0] for c in ("queue µs", "compute input µs", "compute infer µs", "compute output µs",
                                       "overhead µs")))
    assert frame["own µs"].iloc[0] == pytest.approx(frame["client µs"].iloc[0] - frame["Triton µs"].iloc[0])
    assert isinstance(w, pd.DataFrame)


# --- which part of a request's time grew over a slowing load ---------------------------------------

def _part_window(i: int, queue: float = 20.0, infer: float = 100.0, own: float = 30.0, n: int = 100,
                 server: bool = True) -> dict:
    """A load's window ``i`` (1 s each) whose requests spent ``queue`` and ``infer`` us in Triton
    (5 us of compute input and output each, 2 us else) and ``own`` us in the rig."""
    request = queue + infer + 5 + 5 + 2
    w = {"window": i, "start_s": float(i - 1), "length_s": 1.0, "requests": n, "mean_us": request + own}
    if server:
        w.update({"server_success": n, "server_failures": 0, "server_inferences": n, "server_executions": n,
                  "server_request_ns": int(request * 1000 * n), "server_queue_ns": int(queue * 1000 * n),
                  "server_compute_input_ns": 5000 * n, "server_compute_infer_ns": int(infer * 1000 * n),
                  "server_compute_output_ns": 5000 * n, "batch_sizes": '{"1": %d}' % n})
    return w


def test_a_slowing_load_names_the_part_of_a_request_that_grew_most():
    # the queue grows from 20 to 200 us a request, infer from 100 to 103; the rest holds
    windows = [_part_window(i, queue=20.0 + 36 * (i - 1), infer=100.0 + 0.6 * (i - 1)) for i in range(1, 7)]
    windows.reverse()  # read in start order, whatever order they come in
    growth = ss.part_growth(windows)
    # the first third (windows 1-2) against the last (5-6)
    assert growth["queue"] == pytest.approx(144.0) and growth["compute_infer"] == pytest.approx(2.4)
    assert growth["compute_input"] == pytest.approx(0.0) and growth["own"] == pytest.approx(0.0)
    assert ss.growth_text(growth) == "Triton's queue +144 us a request, infer +2.4 us"
    # the rig's own cost grows: the client's mean rises, Triton's time holds
    own = [_part_window(i, own=30.0 + 50 * (i - 1)) for i in range(1, 5)]
    assert ss.growth_text(ss.part_growth(own)) == "the rig's own +150 us a request"
    # at most three parts, most first
    many = {"queue": 5.0, "compute_input": 1.0, "compute_infer": 40.0, "compute_output": 2.0, "own": 700.0}
    assert ss.growth_text(many) == "the rig's own +700 us a request, infer +40 us, queue +5.0 us"
    # read, and nothing grew: said so
    assert ss.growth_text(ss.part_growth([_part_window(i) for i in range(1, 5)])) == \
        "no part of a request's time grew, Triton's or the rig's own"


def test_where_the_statistics_are_missing_a_slowing_note_says_nothing_more():
    assert ss.part_growth([_part_window(i, server=False) for i in range(1, 7)]) == {}  # --server-stats off
    assert ss.part_growth([]) == {}  # a fixed count of requests: no windows
    assert ss.part_growth([_part_window(1)]) == {}  # one window: no start and end to compare
    # an older core's windows: the columns null
    old = [{**_part_window(i), **dict.fromkeys(ss.ALL_COLUMNS)} for i in range(1, 5)]
    assert ss.part_growth(old) == {} and ss.growth_text({}) is None
    # windows that answered nothing are not read: two of five left
    some = [_part_window(i, n=0 if i in (2, 3, 4) else 100, queue=20.0 * i) for i in range(1, 6)]
    assert ss.part_growth(some)["queue"] == pytest.approx(80.0)
    # no client mean: the rig's own is left out, Triton's parts still read
    blind = [{**_part_window(i, queue=10.0 * i), "mean_us": None} for i in range(1, 4)]
    assert "own" not in ss.part_growth(blind) and ss.part_growth(blind)["queue"] == pytest.approx(20.0)


def test_the_slowing_reason_carries_what_grew_and_only_a_slowing_one():
    from rig.contract.verdicts import growth_reasons

    row = {"outcome": "clean", "requests": 10_000, "slowdown_pct": 180.0, "slowdown_low_pct": 120.0,
           "p50_change_pct": 170.0, "throughput_change_pct": -60.0, "p50_us_per_1k": 1_000.0,
           "stub_growth_model": "m", "stub_growth_low_b": 900_000.0, "stub_growth_per_1k_b": 1e6,
           "growth_requests": 10_000.0}
    leaking, slowing = growth_reasons(row, grown="Triton's queue +180 us a request, infer +3.0 us")
    assert leaking.startswith("leaking: stub m") and "Triton" not in leaking
    assert slowing == ("slowing: 180 % slower at the load's end than its start (at least 120 %, p50 +170 %, "
                       "throughput -60 %) (Triton's queue +180 us a request, infer +3.0 us)")
    assert growth_reasons(row, grown=None)[1].endswith("throughput -60 %)")  # nothing read: nothing more
    assert growth_reasons({**row, "slowdown_low_pct": 10.0}, grown="Triton's queue +1 us") == [leaking]


def test_the_mean_batch_counts_failed_executions_at_their_size():
    """A model that raises: Triton's ``inference_count`` counts the successful requests only,
    its batch sizes every execution; the mean batch is the sizes' (measured: 6,121 successes and
    2,048 failures in 271 executions of 1 and 3,949 of 2, 2.51.0)."""
    figures = {"inferences": 6121, "executions": 4220, "failures": 2048, "batches": {1: 271, 2: 3949}}
    assert ss.mean_of(figures) == (271 + 2 * 3949) / 4220
    assert ss.mean_of({"inferences": 10, "executions": 5, "batches": {}}) == 2.0
    assert ss.mean_of({"inferences": 0, "executions": 0, "batches": {}}) is None
    cols = ss.cycle_columns(figures)
    assert cols["batch_sizes"] == '{"1": 271, "2": 3949}' and cols["server_failures"] == 2048
    assert ss.cycle_columns(None) == dict.fromkeys(cols)
