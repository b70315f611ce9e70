"""Where a store's files go: whole-file writes to a folder or an object store (S3, GCS, Azure
through ``pyarrow.fs``), the run's local work folder, and plots.

A folder: each file is written under a hidden temporary name, flushed and renamed into place.
An object store has no rename: a file is serialized in memory and sent with a single write to
one output stream, which pyarrow completes on close (one ``CompleteMultipartUpload``). An
object appears whole or not at all: a process killed before the close leaves an incomplete
multipart upload, never an object (on AWS a lifecycle rule ``AbortIncompleteMultipartUpload``
frees such uploads' parts).

A run's work folder (specs, worker logs, finalize evidence, the lock) is local: ``RESULTS/_work``
beside a local store; for a remote one ``$RIG_WORK_DIR``, else ``~/.cache/triton-soak-rig/work``
(see ``work_root``), keyed by run id, so that ``--resume`` finds it again on the same machine.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from rig.common.errors import RigError
from rig.common.text import redact

OBJECT_STORES = ("S3FileSystem", "GcsFileSystem", "AzureFileSystem")


def is_object_store(fs) -> bool:
    return type(fs).__name__ in OBJECT_STORES


def put(store, tbl: pa.Table, d: str, name: str) -> str:
    """Write ``tbl`` as ``d/name`` so that readers see all of it or none of it."""
    final = f"{d}/{name}"
    kw = {"use_dictionary": False}  # no dictionaries: reads ~20 % faster here
    if not store.local:
        sink = pa.BufferOutputStream()
        pq.write_table(tbl, sink, **kw)
        data = sink.getvalue()  # the whole file before the stream opens: nothing partial to close
        if is_object_store(store.fs):
            out = store.fs.open_output_stream(final)
            out.write(data)
            out.close()  # the object appears here, whole
            return final
        tmp = f"{d}/.{name}.{uuid.uuid4().hex[:8]}.tmp"  # another filesystem (HDFS...): a rename there
        store.fs.create_dir(d, recursive=True)
        try:
            with store.fs.open_output_stream(tmp) as out:
                out.write(data)
            store.fs.move(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                store.fs.delete_file(tmp)
            raise
        return final
    tmp = f"{d}/.{name}.{uuid.uuid4().hex[:8]}.tmp"  # readers skip hidden names
    store.fs.create_dir(d, recursive=True)
    try:
        pq.write_table(tbl, tmp, filesystem=store.fs, **kw)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        store.fs.move(tmp, final)  # a rename
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk leaves no half file behind, hidden or not
            store.fs.delete_file(tmp)
        raise
    return final


def work_root(store) -> Path:
    """The local folder of the store's runs' work folders (absolute: a spec can be re-run by hand):
    ``RESULTS/_work`` for a folder; for a remote store ``$RIG_WORK_DIR``, else ``work/`` in the rig's
    cache (``$RIG_HOME``, else ``$XDG_CACHE_HOME/triton-soak-rig``, as ``runtime.cache_dir``)."""
    if store.local:
        return Path(store.base).resolve() / "_work"
    if os.environ.get("RIG_WORK_DIR"):
        return Path(os.environ["RIG_WORK_DIR"]).expanduser().absolute()
    home = os.environ.get("RIG_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "triton-soak-rig"
    )
    return Path(home).absolute() / "work"


def check_writable(store) -> None:
    """For a remote store: its bucket (or container) is there and answers; a ``RigError`` if not."""
    if store.local:
        return
    bucket = store.base.strip("/").split("/", 1)[0]
    try:
        info = store.fs.get_file_info(bucket)
    except (OSError, pa.ArrowException) as e:
        why = redact(str(e).splitlines()[0][:160]) if str(e) else type(e).__name__
        raise RigError(
            f"cannot reach the results {store.root} ({why}): check the endpoint and the "
            "credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
        ) from None
    if info.type != pafs.FileType.Directory:
        raise RigError(
            f"no bucket {bucket!r} for the results {store.root}: create it first (the rig does not create buckets)"
        )


def plot_path(store, name: str) -> Path:
    """A local path for the figure ``name``: ``RESULTS/plots/`` for a folder, ``_plots/`` in the work
    root for a remote store (``publish`` sends it to the store)."""
    return Path(store.root) / "plots" / name if store.local else work_root(store) / "_plots" / name


def publish(store, path) -> str:
    """Where the user finds the figure at ``path``: itself for a local store; for a remote one it
    is sent as ``RESULTS/plots/<name>`` (one object; the local copy stays)."""
    if store.local:
        return str(path)
    path = Path(path)
    final = f"{store.base}/plots/{path.name}"
    data = path.read_bytes()
    out = store.fs.open_output_stream(final)
    out.write(data)
    out.close()
    return store.shown(final)
