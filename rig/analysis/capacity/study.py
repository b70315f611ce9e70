"""`rig capacity`'s study of a results folder (``rig.commands.capacity`` prints it): its `rig bench`
windows read and kept by ``--where``, tagged with their node share (``tags``); the plan for the first
target (``plan``), the scaling model of each node and across instance counts, the check against the
`rig fleet` runs (``fleet``) and the figure (``plot``), as the text it prints, piece by piece."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pandas as pd

from rig.analysis.capacity import fleet as capacity_fleet
from rig.analysis.capacity import law as capacity_law
from rig.analysis.capacity import plan as capacity
from rig.analysis.capacity import sweep as capacity_sweep
from rig.analysis.capacity import tags as capacity_tags
from rig.analysis.capacity import text as capacity_text
from rig.common.errors import RigError


@dataclasses.dataclass
class Tables:
    """What the study reads of the store: its runs, every window, the bench windows kept (tagged with
    their node share) and its fleet rows (None where it holds none): the plan's law is fitted over
    them whether or not ``--check`` prints the check."""

    runs: pd.DataFrame
    every: pd.DataFrame
    windows: pd.DataFrame
    fleet: pd.DataFrame | None


def select(windows, runs, where: list[str]):
    """Windows kept by the ``--where`` clauses (``rig.store.where``): a column of windows, else of
    runs (through the run ids)."""
    from rig.store import where as wh

    for key, values in wh.parse(where):
        wh.check(key, {c for c in (*windows.columns, *runs.columns) if not c.endswith("histogram")})
        if key in windows.columns:
            windows = windows[wh.match(windows[key], values)]
        else:
            ids = set(runs[wh.match(runs[key], values)]["run_id"])
            windows = windows[windows["run_id"].isin(ids)]
        if windows.empty:
            raise RigError(f"--where {key}={','.join(values)} matches no bench window in the results")
    return windows


def read(store, root: str, where: list[str], check: bool) -> Tables:
    """The tables of ``store`` (shown as ``root``) the study reads: one-line errors where it holds no
    `rig bench` windows, or (``check``) no `rig fleet` runs."""
    runs = store.read("runs")
    fleet = store.read("fleet")
    if check and (fleet is None or fleet.empty):
        raise RigError(
            f"{root} holds no `rig fleet` runs to check against: run `rig fleet --results RESULTS` "
            "with nodes held to the bench's share (rig soak --locust-master ... --cpus ...) first"
        )
    bench_ids = set(runs[runs["command"] == "bench"]["run_id"]) if len(runs) else set()
    every = store.read("windows")
    windows = every[every["run_id"].isin(bench_ids) & (every["tool"] == "rig")] if len(every) else every
    if windows.empty:
        raise RigError(f"{root} holds no windows of `rig bench` runs: run `rig bench --results RESULTS` first")
    windows = select(windows, runs, where)
    return Tables(runs, every, capacity_tags.with_shares(windows, runs), fleet)


def _model_title(m: dict) -> str:
    return (
        capacity_tags.node_title(
            m["triton_version"], m["engine"], m["model"], m["cpu_share"], m["cpus"], m["neighbour"]
        )
        + (f", {m['instances']} instance(s)" if m["instances"] is not None else "")
        + ":"
    )


def text(
    tables: Tables,
    goals: list[float],
    p99_ms: float,
    headroom: float,
    n_boot: int,
    check: bool,
    plot: str | None = None,
    master: str = capacity_law.AUTO,
) -> Iterator[str]:
    """What `rig capacity` prints, a piece (one or more lines) at a time as each is ready: the plan
    for the first of ``goals``, each node's model with the law of its nodes in a fleet (fitted over
    every fleet of the store, its prior without one: ``rig.analysis.capacity.law``), each law across
    instance counts, the fleet check (``check``: each fleet judged by the law over the others);
    where ``plot``, the figure drawn there and its path last. ``master``: ``--master``."""
    windows = tables.windows
    if goals:
        plan = capacity.plan(windows, goals[0], p99_ms, headroom)
        yield capacity.format_plan(plan, goals[0], p99_ms, headroom)
    models = capacity.model(windows, p99_ms, n_boot=n_boot)
    checked = []
    if tables.fleet is not None and not tables.fleet.empty:
        fleets = capacity_fleet.fleet_runs(tables.fleet, tables.runs, tables.every)
        checked = capacity_fleet.check(models, fleets, master)
    laws = {id(m): capacity_fleet.node_law(checked, m, master) or capacity_law.fit(m, [], master) for m in models}
    for m in models:
        yield ""
        yield _model_title(m)
        yield capacity_text.format_model(m, goals, headroom, laws[id(m)])
    for law in capacity.instance_laws(models):
        yield ""
        version, engine, model, share, beside = (law[k] for k in capacity_sweep.NODE)
        yield capacity_tags.node_title(version, engine, model, share, neighbour=beside) + ", across instance counts:"
        yield capacity_text.format_instance_law(law)
    if check:
        yield ""
        yield capacity_text.format_check(checked, p99_ms)
    if plot:
        from rig.analysis.capacity import plot as capacity_plot

        yield f"plot: {capacity_plot.figure(models, checked, laws, goals, headroom, plot)}"
