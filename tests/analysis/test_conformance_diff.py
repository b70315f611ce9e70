"""The upgrade question (rig.analysis.conformance.diff, `rig report --conformance R --from A --to B`):
only the cells that differ between two cores, where each first changed and which releases of that
gap were not run, the cells run on one side only, names said back as Triton versions, one-line
errors; over the real kept store (docs/conformance/store: 34 cores, both APIs) and small cycles
frames for the exact cases; the report page's section."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from helpers import ROOT
from rig.analysis.conformance import table as cf
from rig.analysis.conformance import diff as cd
from rig.analysis.conformance import diff_text as cdt
from rig.cli import main
from rig.common.errors import RigError

STORE = ROOT / "docs" / "conformance" / "store"
FIXTURE = ROOT / "tests" / "data" / "conformance" / "store"
KNOWN_HEAD = "scenario,control,shape,engine,triton_version,lifecycle,load,growth,cycles,run_id\n"


def _cycles(scenario: str, version: str, outcomes=("clean",) * 3, load: str = "ok", control: bool = False,
            engine: str = "capi", shape: str = "unbatched", stop: float = 2.0) -> list[dict]:
    run = f"r-{scenario}-{int(control)}-{engine}-{shape}-{version}"
    return [{"run_id": run, "cycle": i + 1, "scenario": scenario, "control": control, "shape": shape,
             "engine": engine, "triton_version": version, "outcome": o, "load_outcome": load, "growth_outcome": "ok",
             "stop_latency_s": stop, "finalize_expected": 1, "finalize_before_stop": int(o == "clean"),
             "finalize_after_stop": 0} for i, o in enumerate(outcomes)]


def _table(tmp_path: Path, *groups: list[dict], known: tuple[str, ...] = ()) -> cf.Conformance:
    """The table of these cycles, judged against only the ``known`` rows given (a control against its
    contract)."""
    path = tmp_path / "known.csv"
    path.write_text(KNOWN_HEAD + "".join(r + "\n" for r in known))
    return cf.build(pd.DataFrame([r for g in groups for r in g]), known_path=path)


@pytest.fixture(scope="module")
def kept() -> cf.Conformance:
    from rig.store import Store

    return cf.build(Store.open(STORE).read("cycles", columns=cf.COLUMNS))


# --- pure: synthetic cycles ------------------------------------------------------------------------

def test_a_change_in_a_gap_names_the_releases_not_run_and_a_cell_on_one_side_is_apart(tmp_path):
    et = ("exit_timeout",) * 3
    table = _table(tmp_path,
                   _cycles("retained-response", "2.51.0"), _cycles("retained-response", "2.55.0"),
                   _cycles("retained-response", "2.60.0", et),
                   _cycles("stub-exits", "2.57.0"),  # 2.57.0 ran, but not this row: a release of its gap
                   _cycles("retained-response", "2.60.0", control=True))  # on --to only
    u = cd.upgrade(table, "2.51.0", "2.60.0", results="R")
    (api,) = u.apis
    (row,) = api.rows
    assert (row.before.triton_version, row.last_same.triton_version, row.changed.triton_version) == \
        ("2.51.0", "2.55.0", "2.60.0")
    assert row.gap == ("2.56.0", "2.57.0", "2.58.0", "2.59.0", "2.59.1")
    assert cdt.where_text(row) == "changed between 2.55.0 and 2.60.0 (2.56.0, 2.57.0, 2.58.0, 2.59.0, 2.59.1 not run)"
    assert (api.compared, [c.label for c in api.only_after], api.only_before) == (1, ["retained-response (control)"], ())
    md = cdt.to_markdown(u)
    assert md.startswith("# Upgrade from 2.51.0 to 2.60.0: R\n\nUpgrade from 2.51.0 to 2.60.0: 1 cell(s) run on "
                         "both compared, 1 differ.\n\n- C API (`capi`): 1 compared, 1 differ, 1 run on 2.60.0 only\n")
    # one cause, dated by the gap; the cell under it with its cycles, k/n
    assert ("## What changed\n\nFrom 2.51.0 to 2.60.0: 1 cause explains 1 cell.\n\n1. between 2.55.0 and 2.60.0 "
            "(2.56.0, 2.57.0, 2.58.0, 2.59.0, 2.59.1 not run): lifecycle clean → exit_timeout, 1 cell (capi: "
            "unbatched 1); not bisected yet: `rig bisect --scenario retained-response --shape unbatched --engine capi "
            "--good 2.55.0 --bad 2.60.0`\n") in md
    assert ("| capi | unbatched | retained-response | clean / ok / ok (3/3) | exit_timeout / ok / ok (3/3) | — | — "
            "| server#8755 |") in md
    assert "Rates:" not in md  # no cell's cycles disagree: nothing to say of rates
    assert "| unbatched, retained-response | 2.60.0 | first changed, to | 3 | exit_timeout 3 | ok 3 | ok 3 | 2.000 " \
           "| 0/3 | r-retained-response-0-capi-unbatched-2.60.0 |" in md
    assert "**Not run on 2.51.0 through capi (run on 2.60.0 only)**" in md
    assert ("| unbatched | retained-response (control) | clean / ok / ok (3/3) | "
            "r-retained-response-1-capi-unbatched-2.60.0 |") in md
    assert "- `retained-response`: the client keeps the last response object across stop()" in md
    assert "`rig report --conformance R --where run_id=RUN_ID`" in md
    # adjacent releases: changed in; between them the first that differs, and where the --to verdicts began
    three = _table(tmp_path, _cycles("stub-exits", "2.50.0"), _cycles("stub-exits", "2.51.0", ("crashed",) * 3),
                   _cycles("stub-exits", "2.55.0", et), _cycles("stub-exits", "2.60.0", et))
    (row,) = cd.upgrade(three, "2.50.0", "2.60.0").apis[0].rows
    assert cdt.where_text(row) == "changed in 2.51.0; as on 2.60.0 from 2.55.0 on"
    assert [what for what, _ in cdt.evidence(row)] == ["from", "first changed", "to"]


def test_a_downgrade_walks_down(tmp_path):
    table = _table(tmp_path, _cycles("retained-response", "2.55.0"), _cycles("retained-response", "2.59.1"),
                   _cycles("retained-response", "2.60.0", ("exit_timeout",) * 3))
    u = cd.upgrade(table, "2.60.0", "2.55.0")
    (row,) = u.apis[0].rows
    assert u.downgrade and row.changed.triton_version == "2.59.1"
    assert cdt.where_text(row, down=True) == "first differs on 2.59.1 (going down from 2.60.0)"
    assert cdt.to_markdown(u).startswith("# Downgrade from 2.60.0 to 2.55.0")
    gap = _table(tmp_path, _cycles("retained-response", "2.55.0"), _cycles("retained-response", "2.59.0"),
                 _cycles("retained-response", "2.60.0", ("exit_timeout",) * 3))
    (row,) = cd.upgrade(gap, "2.60.0", "2.55.0").apis[0].rows
    assert cdt.where_text(row, down=True) == "differs between 2.60.0 and 2.59.0 (2.59.1 not run)"


def test_a_known_race_is_no_change_until_its_sides_move(tmp_path):
    """Three cycles on either side of a race known on both cores are no difference; a race whose
    alternatives moved (exit_timeout|clean to exit_timeout|aborted_at_exit) is, named with its cycles."""
    race = "clean|exit_timeout"
    table = _table(tmp_path,
                   _cycles("execute-raises", "2.55.0", ("clean", "clean", "exit_timeout"), load="errors"),
                   _cycles("execute-raises", "2.60.0", ("exit_timeout", "clean", "exit_timeout"), load="errors"),
                   _cycles("execute-raises", "2.68.0", ("exit_timeout", "aborted_at_exit", "aborted_at_exit"),
                           load="errors"),
                   known=(f"execute-raises,0,unbatched,capi,2.55.0,{race},errors,ok,3,r",
                          f"execute-raises,0,unbatched,capi,2.60.0,{race},errors,ok,3,r",
                          "execute-raises,0,unbatched,capi,2.68.0,aborted_at_exit|exit_timeout,errors,ok,3,r"))
    assert cd.upgrade(table, "2.55.0", "2.60.0").apis[0].rows == ()
    (row,) = cd.upgrade(table, "2.55.0", "2.68.0").apis[0].rows
    assert cdt.verdicts_text(row.before) == ("clean / errors / ok (2/3; exit_timeout / errors / ok 1/3); known "
                                             "intermittent: clean|exit_timeout / errors / ok")
    assert cdt.verdicts_text(row.after).startswith("aborted_at_exit / errors / ok (2/3; exit_timeout / errors / ok "
                                                   "1/3); known intermittent")
    assert cdt.change_text(row) == "lifecycle clean → aborted_at_exit"


def test_names_are_said_back_as_triton_versions(tmp_path):
    assert [cd.triton_version(v) for v in ("0.5.10", "2.48", "v2.48.0", "r26.03", "2.67.0")] == \
        ["2.48.0", "2.48.0", "2.48.0", "2.67.0", "2.67.0"]
    table = _table(tmp_path, _cycles("stub-exits", "2.48.0"), _cycles("stub-exits", "2.51.0", ("crashed",) * 3))
    u = cd.upgrade(table, "0.5.10", "2.51.0")
    assert (u.source, u.target) == ("2.48.0", "2.51.0")
    head = cdt.header(u)[0]
    assert head.startswith("Upgrade from 2.48.0 to 2.51.0 (--from 0.5.10: nvidia-pytriton 0.5.10, whose core is "
                           "Triton 2.48.0): ")


def test_where_nothing_differs_it_says_so_and_an_api_missing_a_core_is_named(tmp_path):
    table = _table(tmp_path, _cycles("stub-exits", "2.41.0"), _cycles("stub-exits", "2.48.0"),
                   _cycles("stub-exits", "2.48.0", engine="tritonserver"))
    u = cd.upgrade(table, "2.41.0", "2.48.0")
    assert cdt.header(u) == [
        "Upgrade from 2.41.0 to 2.48.0: 1 cell(s) run on both compared, none differs.",
        "C API (`capi`): 1 compared, 0 differ",
        "official Python API (`tritonserver`): no cycle on 2.41.0 (it ran on 2.48.0), not compared"]
    assert "No cell differs between 2.41.0 and 2.48.0 through capi (1 compared)." in cdt.to_markdown(u)


def test_bad_names_are_one_line_that_says_what_the_results_hold(tmp_path):
    table = _table(tmp_path, _cycles("stub-exits", "2.48.0"), _cycles("stub-exits", "2.51.0"),
                   _cycles("stub-exits", "2.51.0", shape="decoupled,instances-2"))

    def error(*a, **kw) -> str:
        with pytest.raises(RigError) as e:
            cd.upgrade(table, *a, results="R", **kw)
        return str(e.value)

    assert error("2.49.0", "2.51.0") == ("--from 2.49.0: no scenario cycle of that core in R, which holds Triton "
                                         "2.48.0, 2.51.0")
    assert error("2.48.0", "0.5.11") == ("--to 0.5.11 (Triton 2.49.0): no scenario cycle of that core in R, which "
                                         "holds Triton 2.48.0, 2.51.0")
    assert error("2.48.0", "2.48") == "--from 2.48.0 and --to 2.48 are the same core, Triton 2.48.0: give two"
    assert error("2.48.0", "2.51.0", scenario=["nope"]) == ("--scenario nope: no scenario nope in R, whose scenario "
                                                            "cycles hold scenarios stub-exits")
    assert error("2.48.0", "2.51.0", scenario=["retained-response"]).startswith(
        "--scenario retained-response: the rig's scenario retained-response never ran in R")
    assert error("2.48.0", "2.51.0", shape=["batched"]) == ("--shape batched: no shape batched in R, whose scenario "
                                                            "cycles hold shapes unbatched, decoupled+instances-2")
    assert "--engine tritonserver: the rig's engine tritonserver never ran in R" in error(
        "2.48.0", "2.51.0", engine=["tritonserver"])
    assert error("2.48.0", "2.51.0", shape=["decoupled+instances-2"]).startswith("--from 2.48.0: no scenario cycle "
                                                                                  "of that core in R narrowed to")
    # a shape of two parts: joined with +, or whole as it is named
    for given in (["unbatched,decoupled+instances-2"], ["decoupled,instances-2", "unbatched"]):
        assert cd.upgrade(table, "2.48.0", "2.51.0", shape=given).apis[0].only_after[0].shape == \
            "decoupled,instances-2"


# --- the real kept store ---------------------------------------------------------------------------

def test_the_kept_store_from_2_60_to_2_71_through_capi(kept):
    u = cd.upgrade(kept, "2.60.0", "2.71.0", engine=["capi"], results="docs/conformance/store")
    (api,) = u.apis
    assert api.engine == "capi" and api.compared == 99 and not api.only_before and not api.only_after
    rows = {r.key[1:]: r for r in api.rows}
    ensemble = rows[("unbatched", "ensemble-in-flight", False)]
    assert ensemble.before.verdicts[0] == "requests_lost" and ensemble.after.verdicts[0] == "aborted_at_exit"
    # every release between run: dated to the release, as upstream's branches hold the fixes (core#470 in
    # r26.02 = 2.66.0; core#482 in r26.04 = 2.68.0)
    assert ensemble.changed.triton_version == "2.66.0" and ensemble.changed.verdicts[0] == "crashed"
    assert cdt.where_text(ensemble) == "changed in 2.66.0; as on 2.71.0 from 2.68.0 on"
    # a readiness that moved twice: the model's in 2.64.0 (core#461 as #462 in r25.12), the server's in
    # 2.68.0 (core#473 in r26.04)
    ready = rows[("unbatched", "ready-stub-dead", False)]
    assert (ready.before.probed, ready.changed.probed, ready.after.probed) == (
        "server ready, model ready", "server ready, model not ready", "server not ready, model not ready")
    assert cdt.where_text(ready) == "changed in 2.64.0; as on 2.71.0 from 2.68.0 on"
    md = cdt.to_markdown(u)
    assert "| unbatched, ensemble-in-flight | 2.60.0 | from | 3 | requests_lost 3 |" in md
    assert all(run in md for run in ensemble.before.run_ids + ensemble.changed.run_ids + ensemble.after.run_ids)


def test_the_kept_store_from_2_67_to_2_70_names_the_stub_abort_and_a_known_race_is_none(kept):
    u = cd.upgrade(kept, "2.67.0", "2.70.0", engine=["capi"])
    (api,) = u.apis
    # every shape through the C API now ran on every release between: each row is dated to one
    # (a span where releases between were not run: test_a_change_in_a_gap_names_the_releases_not_run_... above)
    wheres = {cdt.where_text(r): r for r in api.rows}
    assert "changed in 2.68.0" in wheres and wheres["changed in 2.68.0"].changed.verdicts[0] == "aborted_at_exit"
    assert not any("not run" in w for w in wheres), sorted(wheres)
    top, n = cdt.changes(api)[0]
    assert top == "lifecycle clean → aborted_at_exit" and n > len(api.rows) / 2
    # a race known on both cores (exit_timeout|clean), its cycles on either side: no change
    race = cd.upgrade(kept, "2.60.0", "2.67.0", engine=["tritonserver"], shape=["batched"],
                      scenario=["execute-raises-slow"])
    assert race.apis[0].rows == () and race.apis[0].compared == 2


def test_the_command_prints_the_rows_or_writes_them(capsys, tmp_path):
    rc = main(["report", "--conformance", str(STORE), "--from", "2.67.0", "--to", "2.71.0", "--shape", "unbatched"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.startswith(f"# Upgrade from 2.67.0 to 2.71.0: {STORE}\n")
    assert "- C API (`capi`): 42 compared," in out and "## official Python API (`tritonserver`)" in out
    assert "| batched |" not in out  # narrowed to one shape
    page = tmp_path / "up.md"
    assert main(["report", "--conformance", str(STORE), "--from", "2.67.0", "--to", "2.71.0", "--shape", "unbatched",
                 "--output", str(page)]) == 0
    assert page.read_text() == out
    assert main(["report", str(STORE), "--scenario", "reload"]) == 2
    assert capsys.readouterr().err.strip().endswith("--scenario narrows the upgrade question: give it with --from "
                                                    "and --to")


@pytest.mark.slow  # a process of its own
def test_a_version_the_store_does_not_hold_is_one_line_through_the_real_command():
    from helpers import rig

    done = rig("report", "--conformance", str(STORE), "--from", "2.72.0", "--to", "0.5.10")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    held = ["2.36.0", "2.39.0", *(f"2.{m}.0" for m in range(41, 60)), "2.59.1", *(f"2.{m}.0" for m in range(60, 72)),
            "2.71.0-v086b04dea9"]  # python_backend PR #429 on 2.71.0 (a variant, beside its release)
    assert line == (f"rig: error: --from 2.72.0: no scenario cycle of that core in {STORE}, which holds Triton "
                    + ", ".join(held))


# --- the report's page -----------------------------------------------------------------------------

@pytest.mark.slow  # a whole report
def test_the_report_page_has_the_upgrade_section_by_default_and_as_asked(tmp_path):
    from rig.analysis.report import page as report

    data = report.load(str(FIXTURE))
    md, page = report.build(data)  # three cores: from the oldest to the newest by default
    assert "<h2>Upgrade from 2.41.0 to 2.51.0</h2>" in page and "## Upgrade from 2.41.0 to 2.51.0" in md
    md, page = report.build(data, upgrade={"source": "0.5.10", "target": "2.51.0"})
    assert "<h2>Upgrade from 2.48.0 to 2.51.0</h2>" in page
    section = page[page.index("<h2>Upgrade from 2.48.0 to 2.51.0</h2>"):]
    section = section[:section.index("</section>")]
    assert '<div class="conformance upgrade">' in section
    assert "<td>capi</td><td>unbatched</td><td>stub-exits</td><td>exit_timeout / timeouts / not_measured (1/1)</td>" \
        in section
    assert "<h3>What changed</h3>" in section
    assert "<h3>1. between 2.48.0 and 2.51.0 (2.49.0, 2.50.0 not run): " in section
    assert ("Upgrade from 2.48.0 to 2.51.0 (--from 0.5.10: nvidia-pytriton 0.5.10, whose core is Triton 2.48.0): 4 "
            "cell(s) run on both compared, 1 differ.") in md
