"""`rig scenarios`' work (``rig.commands.scenarios`` prints it): each lifecycle scenario of the
catalog (``rig.scenarios.catalog``) with what it does, the upstream report it stands for, what it
is built from and the cores it has known verdicts on (``rig.scenarios.known``); and the verdicts of a
reviewed run's scenario cells recorded as the known ones (``--accept``)."""

from __future__ import annotations

from rig.analysis.release_order import version_key
from rig.common.errors import RigError
from rig.scenarios import known
from rig.scenarios.catalog import SCENARIOS


def _built_from(s) -> str:
    return ", ".join(
        x
        for x in (
            f"models/scenarios/{s.repository}" if s.repository else "",
            f"--fault {s.fault}" if s.fault != "none" and not s.repository else "",
            f"--retain {s.retain}" if s.retain != "none" else "",
            f"client {s.client}" if s.client != "none" else "",
            f"--restart {s.restart}" if s.restart else "",
        )
        if x
    )


def rows() -> list[dict]:
    """One row per scenario, in the catalog's order: its columns the table `rig scenarios` prints."""
    out = []
    cores = known.table()
    for s in SCENARIOS.values():
        expected = " / ".join(s.expected)
        if s.growth != "ok":
            expected += f"; growth {s.growth}"
        seen = sorted({(k[3], k[4]) for k in cores if k[0] == s.name and not k[1]}, key=lambda x: (x[0], x[1]))
        engines = sorted({e for e, _ in seen})
        versions = sorted({v for _, v in seen}, key=version_key)
        out.append(
            {
                "scenario": s.name,
                "what": s.what,
                "upstream": ", ".join(s.upstream) or "the rig's own control",
                "shows as": expected + (" under a --workload" if s.workload else ""),
                "shapes": ", ".join(s.shapes),
                "known on": (
                    f"{', '.join(versions)}; {', '.join(engines)}"
                    if seen
                    else "nothing yet (rig scenarios --accept RESULTS)"
                ),
                "control": " / ".join(s.control) if s.has_control else "none (it measures)",
                "built from": _built_from(s),
                "fixed in": ", ".join(s.fixed_in) or "—",
            }
        )
    return out


def accept(results: str, path: str | None, intermittent: bool = False) -> tuple[int, list[str]]:
    """The verdicts of the scenario cells in the store at ``results`` recorded as known in ``path``
    (``rig.scenarios.known.accept``): the cells written, and why each cell left out was."""
    from rig.store import Store

    frame = Store(results).read("cycles")
    if frame is None or not len(frame) or "scenario" not in frame or not frame["scenario"].notna().any():
        raise RigError(
            f"{results} holds no scenario cycles to accept: run rig matrix --scenarios ... --results {results} first"
        )
    return known.accept(frame, path, intermittent_ok=intermittent)
