"""Subcommands over stored results (no Triton needed): one module each, with
``add_parser(sub)`` and ``run(args) -> int``. Each opens its results with ``Store.open`` (one
check, one error line) and reads ``--where`` through ``rig.store.where``."""

from __future__ import annotations

import importlib

NAMES = ("report", "gate", "capacity", "compact", "check", "matrix", "fleet", "scenarios")


def add_parsers(sub) -> None:
    for name in NAMES:
        importlib.import_module(f"rig.commands.{name}").add_parser(sub)
