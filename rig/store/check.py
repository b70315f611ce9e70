"""`rig check`'s work (``rig.commands.check`` prints it): the files in a store's table folders that
readers skip or that do not belong there, each with why, and moving them aside, out of the tables."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.fs as pafs

from rig.common.errors import RigError
from rig.common.text import redact
from rig.store.schema import TABLES


def problems(store) -> list[tuple[str, str]]:
    """Every file in the table folders that readers skip or that does not belong there, with why:
    damaged (not Parquet, cut short) or foreign (another schema, another place or name)."""
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

    rel = path[len(store.base) :].lstrip("/")
    if store.local and "://" not in dest:
        moved = Path(dest).absolute() / rel
        moved.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, moved)
        return str(moved)
    fs, base = pafs.FileSystem.from_uri(dest) if "://" in dest else (store.fs, dest)  # remote: bucket/key
    if type(fs) is not type(store.fs):
        raise RigError("--move-aside must be on the same filesystem as the results")
    target = f"{base.rstrip('/')}/{rel}"
    fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
    fs.move(path, target)
    return target


def _fs_path(dest: str) -> str:
    """``dest`` as a path in its filesystem (a URI's bucket/key; a plain one as given)."""
    if "://" not in dest:
        return dest.rstrip("/")
    try:
        return pafs.FileSystem.from_uri(dest)[1].rstrip("/")
    except (OSError, ValueError) as e:
        raise RigError(f"--move-aside {redact(dest)}: not a filesystem URI ({type(e).__name__})") from None


def check_aside(store, dest: str) -> None:
    """A one-line error where ``dest`` (``--move-aside``) is inside a table folder, where readers look."""
    where = os.path.abspath(dest) if store.local and "://" not in dest else _fs_path(dest)
    if any(where == f"{store.base}/{t}" or where.startswith(f"{store.base}/{t}/") for t in TABLES):
        raise RigError(
            f"--move-aside {dest} is inside a table folder, where readers look: "
            f"choose a folder outside them, e.g. {store.root}/_damaged"
        )
