"""`rig check RESULTS [--move-aside DIR]`: list the files in a results folder's tables that
readers skip (not Parquet, cut short, another schema) or that do not belong there, one line
each; exit 1 when there are any, 0 when there are none, 2 when RESULTS is no results folder."""

from __future__ import annotations

import os
from pathlib import Path

from rig.common.errors import Exit, RigError
from rig.common.text import redact


def add_parser(sub) -> None:
    p = sub.add_parser(
        "check",
        help="list damaged or foreign files in a results folder (and move them aside)",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
    )
    p.add_argument("results", metavar="RESULTS", help="results folder or pyarrow filesystem URI")
    p.add_argument(
        "--move-aside",
        metavar="DIR",
        help="move each such file into DIR (outside the table folders; e.g. RESULTS/_damaged), "
        "keeping its path below RESULTS",
    )
    p.set_defaults(func=run)


def problems(store) -> list[tuple[str, str]]:
    """Every file in the table folders that readers skip or that does not belong there, with why:
    damaged (not Parquet, cut short) or foreign (another schema, another place or name)."""
    import pyarrow.fs as pafs

    from rig.store import TABLES

    found = []
    for table in TABLES:
        base = f"{store.base}/{table}"
        for info in store.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
            parts = info.path[len(base) + 1 :].split("/")
            if info.type != pafs.FileType.File or any(p.startswith((".", "_")) for p in parts):
                continue  # hidden: a write or compaction in progress, or one a kill left (readers skip it)
            if (
                len(parts) != 3
                or not parts[0].startswith("triton_version=")
                or not parts[1].startswith("date=")
                or not parts[2].endswith(".parquet")
            ):
                why = f"foreign: not a file the rig writes ({table}/triton_version=V/date=D/RUN-UNIT.parquet)"
            else:
                why = store.inspect(table, info.path)
            if why:
                found.append((info.path, why))
    return found


def move_aside(store, path: str, dest: str) -> str:
    """Move one of the store's files under ``dest``, keeping its path below the store."""
    import shutil

    import pyarrow.fs as pafs

    rel = path[len(store.base) :].lstrip("/")
    if store.local and "://" not in dest:
        target = Path(dest).absolute() / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, target)
        return str(target)
    fs, base = pafs.FileSystem.from_uri(dest) if "://" in dest else (store.fs, dest)  # remote: bucket/key
    if type(fs) is not type(store.fs):
        raise RigError("--move-aside must be on the same filesystem as the results")
    target = f"{base.rstrip('/')}/{rel}"
    fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
    fs.move(path, target)
    return target


def _fs_path(dest: str) -> str:
    """``dest`` as a path in its filesystem (a URI's bucket/key; a plain one as given)."""
    import pyarrow.fs as pafs

    if "://" not in dest:
        return dest.rstrip("/")
    try:
        return pafs.FileSystem.from_uri(dest)[1].rstrip("/")
    except (OSError, ValueError) as e:
        raise RigError(f"--move-aside {redact(dest)}: not a filesystem URI ({type(e).__name__})") from None


def run(args) -> int:
    from rig.store import TABLES, Store

    store = Store.open(args.results)
    if args.move_aside:
        dest = (
            os.path.abspath(args.move_aside)
            if store.local and "://" not in args.move_aside
            else _fs_path(args.move_aside)
        )
        if any(dest == f"{store.base}/{t}" or dest.startswith(f"{store.base}/{t}/") for t in TABLES):
            raise RigError(
                f"--move-aside {args.move_aside} is inside a table folder, where readers look: "
                f"choose a folder outside them, e.g. {store.root}/_damaged"
            )
    found = problems(store)
    for path, why in found:
        line = f"{store.shown(path)}: {why}"
        if args.move_aside:
            line += f" -> moved to {move_aside(store, path, args.move_aside)}"
        print(line, flush=True)
    if not found:
        print(f"{store.root}: every file in its tables is readable")
        return Exit.OK
    print(
        f"{len(found)} damaged or foreign file(s) in {store.root}"
        + (
            f", moved aside into {args.move_aside}"
            if args.move_aside
            else "; `rig check --move-aside DIR` moves them out of the tables"
        )
    )
    return Exit.FAILED
