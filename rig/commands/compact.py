"""`rig compact RESULTS [--run RUN_ID]`: merge each finished run's unit files into one Parquet
file per table and partition, so reading stays fast as nights add up. A soak or bench compacts
its own run when it ends; this command does it for older or killed runs.

An object store (``s3://...``) has no locks and no rename: the merged object is written, then the
unit objects removed (readers drop the rows they see twice meanwhile). Nothing there says whether
a run is still running, so over a URI ``--run`` is required: name only runs that have ended."""

from __future__ import annotations

import contextlib
import os
import shlex

from rig.errors import RigError
from rig.text import redact


def add_parser(sub) -> None:
    p = sub.add_parser("compact", help="merge finished runs' files into one per table and partition",
                       description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("results", metavar="RESULTS", help="results folder or pyarrow filesystem URI")
    p.add_argument("--run", metavar="RUN_ID",
                   help="only this run (default: every run not running now). Required over an object store "
                   "(s3://...), which has no locks: give only a run that has ended")
    p.set_defaults(func=run)


def _lock(store, run_id: str):
    """The run's lock (see preflight.lock_run), taken without waiting: the open file, None where
    the run has none (its work folder removed, or a remote store's run from another machine),
    False where a process holds it."""
    import fcntl

    path = store.work_dir(run_id) / ".lock"
    if not path.exists():
        return None
    f = open(path, "a+")
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
    Returns {"compacted": {run: [(table, unit files, rows)]}, "skipped": {run: why}}."""
    from rig.store import MERGED, TABLES, _unit_of

    runs = sorted({_unit_of(f)[0] for t in TABLES for f in store.files(t, run_id=run_id)
                   if _unit_of(f)[1] != MERGED})
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

    from rig.store import KEYS, MERGED, TABLES, _unit_of, arrow_schema

    groups: dict[str, list[str]] = {}
    for f in store.files(table, run_id=run):
        groups.setdefault(f.rsplit("/", 1)[0], []).append(f)
    for d, files in groups.items():
        store.sort_out(table, [f for f in files if f not in store.bad])
        good = [f for f in files if f not in store.bad]  # damaged units stay where they are
        units = [f for f in good if _unit_of(f)[1] != MERGED]
        if not units:
            continue
        tbl = pads.dataset(good, schema=arrow_schema(TABLES[table]), format="parquet",
                           filesystem=store.fs).to_table()
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


def run(args) -> int:
    from rig.commands.check import is_results
    from rig.store import TABLES, Store

    store = Store(args.results)
    if not is_results(store):
        raise RigError(f"{store.root} holds no runs, cycles or windows table: give a results folder")
    if not store.local and not args.run:
        raise RigError(f"{store.root} is an object store, which has no locks to tell a running run from an "
                       "ended one: give --run RUN_ID for each run that has ended")
    if args.run and not any(store.files(t, run_id=args.run) for t in TABLES):
        raise RigError(f"no run {args.run!r} in {redact(str(store.root))}: check the run id (`rig report {shlex.quote(redact(str(store.root)))}` lists runs)")

    def progress(i, n, run_id, summary):
        if run_id in summary["skipped"]:
            print(f"[{i}/{n}] {run_id}: skipped ({summary['skipped'][run_id]})", flush=True)
            return
        merged = summary["compacted"].get(run_id, [])
        parts = ", ".join(f"{t} {files} file(s) -> {rows:,} row(s)" for t, files, rows in merged)
        print(f"[{i}/{n}] {run_id}: {parts or 'nothing readable to merge'}", flush=True)

    summary = store.compact(args.run, progress=progress)
    done, skipped = summary["compacted"], summary["skipped"]
    files = sum(m[1] for ms in done.values() for m in ms)
    if not done and not skipped:
        print(f"nothing to compact in {store.root}: every run is one file per table and partition")
    else:
        print(f"compacted {len(done)} run(s): {files:,} unit file(s) merged"
              + (f"; skipped {len(skipped)} running run(s)" if skipped else ""))
    if store.damaged:
        print(f"{len(store.damaged)} damaged file(s) left in place: see `rig check {shlex.quote(redact(str(store.root)))}`")
    return 3 if args.run and skipped else 0
