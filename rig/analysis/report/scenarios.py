"""`rig report`'s scenario tables: for each lifecycle scenario (``rig.scenarios.catalog``) and its
negative control, by Triton version and engine, the verdicts counted (lifecycle, load, growth)
against the ones the scenario is known to give (its growth verdict: ``Scenario.growth``; a
control's and the baseline's ok; a cycle with none, or not_measured, is not held against it), stop latency,
finalize, the upstream report (the first table); what
the cycles left and how memory grew across them (the second: leaks, stub crashes, requests in
flight at stop, refused requests, least-squares slopes per cycle, growth per 1,000 requests).

``rows`` is the one table, a pure function of a cycles frame; ``scenarios_section`` splits its
columns in two so each table stays readable in Markdown. A cell holds a figure or says why not:
``—`` where no cycle of the group recorded that figure (``NOTES``), ``n<3`` where a slope has
fewer than three cycles, ``not measured ...`` where nothing is known for that core or engine.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from rig.analysis import stats
from rig.analysis.matrix import growth_held
from rig.analysis.report.html import Section, Table
from rig.scenarios import catalog as scenarios
from rig.scenarios.known import bindings_label, holds

KEYS = ["scenario", "control", "shape", "triton_version", "engine"]
# The cycles' columns the tables read (rig.analysis.report.page reads them beside its own).
COLUMNS = [
    "scenario",
    "control",
    "run_id",
    "cycle",
    "started_at",
    "outcome",
    "load_outcome",
    "growth_outcome",
    "stop_latency_s",
    "finalize_expected",
    "finalize_before_stop",
    "stubs_killed",
    "shm_regions_leaked",
    "stub_crashes",
    "in_flight",
    "in_flight_answered",
    "in_flight_failed",
    "in_flight_lost",
    "refused",
    "ready_after_load",
    "worker_rss_bytes",
    "shm_bytes",
    "stub_rss_bytes",
    "rss_per_1k_requests_b",
    "traced_per_1k_requests_b",
]
NOT_RECORDED = "—"  # no cycle of the group recorded this figure
FEW = "n<3"  # a slope over fewer than three cycles
MIN_SLOPE_CYCLES = 3
# Least-squares slopes across a group's cycles, in cycle order: column shown -> stored column.
SLOPES = {
    "worker RSS B/cycle": "worker_rss_bytes",
    "/dev/shm B/cycle": "shm_bytes",
    "stub RSS B/cycle": "stub_rss_bytes",
}
# Medians of the memory client's growth per 1,000 requests: column shown -> stored column.
PER_1K = {"RSS B/1k req": "rss_per_1k_requests_b", "traced B/1k req": "traced_per_1k_requests_b"}
ROW = ["scenario", "Triton", "engine"]
VERDICTS = [
    *ROW,
    "cycles",
    "outcomes",
    "load",
    "growth",
    "expected",
    "as expected",
    "stop p50 s",
    "finalize before stop",
    "upstream",
]
LEFT = [
    *ROW,
    "stubs killed",
    "shm left",
    "stub crashes",
    "ready after load",
    "in flight (answered/failed/lost)",
    "refused",
    *SLOPES,
    *PER_1K,
]
NOTES = {
    NOT_RECORDED: f"{NOT_RECORDED}: no cycle of the row recorded this figure (only the client behaviours that "
    "measure it do: in flight under stop-in-flight, refused under refused-request, growth per 1k "
    "requests under memory; a server that never started has no stop; stores before schema 10 have "
    "no stub crashes, /dev/shm bytes or requests in flight).",
    FEW: f"{FEW}: a slope needs {MIN_SLOPE_CYCLES} cycles or more with the figure; run more cycles.",
    "not measured": "not measured on this core / through this engine: the scenario's verdicts were never measured "
    "there (`rig scenarios` says where they were), so its cycles are counted, not judged.",
}


def _counts(s: pd.Series) -> str:
    return ", ".join(f"{k} {n}" for k, n in s.fillna("-").value_counts().items())


def _order(name) -> int:
    names = ["baseline", *scenarios.SCENARIOS]
    return names.index(name) if name in names else len(names)


def _version_key(v) -> tuple:
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(str(v)), "")
    except InvalidVersion:
        return (1, Version("0"), str(v))


def _num(g: pd.DataFrame, col: str) -> pd.Series:
    if col not in g:
        return pd.Series(np.nan, index=g.index, dtype=float)
    return pd.to_numeric(g[col], errors="coerce")


def _total(g: pd.DataFrame, col: str):
    s = _num(g, col)
    return int(s.sum()) if s.notna().any() else NOT_RECORDED


def _in_order(g: pd.DataFrame) -> pd.DataFrame:
    """The group's cycles in the order they ran: by start time where stored, then run and cycle."""
    keys = [k for k in ("started_at", "run_id", "cycle") if k in g]
    return g.sort_values(keys, kind="stable") if keys else g


