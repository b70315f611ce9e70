"""`rig report --conformance`'s text (rig.analysis.report.conformance_grid) over the small kept store
of real soaks (tests/data/conformance/store): the grid kept by ``--where``, the upgrade question's
cells, and the one-line errors. (The command around it: tests/analysis/test_conformance.py.)"""

from __future__ import annotations

import pytest
from helpers import ROOT, cycle_row

from rig.analysis.report import conformance_grid
from rig.common.errors import RigError
from rig.store import Store

FIXTURE = ROOT / "tests" / "data" / "conformance" / "store"


def _asked(source, target) -> dict:
    return {"source": source, "target": target, "scenario": None, "shape": None, "engine": None}


def test_the_grid_of_the_scenario_cycles():
    text = conformance_grid.text(Store.open(FIXTURE), FIXTURE, [])
    assert text.startswith(f"# Conformance: {FIXTURE}\n\n10 cell(s): ")
    assert "| scenario | 2.41.0 | 2.48.0 | 2.51.0 | changed in |" in text


def test_where_keeps_the_cycles_it_names():
    text = conformance_grid.text(Store.open(FIXTURE), FIXTURE, ["triton_version=2.41.0"])
    assert "2 cell(s)" in text and "| 2.48.0 |" not in text


def test_the_upgrade_question_only_the_cells_that_differ():
    text = conformance_grid.text(Store.open(FIXTURE), FIXTURE, [], _asked("2.48.0", "2.51.0"))
    assert text.startswith("# Upgrade from 2.48.0 to 2.51.0")


@pytest.mark.parametrize(
    "where, says",
    [
        (["engine=tritonserver"], "matches nothing in"),
        (["colour=red"], "no such column"),
    ],
)
def test_a_where_that_keeps_nothing_is_one_error(where, says):
    with pytest.raises(RigError, match=says):
        conformance_grid.text(Store.open(FIXTURE), FIXTURE, where)


def test_a_store_without_scenario_cycles_says_how_to_make_them(tmp_path):
    Store(tmp_path).write("cycles", [cycle_row(1)], "2.51.0", "c000001")
    with pytest.raises(RigError, match="holds no scenario cycles: run rig matrix --scenarios all"):
        conformance_grid.text(Store.open(tmp_path), tmp_path, [])
