"""``--where KEY=VALUE``, the one filter of the commands that read results (report, gate, capacity):
``KEY=VALUE`` keeps the rows whose column ``KEY`` equals ``VALUE``; ``KEY=A,B`` any of them;
repeated clauses must all hold. Numbers compare as numbers (``instances=1`` matches 1.0), booleans
read ``true``/``1``/``yes``, anything else compares as text. A malformed clause or an unknown column
is one ``RigError`` line (the latter lists the columns there are)."""

from __future__ import annotations

from collections.abc import Iterable

from rig.common.errors import RigError

EXAMPLE = "--where engine=capi, or KEY=A,B for any of them"


def parse(clauses: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``KEY=VALUE`` clauses as (key, values), each value stripped; a RigError for a clause that
    is not ``KEY=VALUE`` (a key and at least one value)."""
    out = []
    for clause in clauses:
        key, sep, value = clause.partition("=")
        key = key.strip()
        values = [v.strip() for v in value.split(",")]
        if not sep or not key or not any(values):
            raise RigError(f"--where {clause!r}: write KEY=VALUE ({EXAMPLE})")
        out.append((key, [v for v in values if v]))
    return out


def keys(clauses: Iterable[str]) -> list[str]:
    """The keys the clauses name (to read those columns), malformed clauses left to ``parse``."""
    return [c.partition("=")[0].strip() for c in clauses]


def check(key: str, known: Iterable[str]) -> None:
    """A RigError naming the columns there are where ``key`` is not one of ``known``."""
    known = sorted(set(known))
    if key not in known:
        raise RigError(f"--where {key}: no such column (columns: {', '.join(known)})")


def _is(values, kinds) -> bool:
    return len(values) > 0 and all(isinstance(v, kinds) for v in values)


def match(col, values: list[str]):
    """A boolean Series: the rows of ``col`` equal to any of ``values`` (strings, as given)."""
    import numpy as np
    import pandas as pd

    name = col.name
    present = col.dropna().tolist() if col.dtype == object else None
    if pd.api.types.is_bool_dtype(col) or (present is not None and _is(present, (bool, np.bool_))):
        wanted = {v.lower() in ("1", "true", "yes") for v in values}
        return col.astype("boolean").isin(wanted).fillna(False).astype(bool)
    if pd.api.types.is_numeric_dtype(col) or (present is not None and _is(present, (int, float, np.number))):
        try:
            wanted = [float(v) for v in values]
        except ValueError:
            raise RigError(f"--where {name}={','.join(values)}: {name} is a number") from None
        return pd.to_numeric(col, errors="coerce").isin(wanted).fillna(False).astype(bool)
    return col.astype("string").str.strip().isin(values).fillna(False).astype(bool)


def present(frames, key: str, n: int = 8) -> str:
    """The values ``key`` takes in ``frames`` (those that have it), for a line that says a filter
    matched nothing: up to ``n``, sorted, then ``...``."""
    seen = sorted({str(v) for f in frames if key in f for v in f[key].dropna().unique()})
    return ", ".join(seen[:n]) + (", ..." if len(seen) > n else "") if seen else "none"
