"""How ``rig bisect`` judges a step (pure functions): each cycle by its signature, the parts of a
cell the conformance table tells apart (``rig.analysis.conformance.changes.same_cell``), and a
step's cycles against the two sides a change lies between.

A cycle's signature is its lifecycle verdict; its load verdict where the two releases' differ; and
where the scenario probes it (``ready-stub-dead``), the readiness it probed once its stub was dead
(``server ready, model not ready``, in the table's words). A change of readiness alone (2.63.0 ->
2.64.0, the model no longer said ready) is then a change to bisect, as it is one in the table. So
is a change of growth alone (the worker's memory: ``leaking`` on 2.54.0, ``ok`` on 2.55.0 through
the official API): its growth verdict is part of the signature where both releases measured it and
their verdicts differ.
"""

from __future__ import annotations

import re

LIFECYCLE, LOAD, READINESS, GROWTH = "lifecycle", "load", "readiness", "growth"
NOT_MEASURED = "not_measured"
_AT = {LIFECYCLE: 0, LOAD: 1, READINESS: 2, GROWTH: 3}

# A cycle as a bisection keeps it (state.json): [lifecycle, load, readiness or None, growth or None]
# (a state kept before growth was judged holds three: its growth reads as not recorded)
Raw = list


def raw_cycle(row) -> Raw:
    """A cycle row (``rig.contract.rows.CycleRow``, or a dict of one) as a bisection keeps it."""

    def get(name):
        return row.get(name) if isinstance(row, dict) else getattr(row, name, None)

    return [
        str(get("outcome")),
        str(get("load_outcome") or NOT_MEASURED),
        probe_text(get("server_ready_at_probe"), get("model_ready_at_probe")),
        _measured(get("growth_outcome")),
    ]


def _measured(growth) -> str | None:
    """A growth verdict, None where the cycle did not measure it (a NaN as pandas reads a null)."""
    if growth is None or growth != growth or str(growth) in ("", NOT_MEASURED):
        return None
    return str(growth)


def _part(raw: Raw, part: str):
    i = _AT[part]
    return raw[i] if i < len(raw) else None


def probe_text(server, model) -> str | None:
    """A cycle's readiness probe in the conformance table's words (``table._probe_text``);
    None where the scenario asked nothing."""
    if server is None and model is None:
        return None
    word = {True: "ready", False: "not ready", None: "not asked"}
    return f"server {word[_yes(server)]}, model {word[_yes(model)]}"


def _yes(answer) -> bool | None:
    return None if answer is None else bool(answer)


def parts_for(good: list[Raw], bad: list[Raw]) -> tuple[str, ...]:
    """The parts a bisection judges by, from the two releases' cycles: the lifecycle always; the
    load where the two releases' load verdicts differ; the readiness where either side probed it;
    the growth where both sides measured it and their verdicts differ."""
    parts = [LIFECYCLE]
    if {r[1] for r in good} != {r[1] for r in bad}:
        parts.append(LOAD)
    if any(r[2] is not None for r in good + bad):
        parts.append(READINESS)
    grew = [{_part(r, GROWTH) for r in side} - {None} for side in (good, bad)]
    if all(grew) and grew[0] != grew[1]:
        parts.append(GROWTH)
    return tuple(parts)


def signature(raw: Raw, parts: tuple[str, ...]) -> str:
    """A cycle's signature in words: its parts joined by `` / `` (the lifecycle alone where it is
    the only part: ``aborted_at_exit``, as the table ``bisect`` said before)."""
    missing = {GROWTH: NOT_MEASURED}
    return " / ".join(str(_part(raw, p)) if _part(raw, p) is not None else missing.get(p, "not asked") for p in parts)


def counts(raws: list[Raw], parts: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in raws:
        s = signature(r, parts)
        out[s] = out.get(s, 0) + 1
    return out


def words(c: dict[str, int]) -> str:
    return ", ".join(f"{v} x{n}" for v, n in sorted(c.items())) or "-"


def judge(c: dict[str, int], before: set[str] | frozenset[str], after: set[str] | frozenset[str], race=False) -> str:
    """``bad`` where the cycles gave a signature only the side after the change gives (``after``)
    and none only the side before gives (``before``); ``good`` the other way; ``mixed`` otherwise.
    In a race (``race``: the cycles were run again), the side with more of its own signatures wins
    if by two to one."""
    seen = set(c)
    only_bad, only_good = set(after) - set(before), set(before) - set(after)
    plain = (
        "bad"
        if seen & only_bad and not seen & only_good
        else "good"
        if seen & only_good and not seen & only_bad
        else "mixed"  # both sides' signatures, or only signatures both give
    )
    if plain != "mixed" or not race:
        return plain
    bad = sum(n for v, n in c.items() if v in only_bad)
    good = sum(n for v, n in c.items() if v in only_good)
    return "bad" if bad >= 2 * max(1, good) else "good" if good >= 2 * max(1, bad) else "mixed"


def reading(c: dict[str, int], before, after, race=False) -> str:
    """As ``judge``, and ``other`` where the cycles gave neither side's signatures (every cycle; in
    a race, two to one against the rest): a third verdict, a change that moved part of the cell."""
    got = judge(c, before, after)
    if got != "mixed":
        return got
    neither = sum(n for v, n in c.items() if v not in before and v not in after)
    rest = sum(c.values()) - neither
    if neither and (rest == 0 or (race and neither >= 2 * rest)):
        return "other"
    return judge(c, before, after, race)


def prs(subject: str | None) -> str:
    """The PR numbers a commit's subject names: ``#461 #462``; "" where none."""
    return " ".join(f"#{n}" for n in re.findall(r"\(#(\d+)\)", subject or ""))


def refusal(good: str, bad: str) -> str | None:
    """Why the window ``good`` .. ``bad`` cannot be bisected here, before anything is built; None
    where it can (or where a name is unknown: the command's parse says so). A release before the
    first built from source (2.51.0: the git bundles hold no older branches) has no sources, by any
    of its names (``24.09``, ``2.50.0``, nvidia-pytriton's ``0.5.10``); ``good`` must be the older one."""
    from rig.analysis.release_order import version_key
    from rig.contract.versions import UnknownVersion, resolve_version
    from rig.runtimes.from_source.releases import RELEASES

    first = next(iter(RELEASES))
    named: dict[str, str] = {}
    for side, v in (("--good", good), ("--bad", bad)):
        try:
            named[side] = resolve_version(v)
        except UnknownVersion:
            return None
        if version_key(named[side]) < version_key(first):
            also = "" if named[side] == v else f" ({named[side]})"
            return (
                f"{side} {v}{also} predates the releases built from source here (the first is {first}, "
                f"{RELEASES[first]}): there are no sources to build its hybrids, so the window {good} .. {bad} "
                "cannot be bisected"
            )
    if version_key(named["--good"]) > version_key(named["--bad"]):
        return f"--good {good} is newer than --bad {bad}: give the older release (the old verdict) as --good"
    return None
