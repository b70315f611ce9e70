"""A report file the user names on the command line (``--junit``, ``--summary-json``), checked before
a run starts: a local file whose folder exists and takes a new file, tried for real, so a read-only
file system fails here, in one line, not after the run."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from rig.common.errors import RigError


def check_writable(path: str, option: str, example: str, why_local: str = "") -> None:
    """RigError (one line) unless ``path`` can be written as a local file. ``option`` names it in
    the message (``--junit``), ``example`` is a file name to suggest, ``why_local`` says why a URI
    will not do."""
    text = str(path)
    if not text.strip():
        raise RigError(f"{option} needs a file name (e.g. {option} {example})")
    if re.match(r"^[a-zA-Z][\w+.-]*://", text):
        raise RigError(f"{option} {text}: a local file{f' ({why_local})' if why_local else ''}, not a URI")
    p = Path(text)
    if p.is_dir():
        raise RigError(f"{option} {text} is a folder: give a file name in it (e.g. {p / example})")
    folder = p.absolute().parent
    if not folder.exists():
        raise RigError(f"{option} {text}: the folder {folder} does not exist (create it first, or choose another)")
    if not folder.is_dir():
        raise RigError(f"{option} {text}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{p.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise RigError(f"{option} {text}: cannot write in {folder} ({e.strerror or e})") from None
