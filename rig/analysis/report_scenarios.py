"""`rig report`'s scenario table: for each lifecycle scenario (``rig.scenarios``) and its
negative control, by Triton version and engine, the verdicts counted, whether they are the ones
the scenario is known to give, stop latency, finalize, leaks, and the upstream report."""

from __future__ import annotations

import pandas as pd

from rig import scenarios
from rig.analysis.report_html import Section, Table

KEYS = ["scenario", "control", "triton_version", "engine"]


def _counts(s: pd.Series) -> str:
    return ", ".join(f"{k} {n}" for k, n in s.fillna("-").value_counts().items())


def _order(name) -> int:
    names = ["baseline", *scenarios.SCENARIOS]
    return names.index(name) if name in names else len(names)


def rows(cycles: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario, control, Triton version and engine (cycles with no scenario: none)."""
    if "scenario" not in cycles or cycles["scenario"].isna().all():
        return pd.DataFrame()
    c = cycles[cycles["scenario"].notna()].copy()
    c["control"] = c["control"].fillna(False).astype(bool) if "control" in c else False
    out = []
    for (name, control, version, engine), g in c.groupby(KEYS, sort=False, dropna=False):
        known = scenarios.SCENARIOS.get(name)
        if known is not None:
            want = known.control if control else known.expected_for(engine, version)
        elif name == "baseline":
            want = ("clean", "ok")
        else:
            want = None
        got = list(zip(g["outcome"], g["load_outcome"]))
        stop = pd.to_numeric(g["stop_latency_s"], errors="coerce")
        exp = pd.to_numeric(g["finalize_expected"], errors="coerce").fillna(0)
        before = pd.to_numeric(g["finalize_before_stop"], errors="coerce").fillna(0)
        out.append({
            "scenario": name + (" (control)" if control else ""), "Triton": version, "engine": engine,
            "cycles": len(g), "outcomes": _counts(g["outcome"]), "load": _counts(g["load_outcome"]),
            "expected": " / ".join(want) if want else "not measured on this core",
            "as expected": "-" if want is None else f"{sum(x == want for x in got)}/{len(got)}",
            "stop p50 s": stop.median(),
            "finalize before stop": f"{int(before.sum())}/{int(exp.sum())}" if exp.sum() else "-",
            "stubs killed": int(pd.to_numeric(g["stubs_killed"], errors="coerce").fillna(0).sum()),
            "shm left": int(pd.to_numeric(g["shm_regions_leaked"], errors="coerce").fillna(0).sum()),
            "upstream": (", ".join(known.upstream) or "the rig's own control") if known else "-",
            "_order": (_order(name), bool(control), str(version), str(engine)),
        })
    table = pd.DataFrame(out).sort_values("_order", key=lambda s: s.map(str)).drop(columns="_order")
    return table.reset_index(drop=True)


def scenarios_section(cycles: pd.DataFrame) -> Section | None:
    table = rows(cycles)
    if table.empty or set(table["scenario"]) <= {"baseline"}:
        return None
    return Section("Scenarios").add(Table(table, "Each lifecycle scenario (`rig scenarios`) and its negative "
                                                  "control by Triton version and engine: the verdicts counted, "
                                                  "those the scenario is known to give (lifecycle / load) and "
                                                  "how many cycles gave them, stop latency, finalize, leaks"))
