"""`rig report --conformance`'s text (``rig.commands.report`` prints it or writes it): the
conformance grid of a store's scenario cycles kept by ``--where`` (``rig.analysis.conformance.table``),
or, where the upgrade question is asked (``--from``/``--to``), only the cells that differ between
the two cores (``rig.analysis.conformance.diff``)."""

from __future__ import annotations

import dataclasses

from rig.analysis.conformance import diff as cd
from rig.analysis.conformance import diff_text as cdt
from rig.analysis.conformance import table as cf
from rig.analysis.conformance import text as cft
from rig.analysis.report.page import bisects_of
from rig.common.errors import RigError
from rig.common.text import redact
from rig.contract.rows import CycleRow


def _cycles(store, results, where: list[str]):
    """The store's cycles, the grid's columns and the ``--where`` keys, kept by ``--where``."""
    from rig.store import where as wh

    names = {f.name for f in dataclasses.fields(CycleRow)} | {"triton_version", "date"}
    clauses = wh.parse(where)
    for key, _ in clauses:
        wh.check(key, names)
    columns = list(
        dict.fromkeys([*(c for c in [*cf.COLUMNS, *cf.BINDINGS_COLUMNS] if c in names), *(k for k, _ in clauses)])
    )
    cycles = store.read("cycles", columns=columns)
    for key, values in clauses:
        shown = wh.present((cycles,), key)
        cycles = cycles[wh.match(cycles[key], values)]
        if cycles.empty:
            raise RigError(
                f"--where {key}={','.join(values)} matches nothing in {redact(str(results))} (present: {shown})"
            )
    return cycles


def upgrade(store, results, where: list[str], asked: dict):
    """The upgrade question (``--from``/``--to``, ``asked``) over the scenario cycles in ``store``:
    ``rig.analysis.conformance.diff.Upgrade``, which the Markdown, the HTML section and the JSON
    summary (``diff_text.to_summary``: ``--summary-json``) render alike."""
    table = cf.build(_cycles(store, results, where), bisects=bisects_of(str(results)))
    if not table.cells:
        raise RigError(
            f"{redact(str(results))} holds no scenario cycles: run rig matrix --scenarios all "
            f"(or rig soak --scenario NAME) with --results {redact(str(results))}"
        )
    return cd.upgrade(table, results=redact(str(results)), **asked)


def summary_json(store, results, where: list[str], asked: dict) -> str:
    """The upgrade question's JSON summary (``--summary-json``): what changed, cause by cause, and
    the cells under each, as the Markdown and the page say it."""
    import json

    return json.dumps(cdt.to_summary(upgrade(store, results, where, asked)), indent=1, default=str) + "\n"


def text(store, results, where: list[str], asked: dict | None = None) -> str:
    """The grid of the scenario cycles in ``store`` (opened from ``results``) as Markdown; where
    ``asked`` (``--from``/``--to``), only the cells that differ between the two cores."""
    import pyarrow.compute as pc

    if asked is not None:
        return cdt.to_markdown(upgrade(store, results, where, asked))

    cycles = _cycles(store, results, where)
    # the batch sizes a batched cell formed are in its windows (the upgrade question reads none)
    runs = cf.batched_runs(cycles)
    windows = (
        store.read("windows", columns=["run_id", "cycle", "batch_sizes"], filter=pc.field("run_id").isin(runs))
        if runs
        else None
    )
    table = cf.build(cycles, windows=windows, bisects=bisects_of(str(results)))
    if not table.cells:
        raise RigError(
            f"{redact(str(results))} holds no scenario cycles: run rig matrix --scenarios all "
            f"(or rig soak --scenario NAME) with --results {redact(str(results))}"
        )
    counts = ", ".join(f"{n} {j}" for j, n in table.counts.items())
    return f"# Conformance: {redact(str(results))}\n\n{len(table.cells)} cell(s): {counts}.\n\n" + cft.to_markdown(
        table
    )
