"""The store's pure parts: schemas agree with their row types, writes are atomic units."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pyarrow.parquet as pq

from rig.store import TABLES, CycleRow, Store, arrow_schema


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
