"""How the rig writes numbers for people (one place, so every table reads alike)."""

from __future__ import annotations


def num(value, fmt: str = "{:.3f}") -> str:
    """``value`` in ``fmt``, or ``-`` where it is unknown (None)."""
    return "-" if value is None else fmt.format(value)
