"""`rig capacity`: being built (placeholder until its owner replaces this module)."""

from __future__ import annotations

from rig.errors import RigError


def add_parser(sub) -> None:
    p = sub.add_parser("capacity", help="(being built)")
    p.set_defaults(func=run)


def run(args) -> int:
    raise RigError("`rig capacity` is not built yet")
