"""The store's pure parts: schemas agree with their row types, writes are atomic units."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pyarrow.parquet as pq
import pytest
from stores import real_results  # noqa: F401  (the session's store, a fixture)

from rig.store import TABLES, Store, arrow_schema

from rig.contract.rows import CycleRow


def _cycle(run_id="r1", cycle=1, **kw):
    base = {f.name: None for f in dataclasses.fields(CycleRow)}
    base.update(run_id=run_id, cycle=cycle, engine="capi", model="numpy", retain="none", outcome="clean",
                restart="fresh-process", stop_strategy="stop", started_at="2026-01-01T00:00:00+00:00")
    base.pop("schema_version")
    base.update(kw)
    return CycleRow(**base)


def test_schemas_match_row_types():
    for name, row_type in TABLES.items():
        schema = arrow_schema(row_type)
        assert [f.name for f in schema] == [f.name for f in dataclasses.fields(row_type)], name
        assert "schema_version" in schema.names
        # identifying tags are required, measurements may be missing
        assert not schema.field("run_id").nullable


def test_write_is_one_whole_file_per_unit_and_readable(tmp_path):
    store = Store(tmp_path)
    store.write("cycles", [_cycle(cycle=1, stop_latency_s=2.0)], "2.51.0", "c000001")
    store.write("cycles", [_cycle(cycle=2, stop_latency_s=3.0)], "2.51.0", "c000002")
    store.write("cycles", [_cycle(run_id="other", cycle=1)], "2.51.0", "c000001")
    files = sorted((tmp_path / "cycles").rglob("*"))
    assert not [f for f in files if f.name.startswith(".")], "no temporary file is left"
    for f in files:
        if f.suffix == ".parquet":
            pq.read_table(f)  # each is whole
    df = pd.read_parquet(tmp_path / "cycles")
    assert len(df) == 3
    assert set(df["triton_version"].astype(str)) == {"2.51.0"}
    assert store.cycles_done("r1") == {1, 2}


def test_a_leftover_temporary_file_is_ignored(tmp_path):
    store = Store(tmp_path)
    path = store.write("cycles", [_cycle()], "2.51.0", "c000001")
    (path.parent / ".r1-c000002.parquet.abcd.tmp").write_bytes(b"PAR1 half a file")
    assert len(store.read("cycles")) == 1


def test_files_of_an_older_schema_read_with_new_columns_null(tmp_path):
    """Only nullable columns are ever added: older files read back with them as null."""
    import pyarrow as pa

    store = Store(tmp_path)
    store.write("cycles", [_cycle(cycle=2, outputs_ok=True)], "2.51.0", "c000002")
    old = arrow_schema(CycleRow)
    old = old.remove(old.get_field_index("outputs_ok"))
    d = next((tmp_path / "cycles").rglob("*.parquet")).parent
    row = {f.name: [getattr(_cycle(cycle=1), f.name)] for f in dataclasses.fields(CycleRow) if f.name != "outputs_ok"}
    pq.write_table(pa.Table.from_pydict(row, schema=old), d / "r1-c000001.parquet")
    df = store.read("cycles").sort_values("cycle")
    assert list(df.cycle) == [1, 2]
    assert df.outputs_ok.iloc[0] is None and bool(df.outputs_ok.iloc[1]) is True


def test_cycles_of_schema_5_read_as_two_verdicts(tmp_path):
    """Before schema 6 a cycle had one verdict: infer_error and wrong_output were the load's. Such
    files read back with the lifecycle's verdict re-read from the stop and finalize columns."""
    import pyarrow as pa

    gone = {"load_outcome", "timeouts"}
    old = arrow_schema(CycleRow)
    for name in gone:
        old = old.remove(old.get_field_index(name))
    store = Store(tmp_path)
    store.write("cycles", [_cycle(cycle=9, load_outcome="timeouts", timeouts=2, errors=2, requests=5)], "2.51.0", "c000009")
    d = next((tmp_path / "cycles").rglob("*.parquet")).parent
    rows = [_cycle(cycle=1, outcome="infer_error", errors=3, requests=9, stop_error="Exit timeout expired. Exiting immediately."),
            _cycle(cycle=2, outcome="infer_error", errors=3, requests=9, finalize_expected=1, finalize_before_stop=1),
            _cycle(cycle=3, outcome="wrong_output", requests=9, bad_outputs=2, finalize_expected=1, finalize_before_stop=1),
            _cycle(cycle=4, outcome="exit_timeout", requests=9, errors=0, stop_error="Exit timeout expired"),
            _cycle(cycle=5, outcome="hung")]
    data = {f.name: [getattr(r, f.name) for r in rows] for f in dataclasses.fields(CycleRow) if f.name not in gone}
    pq.write_table(pa.Table.from_pydict({**data, "schema_version": [5] * len(rows)}, schema=old), d / "r1-c000001.parquet")
    df = store.read("cycles").sort_values("cycle")
    assert list(zip(df.outcome, df.load_outcome)) == [
        ("exit_timeout", "errors"), ("clean", "errors"), ("clean", "wrong_outputs"), ("exit_timeout", "ok"),
        ("hung", "not_measured"), ("clean", "timeouts")]
    # a read of a few columns gets the same verdicts
    few = store.read("cycles", columns=["cycle", "outcome", "load_outcome"]).sort_values("cycle")
    assert list(few.columns) == ["cycle", "outcome", "load_outcome"]
    assert list(few.outcome) == list(df.outcome) and list(few.load_outcome) == list(df.load_outcome)
    # a filter on the verdicts holds for the upgraded ones (infer_error of old: clean now)
    clean = store.read("cycles", outcome="clean", columns=["cycle", "outcome"])
    assert sorted(clean.cycle) == [2, 3, 9] and set(clean.outcome) == {"clean"}
    assert sorted(store.read("cycles", load_outcome=["errors", "ok"]).cycle) == [1, 2, 4]
    assert not len(store.read("cycles", outcome="infer_error"))


