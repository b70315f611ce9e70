"""`rig scenarios`' work (rig.analysis.conformance.listing): a row per scenario of the catalog, with
the cores its verdicts are known on read from a known-verdicts file, and a reviewed run's verdicts
recorded as known. (The command, run whole: tests/scenarios/test_scenarios.py.)"""

from __future__ import annotations

import pytest
from helpers import cycle_row

from rig.analysis.conformance import listing
from rig.common.errors import RigError
from rig.scenarios import known
from rig.scenarios.catalog import SCENARIOS
from rig.store import Store

KNOWN_HEAD = "scenario,control,shape,engine,triton_version,lifecycle,load,growth,cycles,run_id\n"


def test_a_row_per_scenario_in_the_catalogs_order():
    rows = listing.rows()
    assert [r["scenario"] for r in rows] == list(SCENARIOS)
    assert list(rows[0]) == [
        "scenario",
        "what",
        "upstream",
        "shows as",
        "shapes",
        "known on",
        "control",
        "built from",
        "fixed in",
    ]


def test_known_on_is_read_from_the_known_verdicts_in_version_order(tmp_path, monkeypatch):
    name = next(iter(SCENARIOS))
    path = tmp_path / "known.csv"
    path.write_text(
        KNOWN_HEAD
        + "".join(
            f"{name},0,unbatched,{engine},{version},clean,ok,ok,3,r1\n"
            for engine, version in (("tritonserver", "2.9.0"), ("capi", "2.48.0"), ("capi", "2.10.0"))
        )
    )
    monkeypatch.setenv("RIG_KNOWN_VERDICTS", str(path))
    by = {r["scenario"]: r for r in listing.rows()}
    assert by[name]["known on"] == "2.9.0, 2.10.0, 2.48.0; capi, tritonserver"
    other = next(s for s in SCENARIOS if s != name)
    assert by[other]["known on"] == "nothing yet (rig scenarios --accept RESULTS)"


def test_accept_records_the_cells_and_names_those_left_out(tmp_path):
    rows = [
        cycle_row(
            i,
            scenario="execute-raises",
            control=False,
            shape="batched",
            outcome="clean",
            load_outcome="errors",
            growth_outcome="ok",
        )
        for i in (1, 2)
    ]
    rows += [
        cycle_row(
            3, scenario="stub-exits", control=False, shape="unbatched", outcome="exit_timeout", load_outcome="errors"
        ),
        cycle_row(4, scenario="stub-exits", control=False, shape="unbatched", outcome="clean", load_outcome="errors"),
    ]
    Store(tmp_path / "R").write("cycles", rows, "2.51.0", "run")
    path = tmp_path / "known.csv"
    written, left_out = listing.accept(str(tmp_path / "R"), str(path))
    assert written == 1 and len(left_out) == 1 and left_out[0].startswith("stub-exits unbatched capi 2.51.0")
    assert known.lookup("execute-raises", False, "batched", "capi", "2.51.0", path).verdicts == ("clean", "errors")


def test_accept_over_a_store_without_scenario_cycles_is_one_error(tmp_path):
    Store(tmp_path / "R").write("cycles", [cycle_row(1)], "2.51.0", "run")
    with pytest.raises(RigError, match="holds no scenario cycles to accept"):
        listing.accept(str(tmp_path / "R"), str(tmp_path / "known.csv"))
