"""The result store: Parquet tables ``runs``, ``cycles`` and ``windows`` under one folder.

Layout (hive partitions, readable with ``pandas.read_parquet("DIR/cycles")``)::

    DIR/<table>/triton_version=<v>/date=<yyyy-mm-dd>/<run_id>-<unit>.parquet

Each unit (a run's row, a cycle, a cycle's windows) is its own file, written under a hidden
temporary name in the same folder and renamed into place, so a crash or SIGKILL never leaves a
half-written file where readers look (pyarrow skips names starting with ``.`` or ``_``), and two
soaks writing into one folder never touch the same file. ``triton_version`` and ``date`` come
from the partition path, not from the files.

Schema history (``schema_version`` column):
  1: first version (runs, cycles, windows).
  2: scheduled, dropped, bad_outputs, lane (cycles, windows); lost_samples, clipped (windows).
  3: instances (windows): the model instances of a bench point.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import typing
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 3  # see the history above
PARTITIONS = ("triton_version", "date")


@dataclasses.dataclass(frozen=True)
class RunRow:
    """One soak, bench or cycle command: what ran, where, how."""

    run_id: str
    started_at: str            # ISO 8601, UTC
    command: str               # cycle | soak | bench
    host: str
    cpu: str
    gpu: str | None
    engine: str
    runtime: str               # embedded-0.7.0 | container
    model: str
    config: str                # the whole effective config, TOML text
    rig_version: str
    python_version: str
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class CycleRow:
    """One lifecycle cycle: start, load, stop, verify. Every cycle yields one, whatever happened."""

    run_id: str
    cycle: int
    engine: str
    model: str
    retain: str                # none | last-response | last-array
    outcome: str               # see cycle.OUTCOMES
    restart: str               # fresh-process | same-process
    stop_strategy: str         # stop | unload-then-stop
    started_at: str
    start_latency_s: float | None
    stop_latency_s: float | None
    finalize_expected: int | None
    finalize_before_stop: int | None
    finalize_after_stop: int | None
    finalize_errors: int | None
    stubs_alive_after_stop: int | None
    stubs_killed: int | None
    shm_regions_leaked: int | None
    requests: int | None
    errors: int | None
    outputs_ok: bool | None           # the template model's answer checked (None: not checkable)
    throughput: float | None          # infer/s during the cycle's workload
    workload_s: float | None          # how long the requests/workload ran
    worker_pid: int | None
    worker_rss_bytes: int | None
    worker_fds: int | None
    worker_threads: int | None
    stub_rss_bytes: int | None
    gpu_memory_bytes: int | None
    cycle_wall_s: float | None        # the whole cycle as the parent saw it
    overhead_s: float | None          # cycle_wall_s less start, workload and stop: the rig's own cost
    stop_error: str | None
    cleanup: str | None               # ok | close failed/blocked | crashed: SIG... | hung (after stop)
    detail: str | None                # signal, phase that hung, first error, ...
    scheduled: int | None = None      # open loop: sends the schedule held
    dropped: int | None = None        # open loop: scheduled but never sent before the end
    bad_outputs: int | None = None    # responses whose checked output was wrong (see outputs.reference_output)
    lane: str | None = None           # how the load was sent: native | asyncio | python | tasks (and why not native)
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class WindowRow:
    """One measurement window of a workload (a bench point or a slice of a soak cycle)."""

    run_id: str
    cycle: int
    window: int
    engine: str
    model: str
    tool: str                  # rig | perf_analyzer
    start_s: float             # since the workload started
    length_s: float
    mode: str                  # closed | open
    concurrency: int | None
    rate: float | None
    requests: int
    errors: int
    throughput: float
    p50_us: float | None
    p90_us: float | None
    p99_us: float | None
    p999_us: float | None
    max_us: float | None
    mean_us: float | None
    stable: bool | None        # perf_analyzer's rule: this and the 2 windows before within 10 %
    hub_block_max_ms: float | None
    worker_rss_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_utilization: float | None
    histogram: str | None      # HDR histogram, base64 (hdrhistogram's encode), microseconds
    scheduled: int | None = None     # open loop: sends scheduled within this window
    dropped: int | None = None       # open loop: scheduled but never sent (the last window)
    bad_outputs: int | None = None   # responses with a wrong checked output
    lost_samples: int | None = None  # latencies a lane could not keep (a full buffer): counted, not lost
    clipped: int | None = None       # latencies above the histogram's range (60 s), recorded as 60 s
    lane: str | None = None
    instances: int | None = None     # bench: model instances the point ran with (None: not set by the rig)
    schema_version: int = SCHEMA_VERSION


def window_row(run_id: str, engine: str, model: str, msg: dict, tool: str = "rig") -> WindowRow:
    """A ``WindowRow`` from a worker's window message (or perf_analyzer's figures), with the
    run's tags and defaults for what the message lacks."""
    fields = {f.name for f in dataclasses.fields(WindowRow)} - {"schema_version"}
    row = {k: msg.get(k) for k in fields}
    row.update(run_id=run_id, engine=engine, model=model, tool=msg.get("tool", tool),
               cycle=int(msg.get("cycle") or 0), mode=msg.get("mode") or "closed")
    for k in ("requests", "errors"):
        row[k] = int(row.get(k) or 0)
    row["throughput"] = float(row.get("throughput") or 0.0)
    row["start_s"] = float(row.get("start_s") or 0.0)
    row["length_s"] = float(row.get("length_s") or 0.0)
    row["window"] = int(row.get("window") or 0)
    return WindowRow(**row)