def slope(values) -> float | str:
    """The least-squares slope of ``values`` per cycle (their positions in cycle order; a cycle
    without the figure keeps its place), ``FEW`` under ``MIN_SLOPE_CYCLES`` cycles with it,
    ``NOT_RECORDED`` with none."""
    y = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    n = int(np.isfinite(y).sum())
    if n == 0:
        return NOT_RECORDED
    if n < MIN_SLOPE_CYCLES:
        return FEW
    fit = stats.slope_ci(np.arange(len(y), dtype=float), y)
    return FEW if fit is None else fit[0]


def _want(
    scenario, control: bool, shape: str, engine: str, version: str, bindings: str | None = None
) -> tuple[tuple[str, str] | None, str, str]:
    """The verdicts the row should give (the known ones: rig.scenarios.known, of the official API's
    ``bindings`` its cycles ran; a control's, where none are known, its contract: clean), its growth
    verdict, and what the expected column says where none are known."""
    from rig.scenarios import known

    if scenario is None:
        return None, "ok", "unknown scenario (not in this rig's registry)"
    # a control's contract where none is known
    k = known.expected(scenario, control, shape, engine, version, bindings=bindings)
    if k is not None:
        return k.verdicts, k.growth, ""
    how = f"through {engine}" if engine not in scenario.engines else f"on this core in shape {shape}"
    return None, scenario.growth, f"not known {how}"


def _bindings(g: pd.DataFrame) -> str:
    """The official API's bindings most of a row's cycles ran, as the known verdicts say them."""
    cols = [c for c in ("engine", "bindings_own", "tritonserver_version") if c in g]
    said = Counter(map(bindings_label, g[cols].to_dict("records")))
    return said.most_common(1)[0][0]


def _shape_order(scenario, shape: str) -> int:
    shapes = scenario.shapes if scenario is not None else ()
    return shapes.index(shape) if shape in shapes else len(shapes)


def _ready(g: pd.DataFrame) -> str:
    """Cycles whose server and models still said ready when the load ended, of those that asked."""
    if "ready_after_load" not in g or g["ready_after_load"].isna().all():
        return NOT_RECORDED
    r = g["ready_after_load"].dropna().astype(bool)
    return f"{int(r.sum())}/{len(r)}"


