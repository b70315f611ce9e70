"""Compaction: each finished run's unit files merged into ``<run_id>-merged.parquet``, one per
table and partition, so that reading stays fast as nights add up (``Store.compact``; the command
``rig compact`` parses and prints around it).

An object store (``s3://...``) has no locks and no rename: the merged object is written, then the
unit objects removed (readers drop the rows they see twice meanwhile)."""

from __future__ import annotations

import contextlib
import os

from rig.store.schema import KEYS, MERGED, TABLES, arrow_schema, unit_of


def _lock(store, run_id: str):
    """The run's lock (see preflight.lock_run), taken without waiting: the open file, None where
    the run has none (its work folder removed, or a remote store's run from another machine),
    False where a process holds it."""
    import fcntl

    path = store.work_dir(run_id) / ".lock"
    if not path.exists():
        return None
    f = open(path, "a+")  # noqa: SIM115
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return False
    f.seek(0)
    f.truncate()
    f.write(f"rig compact (pid {os.getpid()})\n")
    f.flush()
    return f


def compact(store, run_id: str | None = None, owner: bool = False, progress=None) -> dict:
    """Merge each finished run's unit files (or ``run_id``'s) into ``<run_id>-merged.parquet``, one
    per table and partition, sorted by the table's key: written under a hidden name, renamed into
    place, then the units it holds removed (readers drop the rows they see twice meanwhile). A run
    whose lock a process holds is skipped; ``owner``: the caller holds it (the end of its own run).
    ``progress(i, n, run_id, summary)``: called after each run.
    Returns {"compacted": {run: [(table, unit files, rows)]}, "skipped": {run: why}}."""
    runs = sorted({unit_of(f)[0] for t in TABLES for f in store.files(t, run_id=run_id) if unit_of(f)[1] != MERGED})
    summary: dict = {"compacted": {}, "skipped": {}}
    for i, run_ in enumerate(runs, 1):
        lock = None if owner else _lock(store, run_)
        if lock is False:
            summary["skipped"][run_] = "running: a process holds its lock"
        else:
            try:  # listed again under the lock: what the run wrote before it is all there is
                merged = [m for t in TABLES for m in _merge_run(store, t, run_)]
                if merged:  # nothing where all its units are damaged (or a foreign file's name)
                    summary["compacted"][run_] = merged
            finally:
                if lock:
                    lock.close()
        if progress:
            progress(i, len(runs), run_, summary)
    return summary


def _merge_run(store, table: str, run: str):
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    groups: dict[str, list[str]] = {}
    for f in store.files(table, run_id=run):
        groups.setdefault(f.rsplit("/", 1)[0], []).append(f)
    for d, files in groups.items():
        store.sort_out(table, [f for f in files if f not in store.bad])
        good = [f for f in files if f not in store.bad]  # damaged units stay where they are
        units = [f for f in good if unit_of(f)[1] != MERGED]
        if not units:
            continue
        tbl = pads.dataset(good, schema=arrow_schema(TABLES[table]), format="parquet", filesystem=store.fs).to_table()
        keys = list(KEYS[table])
        # a row in the merged file and in a unit (a compaction killed before its clean-up): once,
        # the unit's (files() lists the merged file first)
        idx = tbl.append_column("_i", pa.array(range(tbl.num_rows), pa.int64()))
        last = idx.group_by(keys, use_threads=False).aggregate([("_i", "max")]).column("_i_max")
        tbl = tbl.take(last).sort_by([(k, "ascending") for k in keys])
        store.put(tbl, d, f"{run}-{MERGED}.parquet")
        for f in units:
            with contextlib.suppress(FileNotFoundError):
                store.fs.delete_file(f)
        for info in store.fs.get_file_info(pafs.FileSelector(d)):  # what a killed compaction left
            if info.base_name.startswith(f".{run}-{MERGED}.parquet.") and info.base_name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    store.fs.delete_file(info.path)
        yield table, len(units), tbl.num_rows
