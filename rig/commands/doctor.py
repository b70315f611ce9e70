"""``rig doctor``: what is usable here, and why not where not."""

from __future__ import annotations

from rig.common.errors import Exit


def add_parser(sub) -> None:
    d = sub.add_parser("doctor", help="which runtimes, engines, GPUs and CuPy are usable here, and why not")
    d.set_defaults(func=run)


def run(args) -> int:
    from rig.workflows.doctor import report

    print(report())
    return Exit.OK
