"""`rig compact RESULTS [--run RUN_ID]`: merge each finished run's unit files into one Parquet
file per table and partition, so reading stays fast as nights add up. A soak or bench compacts
its own run when it ends; this command does it for older or killed runs (the merging itself:
``rig.store.compaction``).

An object store (``s3://...``) has no locks and no rename: the merged object is written, then the
unit objects removed (readers drop the rows they see twice meanwhile). Nothing there says whether
a run is still running, so over a URI ``--run`` is required: name only runs that have ended."""

from __future__ import annotations

import shlex

from rig.common.errors import Exit, RigError
from rig.common.text import redact


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compact",
        help="merge finished runs' files into one per table and partition",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
    )
    p.add_argument("results", metavar="RESULTS", help="results folder or pyarrow filesystem URI")
    p.add_argument(
        "--run",
        metavar="RUN_ID",
        help="only this run (default: every run not running now). Required over an object store "
        "(s3://...), which has no locks: give only a run that has ended",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rig.store import TABLES, Store

    store = Store.open(args.results)
    if not store.local and not args.run:
        raise RigError(
            f"{store.root} is an object store, which has no locks to tell a running run from an "
            "ended one: give --run RUN_ID for each run that has ended"
        )
    if args.run and not any(store.files(t, run_id=args.run) for t in TABLES):
        raise RigError(
            f"no run {args.run!r} in {redact(str(store.root))}: check the run id "
            f"(`rig report {shlex.quote(redact(str(store.root)))}` lists runs)"
        )

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
        print(
            f"compacted {len(done)} run(s): {files:,} unit file(s) merged"
            + (f"; skipped {len(skipped)} running run(s)" if skipped else "")
        )
    if store.damaged:
        print(
            f"{len(store.damaged)} damaged file(s) left in place: "
            f"see `rig check {shlex.quote(redact(str(store.root)))}`"
        )
    return Exit.SKIPPED if args.run and skipped else Exit.OK