@dataclasses.dataclass(frozen=True)
class CycleResult:
    """What one cycle leaves: its row and its windows, stored together (windows first)."""

    row: CycleRow
    windows: tuple[WindowRow, ...] = ()


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


TABLES = {"runs": RunRow, "cycles": CycleRow, "windows": WindowRow}


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Store:
    """Writes rows as atomic Parquet files; reads tables back as pandas frames."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.damaged: list[Path] = []  # files that read() skipped: not Parquet, or cut short

    def _partition_dir(self, table: str, triton_version: str, date: str) -> Path:
        safe = triton_version.replace("/", "_") or "unknown"
        return self.root / table / f"triton_version={safe}" / f"date={date}"

    def write(self, table: str, rows: list, triton_version: str, unit: str, date: str | None = None) -> Path:
        """Write one unit (e.g. ``run``, ``c000012``) of rows atomically; returns the file's path."""
        row_type = TABLES[table]
        schema = arrow_schema(row_type)
        data = {f.name: [getattr(r, f.name) for r in rows] for f in dataclasses.fields(row_type)}
        tbl = pa.Table.from_pydict(data, schema=schema)
        d = self._partition_dir(table, triton_version, date or today())
        d.mkdir(parents=True, exist_ok=True)
        run_id = rows[0].run_id if rows else "empty"
        final = d / f"{run_id}-{unit}.parquet"
        tmp = d / f".{final.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            pq.write_table(tbl, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk leaves no half file behind, hidden or not
            raise
        return final

    def read(self, table: str, run_id: str | None = None, columns: list[str] | None = None,
             filter=None):
        """The table as a frame; ``columns`` reads only those (windows without ``histogram``
        read many times faster), ``filter`` (a pyarrow expression) only the rows it keeps."""
        import pandas as pd

        path = self.root / table
        if not path.is_dir() or not any(path.rglob("*.parquet")):
            return pd.DataFrame(columns=[f.name for f in dataclasses.fields(TABLES[table])])
        import pyarrow.dataset as pads

        # An explicit schema unifies files of older schema versions (their missing, nullable,
        # columns read as null), which plain pd.read_parquet(DIR) does not do. A damaged file
        # (cut short by a full disk, say) is skipped and listed in ``damaged``, not fatal.
        schema = arrow_schema(TABLES[table])
        for name in PARTITIONS:
            schema = schema.append(pa.field(name, pa.string()))
        files = []
        for f in sorted(path.rglob("*.parquet")):
            try:
                pq.ParquetFile(f).metadata  # its footer: a file cut short has none
            except (pa.ArrowException, OSError):
                if f not in self.damaged:
                    self.damaged.append(f)
                continue
            files.append(str(f))
        if not files:
            return pd.DataFrame(columns=[f.name for f in dataclasses.fields(TABLES[table])])
        ds = pads.dataset(files, format="parquet", schema=schema, partition_base_dir=str(path),
                          partitioning=pads.partitioning(pa.schema([pa.field(n, pa.string()) for n in PARTITIONS]),
                                                         flavor="hive"))
        df = ds.to_table(columns=columns, filter=filter).to_pandas()
        if run_id is not None:
            df = df[df["run_id"] == run_id]
        return df.reset_index(drop=True)

    def cycles_done(self, run_id: str) -> set[int]:
        df = self.read("cycles", run_id)
        return set(int(c) for c in df["cycle"]) if len(df) else set()

    def run_row(self, run_id: str) -> dict | None:
        df = self.read("runs", run_id)
        return None if not len(df) else df.iloc[0].to_dict()
