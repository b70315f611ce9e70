"""The store's tables as Parquet sees them: each table's row type and Arrow schema, its keys, the
partitions, and how a file's name says its run and unit. Shared by the store and its compaction."""

from __future__ import annotations

import dataclasses
import re
import typing

import pyarrow as pa

from rig.contract.rows import CycleRow, RunRow, WindowRow
from rig.contract.table_rows import BisectRow, FleetRow, MemoryRow

PARTITIONS = ("triton_version", "date")
_ARROW_OF = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}


def arrow_schema(row_type: type) -> pa.Schema:
    """The Arrow schema of a row dataclass: ``X | None`` fields are nullable, others not."""
    hints = typing.get_type_hints(row_type)
    fields = []
    for f in dataclasses.fields(row_type):
        hint = hints[f.name]
        args = typing.get_args(hint)
        nullable = type(None) in args
        base = next(a for a in args if a is not type(None)) if args else hint
        fields.append(pa.field(f.name, _ARROW_OF[base], nullable=nullable))
    return pa.schema(fields)


TABLES = {
    "runs": RunRow,
    "cycles": CycleRow,
    "windows": WindowRow,
    "fleet": FleetRow,
    "memory": MemoryRow,
    "bisect": BisectRow,
}


KEYS = {
    "runs": ("run_id",),
    "cycles": ("run_id", "cycle"),
    "windows": ("run_id", "cycle", "window", "tool"),
    "fleet": ("run_id", "round", "node"),
    "memory": ("run_id", "cycle", "sample", "pid"),
    "bisect": ("run_id", "step"),
}
MERGED = "merged"  # the unit of a run's compacted file: <run_id>-merged.parquet, one per table and partition
_RUN_ID = re.compile(r"(\d{8}T\d{6}-[0-9a-f]+)-(.+)$")  # orchestrator.new_run_id's


def unit_of(path: str) -> tuple[str, str]:
    """(run_id, unit) of ``.../<run_id>-<unit>.parquet`` (a unit may hold a dash: ``pa-c000001``)."""
    stem = path.rsplit("/", 1)[-1][: -len(".parquet")]
    m = _RUN_ID.match(stem)
    run, _, unit = (m.group(1), "", m.group(2)) if m else stem.rpartition("-")
    return run, unit