def rows(cycles: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario, control, Triton version and engine (cycles with no scenario: none),
    with every column of ``VERDICTS`` and ``LEFT``."""
    if "scenario" not in cycles or cycles["scenario"].isna().all():
        return pd.DataFrame()
    c = cycles[cycles["scenario"].notna()].copy()
    c["control"] = c["control"].fillna(False).astype(bool) if "control" in c else False
    for k in ("triton_version", "engine"):
        c[k] = c[k].astype("string").fillna("-") if k in c else "-"
    c["shape"] = c["shape"].astype("string").fillna("unbatched") if "shape" in c else "unbatched"
    out = []
    for (name, control, shape, version, engine), g in c.groupby(KEYS, sort=False, dropna=False):
        g = _in_order(g)
        known = scenarios.SCENARIOS.get(name)
        if name == "baseline":
            want, want_growth, why = ("clean", "ok"), "ok", ""
        else:
            want, want_growth, why = _want(known, bool(control), str(shape), str(engine), str(version), _bindings(g))
        load = g["load_outcome"] if "load_outcome" in g else pd.Series(None, index=g.index, dtype=object)
        growth = g["growth_outcome"] if "growth_outcome" in g else pd.Series(None, index=g.index, dtype=object)
        growth = growth.astype(object).where(growth.notna(), None)
        got = list(zip(g["outcome"], load))
        held = [growth_held(x, want_growth) for x in growth]
        stop = _num(g, "stop_latency_s")
        exp, before = _num(g, "finalize_expected").fillna(0), _num(g, "finalize_before_stop").fillna(0)
        flight = {k: _num(g, f"in_flight{k}") for k in ("", "_answered", "_failed", "_lost")}
        row = {
            "scenario": name
            + (" (control)" if control else "")
            + ("" if (known is not None and shape == known.shapes[0]) or shape == "unbatched" else f" [{shape}]"),
            "Triton": version,
            "engine": engine,
            "cycles": len(g),
            "outcomes": _counts(g["outcome"]),
            "load": _counts(load),
            "growth": _counts(growth),
            "expected": " / ".join((*want, want_growth)) if want else why,
            "as expected": "not judged"
            if want is None
            else f"{sum(holds(x, want) and h for x, h in zip(got, held))}/{len(got)}",
            "stop p50 s": stop.median() if stop.notna().any() else NOT_RECORDED,
            "finalize before stop": f"{int(before.sum())}/{int(exp.sum())}" if exp.sum() else NOT_RECORDED,
            "upstream": (", ".join(known.upstream) or "the rig's own control")
            if known
            else ("the rig's default: no fault, no retention" if name == "baseline" else NOT_RECORDED),
            "stubs killed": _total(g, "stubs_killed"),
            "shm left": _total(g, "shm_regions_leaked"),
            "stub crashes": _total(g, "stub_crashes"),
            "ready after load": _ready(g),
            "in flight (answered/failed/lost)": NOT_RECORDED
            if not flight[""].notna().any()
            else (
                f"{int(flight['_answered'].sum())}/{int(flight['_failed'].sum())}/{int(flight['_lost'].sum())} "
                f"of {int(flight[''].sum())}"
            ),
            "refused": _total(g, "refused"),
        }
        for shown, col in SLOPES.items():
            row[shown] = slope(_num(g, col))
        for shown, col in PER_1K.items():
            s = _num(g, col)
            row[shown] = float(s.median()) if s.notna().any() else NOT_RECORDED
        row["_order"] = (
            _order(name),
            bool(control),
            _shape_order(known, str(shape)),
            _version_key(version),
            str(engine),
        )
        out.append(row)
    table = pd.DataFrame(out)
    table = table.iloc[sorted(range(len(table)), key=lambda i: table["_order"].iat[i])].drop(columns="_order")
    return table[[*VERDICTS, *LEFT[len(ROW) :]]].reset_index(drop=True)


def notes(table: pd.DataFrame) -> list[str]:
    """The footnotes of the marks the table uses."""
    text = table.astype(str)
    used = {
        NOT_RECORDED: (text == NOT_RECORDED).any().any(),
        FEW: (text == FEW).any().any(),
        "not measured": text["expected"].str.startswith("not measured").any(),
    }
    return [NOTES[k] for k, on in used.items() if on]


def scenarios_section(cycles: pd.DataFrame) -> Section | None:
    table = rows(cycles)
    if table.empty or set(table["scenario"]) <= {"baseline"}:
        return None
    return Section("Scenarios").add(
        Table(
            table[VERDICTS],
            "Each lifecycle scenario (`rig scenarios`) and its negative control by Triton "
            "version and engine: the verdicts counted (lifecycle, load, growth), those the "
            "scenario is known to give and how many cycles gave them (a growth verdict not "
            "measured, or none in an older store, is not held against a cycle), stop latency, finalize, its upstream "
            "report",
        ),
        Table(
            table[LEFT],
            "What the cycles left and how memory grew: stubs the rig killed, shared-memory regions "
            "left and stub crashes (summed over the cycles), requests in flight at stop, refused "
            "requests; least-squares slopes across the cycles in the order they ran, and the "
            "median growth per 1,000 requests",
        ),
        *notes(table),
    )