def test_open_refuses_what_is_no_results_folder_in_one_line(tmp_path):
    from rig.common.errors import RigError

    (tmp_path / "empty").mkdir()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not results")
    (tmp_path / "file").write_text("x")
    Store(tmp_path / "good").write("cycles", [_cycle()], "2.51.0", "c000001")
    for name, says in (("nope", "no results folder"), ("file", "is not a folder"), ("empty", "is empty"),
                       ("foreign", "is not a results folder (no runs/, cycles/, windows/, fleet/, memory/, bisect/ table in it)")):
        try:
            Store.open(tmp_path / name)
        except RigError as e:
            assert says in str(e) and "\n" not in str(e) and "--results" in str(e), e
        else:
            raise AssertionError(f"{name} opened")
    assert len(Store.open(tmp_path / "good").read("cycles")) == 1


def test_where_clauses_parse_and_match_as_one():
    from rig.common.errors import RigError
    from rig.store import where

    assert where.parse(["engine=capi", " run_id = A, B "]) == [("engine", ["capi"]), ("run_id", ["A", "B"])]
    for bad in ("engine", "=capi", "engine=", "engine=,"):
        with pytest.raises(RigError, match="write KEY=VALUE"):
            where.parse([bad])
    with pytest.raises(RigError, match=r"--where colour: no such column \(columns: engine, run_id\)"):
        where.check("colour", ["run_id", "engine"])
    df = pd.DataFrame({"n": [1, 2, None], "x": ["a", "b", None], "ok": [True, False, None],
                       "o": pd.Series([1, 2.0, None], dtype=object)})
    assert list(where.match(df.n, ["1.0", "2"])) == [True, True, False]
    assert list(where.match(df.o, ["1"])) == [True, False, False]  # numbers as numbers, of any dtype
    assert list(where.match(df.x, ["b", "c"])) == [False, True, False]
    assert list(where.match(df.ok, ["true"])) == [True, False, False]
    with pytest.raises(RigError, match="n is a number"):
        where.match(df.n, ["one"])


@pytest.mark.slow
def test_a_real_runs_histograms_are_hdrhistograms_standard_encoding(real_results):
    """Windows written by real soaks: each ``histogram`` decodes with HdrHistogram's own decoder as
    it is stored, to the window's count and percentiles; base64 of it (before schema 8) still
    decodes through ``rig.common.hdr``."""
    import base64

    from hdrh.histogram import HdrHistogram

    from rig.common import hdr

    w = Store(real_results["root"]).read("windows", run_id=real_results["none_a"])
    w = w[w.histogram.notna()]
    assert len(w) >= 5 and w.histogram.str.startswith("HISTF").all()
    for r in w.itertuples():
        h = HdrHistogram.decode(r.histogram)
        assert h.get_total_count() == r.requests > 0
        assert (h.get_value_at_percentile(50), h.get_value_at_percentile(99), h.get_max_value()) == \
            (r.p50_us, r.p99_us, r.max_us)
        old = hdr.decode(base64.b64encode(r.histogram.encode()).decode())
        assert (old.get_total_count(), old.get_value_at_percentile(99)) == (r.requests, r.p99_us)
    both = hdr.merge([*w.histogram, *(base64.b64encode(t.encode()).decode() for t in w.histogram)])
    assert both.get_total_count() == 2 * w.requests.sum()
