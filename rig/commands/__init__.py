"""Subcommands over stored results (no Triton needed): one module each, with
``add_parser(sub)`` and ``run(args) -> int``."""

from __future__ import annotations

import importlib

from rig.errors import RigError
from rig.text import redact

NAMES = ("report", "gate", "capacity", "compact", "check", "matrix", "fleet")


def add_parsers(sub) -> None:
    for name in NAMES:
        importlib.import_module(f"rig.commands.{name}").add_parser(sub)


def open_store(results: str):
    """The store at ``results`` (a folder or a pyarrow filesystem URI); for a local folder, a
    RigError (one line, credentials never shown) when it is missing, empty or not the rig's."""
    from pathlib import Path

    from rig.store import Store

    shown = redact(str(results))
    if "://" not in str(results):
        root = Path(results)
        if not root.exists():
            raise RigError(f"no results folder {shown}: give the folder a soak or bench wrote (--results)")
        if not root.is_dir():
            raise RigError(f"{shown} is not a folder: give the results folder a soak or bench wrote")
        if not any(root.iterdir()):
            raise RigError(f"{shown} is empty: no runs stored there yet")
        if not (root / "cycles").is_dir() and not (root / "windows").is_dir():
            raise RigError(f"{shown} is not a results folder (no cycles/ or windows/ table in it): "
                           "give the folder a soak or bench wrote (--results)")
    return Store(results)
