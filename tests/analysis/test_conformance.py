"""The conformance table (rig.analysis.conformance.table): cells judged against the known verdicts,
"changed in" across cores in numeric version order, findings; its grids in Markdown and HTML;
`rig report --conformance`; the report page's section in a real headless Chromium; and the
published pages, docs/conformance.md and one page per API and shape under docs/conformance/,
regenerated from their kept store byte for byte.

The kept stores are real: tests/data/conformance/store holds the scenario cycles of ten real
soaks through the C API (finalize-raises and its control on Triton 2.41.0, 2.48.0 and 2.51.0,
stub-exits on 2.48.0 and 2.51.0, finalize-raises in shape instances-2 on 2.48.0 and 2.51.0; some
stored before the shape column, read as unbatched), kept by benchmarks/conformance_page.py
--from RESULTS.
"""

from __future__ import annotations

import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from helpers import ROOT
from rig.analysis.conformance import table as cf
from rig.analysis.conformance import changes as cfc
from rig.analysis.conformance import findings as cff
from rig.analysis.conformance import html as cfh
from rig.analysis.conformance import text as cft
from rig.cli import main

FIXTURE = ROOT / "tests" / "data" / "conformance" / "store"
sys.path.insert(0, str(ROOT / "benchmarks"))

import conformance_page  # noqa: E402

KNOWN_HEAD = "scenario,control,shape,engine,triton_version,lifecycle,load,growth,cycles,run_id\n"


def _known(tmp_path: Path, *rows: str) -> Path:
    p = tmp_path / "known.csv"
    p.write_text(KNOWN_HEAD + "".join(r + "\n" for r in rows))
    return p


def _cycles(scenario: str, version: str, outcome: str = "clean", load: str | None = "ok", growth: str | None = "ok",
            n: int = 1, control: bool = False, engine: str = "capi", shape: str | None = None, run_id: str = "r1",
            stop: float = 2.0, **kw) -> list[dict]:
    return [{"run_id": run_id, "cycle": i + 1, "scenario": scenario, "control": control, "shape": shape,
             "engine": engine, "triton_version": version, "outcome": outcome, "load_outcome": load,
             "growth_outcome": growth, "stop_latency_s": stop, "finalize_expected": 1, "finalize_before_stop": 1,
             "finalize_after_stop": 0, **kw} for i in range(n)]


def _frame(*groups: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([r for g in groups for r in g])


# --- pure: order, judgement, changed in, findings --------------------------------------------------

def test_versions_in_numeric_order():
    assert sorted(["2.51.0", "2.10", "2.48.0", "2.9", "2.48.0-rc1"], key=cf.version_key) == \
        ["2.9", "2.10", "2.48.0", "2.48.0-rc1", "2.51.0"]


def test_cells_judged_as_known_finding_or_unjudged(tmp_path):
    known = _known(tmp_path, "finalize-raises,0,unbatched,capi,2.51.0,finalize_error,ok,ok,3,m1",
                   "finalize-raises,1,unbatched,capi,2.51.0,clean,ok,ok,3,m1",
                   "stub-exits,0,unbatched,capi,2.51.0,exit_timeout,errors,ok,3,m1")
    frame = _frame(_cycles("finalize-raises", "2.51.0", "finalize_error", n=3),
                   # a growth verdict not measured is never held against a cycle
                   _cycles("finalize-raises", "2.51.0", "clean", growth="not_measured", n=2, control=True),
                   _cycles("finalize-raises", "2.51.0", "clean", growth=None, control=True, run_id="r2"),
                   # one cycle of three differs: a finding
                   _cycles("stub-exits", "2.51.0", "exit_timeout", "errors", n=2),
                   _cycles("stub-exits", "2.51.0", "exit_timeout", "timeouts", run_id="r3"),
                   _cycles("finalize-raises", "2.41.0", "finalize_error"),      # nothing known: unjudged
                   _cycles("baseline", "2.51.0"), _cycles(None, "2.51.0"))     # not scenarios: left out
    cells = {(c.scenario, c.control, c.triton_version): c for c in cf.cells(frame, known)}
    assert set(cells) == {("finalize-raises", False, "2.51.0"), ("finalize-raises", True, "2.51.0"),
                          ("stub-exits", False, "2.51.0"), ("finalize-raises", False, "2.41.0")}
    assert cells["finalize-raises", False, "2.51.0"].judgement == cf.AS_KNOWN
    control = cells["finalize-raises", True, "2.51.0"]
    assert control.judgement == cf.AS_KNOWN and control.run_ids == ("r1", "r2") and control.cycles == 3
    assert control.growth == {"not_measured": 2}  # counted where recorded
    stub = cells["stub-exits", False, "2.51.0"]
    assert stub.judgement == cf.FINDING and stub.differing == 1 and stub.verdicts == ("exit_timeout", "errors", "ok")
    assert stub.agreeing == 2 and cft.mark(stub) == ("🔴 held to exit_timeout · errors 2/3 "
                                                     "✗ known: held to exit_timeout · errors")
    old = cells["finalize-raises", False, "2.41.0"]
    assert old.judgement == cf.UNJUDGED and old.known is None and cft.mark(old) == "🔴 finalize raised ?"
    assert cft.mark(cells["finalize-raises", False, "2.51.0"]) == "🔴 finalize raised"  # as known: no mark
    assert cft.mark(control) == "🟢 clean 2/3"  # growth not measured in two, ok in one: they differ
    found = cff.findings(frame, known)
    assert [(f["scenario"], f["triton_version"], f["differing"]) for f in found] == [("stub-exits", "2.51.0", 1)]
    assert found[0]["reason"] == ("stub-exits, unbatched, capi, Triton 2.51.0: 1/3 cycle(s) differ from the known "
                                  "exit_timeout / errors / ok (got 2x exit_timeout / errors / ok, "
                                  "1x exit_timeout / timeouts / ok)")
    assert cff.findings(_frame(_cycles("finalize-raises", "2.51.0", "finalize_error")), known) == []


def test_a_row_without_a_shape_is_unbatched_and_each_shape_is_judged_apart(tmp_path):
    known = _known(tmp_path, "sender-kept,0,decoupled,capi,2.51.0,exit_timeout,timeouts,ok,3,m1",
                   "sender-kept,0,unbatched,capi,2.51.0,clean,ok,ok,3,m1")
    frame = _frame(_cycles("sender-kept", "2.51.0", "exit_timeout", "timeouts", shape="decoupled"),
                   _cycles("sender-kept", "2.51.0", "exit_timeout", "timeouts", shape=None, run_id="r2"),
                   _cycles("sender-kept", "2.51.0", "clean", shape="decoupled,instances-2", run_id="r3"))
    t = cf.build(frame, known)
    assert [(g.engine, g.shape) for g in t.grids] == [("capi", "unbatched"), ("capi", "decoupled"),
                                                      ("capi", "decoupled,instances-2")]
    by_shape = {c.shape: c.judgement for c in t.cells}
    assert by_shape == {"unbatched": cf.FINDING, "decoupled": cf.AS_KNOWN, "decoupled,instances-2": cf.UNJUDGED}
    assert len({c.anchor for c in t.cells}) == 3


def test_changed_in_names_every_core_whose_verdicts_differ_from_the_one_before():
    frame = _frame(_cycles("execute-raises", "2.51.0", "exit_timeout", "errors"),
                   _cycles("execute-raises", "2.9", "clean", "errors"),
                   _cycles("execute-raises", "2.10", "clean", "errors"),
                   _cycles("execute-raises", "2.48.0", "clean", "errors"),
                   # several changes, all named; the majority of a cell's cycles is its verdict
                   _cycles("stub-exits", "2.44.0", "exit_timeout", "errors", n=2),
                   _cycles("stub-exits", "2.44.0", "clean", "errors", run_id="r2"),
                   _cycles("stub-exits", "2.48.0", "exit_timeout", "timeouts"),
                   _cycles("stub-exits", "2.51.0", "exit_timeout", "errors"),
                   # a growth not measured on one core is no change; one through another API is its own
                   _cycles("leaks-memory", "2.48.0", growth="leaking"),
                   _cycles("leaks-memory", "2.51.0", growth="not_measured"),
                   _cycles("leaks-memory", "2.44.0", growth="ok", engine="tritonserver"),
                   _cycles("leaks-memory", "2.48.0", growth="leaking", engine="tritonserver"))
    changes = cfc.changed_in(cf.cells(frame))
    # a change between two cores with releases between them not run is dated as the span it may be in
    # (a window that starts before 2.51.0, the oldest release the sources here hold, says it cannot be bisected)
    assert changes[("execute-raises", False, "capi", "unbatched")] == ["2.49.0…2.51.0 (not bisectable: 2.48.0 has no sources here)"]
    assert changes[("stub-exits", False, "capi", "unbatched")] == ["2.45.0…2.48.0 (not bisectable: 2.44.0 has no sources here)", "2.49.0…2.51.0 (not bisectable: 2.48.0 has no sources here)"]
    assert changes[("leaks-memory", False, "capi", "unbatched")] == []
    assert changes[("leaks-memory", False, "tritonserver", "unbatched")] == ["2.45.0…2.48.0 (not bisectable: 2.44.0 has no sources here)"]
    grid = cf.build(frame).grids[0]
    assert grid.cores == ("2.9", "2.10", "2.44.0", "2.48.0", "2.51.0")
    md = cft.to_markdown(cf.build(frame))
    # each core a change names links to that core's cell (its figures: the evidence)
    assert re.search(r"\| \[execute-raises\]\(#cf-what-execute-raises\) \|.*\| changed in "
                     r"\[2.49.0…2.51.0 \(not bisectable: 2.48.0 has no sources here\)\]"
                     r"\(#cf-capi-unbatched-execute-raises-2-51-0\) \|", md)
    assert ("| changed in [2.45.0…2.48.0 (not bisectable: 2.44.0 has no sources here)](#cf-capi-unbatched-stub-exits-2-48-0), "
            "[2.49.0…2.51.0 (not bisectable: 2.48.0 has no sources here)](#cf-capi-unbatched-stub-exits-2-51-0) |") in md
    assert '<a id="cf-capi-unbatched-stub-exits-2-48-0"></a>' in md
    assert re.search(r"\| \[leaks-memory\]\(#cf-what-leaks-memory\) \|.*\| — \|", md)
    # the upstream issues are in the rows' descriptions
    assert '| <a id="cf-what-execute-raises"></a>execute-raises | the model raises in execute' in md
    assert re.search(r'<a id="cf-what-stub-exits"></a>stub-exits \| .* \| server#8604, server#7230 \|', md)
    assert cft.changed_text([]) == "—" and cft.changed_text(["2.44.0", "2.48.0"]) == "changed in 2.44.0, 2.48.0"


def test_a_change_is_dated_to_a_release_only_where_the_release_before_it_ran():
    """Releases run one after the other date a change; a gap (releases not run) gives the span the
    change may be in, never a release not run as a fact. 2.59.1 (25.07) and the NGC-only 2.37.0,
    2.38.0 and 2.40.0 are releases too."""
    assert cf.dated("2.67.0", "2.68.0") == "2.68.0"
    assert cf.dated("2.67.0", "2.70.0") == "2.68.0…2.70.0"
    assert cf.dated("2.59.0", "2.60.0") == "2.59.1…2.60.0" and cf.dated("2.59.1", "2.60.0") == "2.60.0"
    assert cf.dated("2.36.0", "2.39.0") == "2.37.0…2.39.0"
    assert cf.between("2.70.0", "2.67.0") == ["2.68.0", "2.69.0"]
    assert sorted(["2.68.0…2.70.0", "2.61.0", "2.9"], key=cf.version_key) == ["2.9", "2.61.0", "2.68.0…2.70.0"]


def test_every_grid_of_an_api_has_a_column_for_every_core_it_ran():
    """A release run in one shape only is a column of never-run cells in the API's other grids (and
    none in another API's), so that a reader sees the gap a change there spans."""
    frame = _frame(_cycles("execute-raises", "2.67.0"), _cycles("execute-raises", "2.67.0", shape="batched"),
                   _cycles("execute-raises", "2.68.0", "aborted_at_exit"),
                   _cycles("execute-raises", "2.70.0", "aborted_at_exit", shape="batched"),
                   _cycles("execute-raises", "2.60.0", engine="tritonserver"))
    grids = {(g.engine, g.shape): g for g in cf.build(frame).grids}
    assert grids[("capi", "batched")].cores == grids[("capi", "unbatched")].cores == ("2.67.0", "2.68.0", "2.70.0")
    assert grids[("tritonserver", "unbatched")].cores == ("2.60.0",)
    batched = grids[("capi", "batched")]
    assert ("execute-raises", False, "2.68.0") not in batched.cells
    assert batched.changed[("execute-raises", False)] == ("2.68.0…2.70.0",)
    md = cft.to_markdown(cf.build(frame))
    assert re.search(r"\| \[execute-raises\]\([^)]+\) \| \[🟢 clean[^]]*\]\([^)]+\) \| ¹ \| \[🔴", md), md


def test_cycles_on_either_side_of_a_known_race_are_no_change(tmp_path):
    """metrics-reload crashes in some cycles and not others: where a core is known to race, a
    neighbour whose cycles fell on one side of that race has not changed; a side it never named has."""
    known = tmp_path / "known.csv"
    known.write_text(",".join(cf.known_verdicts.FIELDS) + "\n"
                     "metrics-reload,0,unbatched,capi,2.62.0,crashed|clean,not_measured|ok,not_measured|ok,3,r\n")
    frame = _frame(_cycles("metrics-reload", "2.61.0"), _cycles("metrics-reload", "2.62.0", "crashed", "not_measured",
                                                               "not_measured", n=2),
                   _cycles("metrics-reload", "2.62.0", run_id="r2"), _cycles("metrics-reload", "2.63.0"),
                   _cycles("metrics-reload", "2.64.0", "aborted_at_exit"))
    assert cfc.changed_in(cf.cells(frame, known))[("metrics-reload", False, "capi", "unbatched")] == ["2.64.0"]


def test_a_readiness_fix_is_a_change_though_the_verdicts_hold():
    """ready-stub-dead gives finalize_missing on every core; what changes is what still says ready
    once its stub is dead (core#461: the model, core#473: the server). A core that did not ask
    (an older store) is no change."""
    def probe(version, server, model, n=3):
        return _cycles("ready-stub-dead", version, "finalize_missing", n=n, server_ready_at_probe=server,
                       model_ready_at_probe=model)
    frame = _frame(probe("2.60.0", True, True), probe("2.67.0", True, False, n=2), probe("2.67.0", True, True, n=1),
                   probe("2.70.0", False, False), probe("2.71.0", False, False),
                   _cycles("ready-stub-dead", "2.72.0", "finalize_missing"))
    cells = {c.triton_version: c for c in cf.cells(frame)}
    assert cells["2.67.0"].probed == "server ready, model not ready" and cells["2.72.0"].probed is None
    assert cfc.changed_in(cells.values())[("ready-stub-dead", False, "capi", "unbatched")] == ["2.61.0…2.67.0",
                                                                                              "2.68.0…2.70.0"]
    assert cft.mark(cells["2.60.0"]).endswith(" finalize missing")  # ready both: nothing to add
    assert "· model not ready" in cft.mark(cells["2.67.0"])
    assert "· server not ready, model not ready" in cft.mark(cells["2.70.0"])
    assert "finalize_missing 3 (server not ready, model not ready after the stub died)" in cft.to_markdown(cf.build(frame))


# --- the grids -------------------------------------------------------------------------------------

class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.hrefs.append(a["href"][1:])


def test_grid_rows_columns_marks_footnotes_and_links_in_both_renderings(tmp_path):
    known = _known(tmp_path, "finalize-raises,0,unbatched,capi,2.51.0,finalize_error,ok,ok,3,m1")
    frame = _frame(_cycles("finalize-raises", "2.51.0", "finalize_error", n=3, stop=2.5),
                   _cycles("finalize-raises", "2.48.0", "clean", control=True),
                   _cycles("stub-exits", "2.48.0", "exit_timeout", "timeouts"),
                   _cycles("stop-in-flight", "2.51.0", "requests_lost", engine="tritonserver"))
    skipped = [{"scenario": "stub-exits", "control": False, "engine": "capi", "shape": None,
                "triton_version": "2.51.0", "reason": "no stub for this Python"}]
    t = cf.build(frame, known, skipped=skipped)
    md = cft.to_markdown(t)
    capi = md.split("## C API (`capi`), unbatched")[1].split("## official Python API")[0]
    rows = [line for line in capi.split("**Figures")[0].splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0] == "| scenario | 2.48.0 | 2.51.0 | changed in |"
    # registry order (stub-exits before finalize-raises), the control its own row, each linked to what it does
    assert [r.split(" | ")[0] for r in rows[1:4]] == ["| [stub-exits](#cf-what-stub-exits)",
                                                      "| [finalize-raises](#cf-what-finalize-raises)",
                                                      "| [finalize-raises (control)](#cf-what-finalize-raises)"]
    assert rows[1].split(" | ")[2] == "skipped²" and "² stub-exits on 2.51.0: skipped, no stub for this Python" in capi
    assert rows[2].split(" | ")[1] == "¹" and "¹ never run: no cycle stored" in capi
    assert "[🔴 finalize raised](#cf-capi-unbatched-finalize-raises-2-51-0)" in rows[2]
    assert "[🟢 clean](#cf-capi-unbatched-finalize-raises-control-2-48-0)" in rows[3]  # a control's contract
    assert '| <a id="cf-what-finalize-raises"></a>finalize-raises | the model\'s finalize raises | the rig\'s own |' in md
    figures = capi.split("**Figures:")[1]
    assert ('| <a id="cf-capi-unbatched-finalize-raises-2-51-0"></a>finalize-raises, 2.51.0 | 3 | finalize_error 3 '
            '| ok 3 | ok 3 | finalize_error / ok / ok | as known | 2.500 | 3/3 | r1 |') in figures
    assert "## official Python API (`tritonserver`), unbatched" in md and "[🔴 requests lost ?](" in md
    # every link has its anchor, in Markdown and in HTML (which has no descriptions: a tooltip says them)
    targets = re.findall(r"\]\(#([^)]+)\)", md)
    cells = [a for a in targets if not a.startswith("cf-what-")]
    assert len(cells) == 4 and all(f'<a id="{a}"></a>' in md for a in targets)
    page = _Links()
    page.feed(cfh.to_html(t))
    assert sorted(page.hrefs) == sorted(cells) and set(page.hrefs) <= set(page.ids)
    assert len(page.ids) == len(set(page.ids))
    html = cfh.to_html(t)
    assert ('<td class="cf-unhealthy" title="unhealthy; as known (known: finalize_error / ok / ok)">'
            '<a href="#cf-capi-unbatched-finalize-raises-2-51-0">finalize raised</a></td>') in html
    assert ('<td class="cf-unhealthy cf-unjudged" title="unhealthy; unjudged">'
            '<a href="#cf-tritonserver-unbatched-stop-in-flight-2-51-0">requests lost ?</a></td>') in html
    assert '<th scope="row" class="cf-row" title="the model&#x27;s finalize raises">finalize-raises</th>' in html
    assert '<span class="cf-key cf-healthy"></span> healthy' in html and "🟢" not in html


def test_the_grid_spans_cores_or_shapes():
    one = _frame(_cycles("finalize-raises", "2.51.0"), _cycles("finalize-raises", "2.51.0", control=True))
    assert not cf.spans_cores_or_shapes(one)
    assert cf.spans_cores_or_shapes(_frame(_cycles("finalize-raises", "2.51.0"), _cycles("finalize-raises", "2.48.0")))
    assert cf.spans_cores_or_shapes(_frame(_cycles("finalize-raises", "2.51.0"),
                                           _cycles("finalize-raises", "2.51.0", shape="batched")))
    # baseline cycles on another core do not count
    assert not cf.spans_cores_or_shapes(_frame(_cycles("finalize-raises", "2.51.0"), _cycles("baseline", "2.48.0")))
    assert not cf.spans_cores_or_shapes(_frame(_cycles("finalize-raises", "2.51.0")).drop(columns="shape"))


def test_the_report_section_only_across_cores_or_shapes():
    from rig.analysis.report import page as report, html as report_html

    assert report.conformance_section(_frame(_cycles("finalize-raises", "2.51.0"))) is None
    s = report.conformance_section(_frame(_cycles("finalize-raises", "2.51.0"), _cycles("finalize-raises", "2.48.0")))
    assert s.title == "Conformance"
    md = report_html.markdown("t", [], [s])
    assert "rig report --conformance RESULTS" in md and "<table" not in md
    assert 'class="cf-grid"' in report_html.page("t", [], [s])


# --- rig report --conformance ---------------------------------------------------------------------

def _report(capsys, *args) -> tuple[int, str, str]:
    rc = main(["report", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_report_conformance_prints_the_grid_or_writes_it(capsys, tmp_path, monkeypatch):
    from rig.scenarios import known

    shipped = known.default_path().read_text().splitlines(keepends=True)  # less one row: a cell unjudged
    own = tmp_path / "known.csv"
    own.write_text("".join(x for x in shipped if not x.startswith("finalize-raises,0,unbatched,capi,2.41.0,")))
    monkeypatch.setenv("RIG_KNOWN_VERDICTS", str(own))
    rc, out, err = _report(capsys, "--conformance", FIXTURE)
    assert rc == 0, err
    assert out.startswith(f"# Conformance: {FIXTURE}\n\n10 cell(s): ")
    grid = out.split("## C API (`capi`), unbatched")[1]
    assert "| scenario | 2.41.0 | 2.48.0 | 2.51.0 | changed in |" in grid
    # stub-exits' load verdict changed between 2.48.0 and 2.51.0 (errors, not timeouts): as known on each
    assert re.search(r"\| \[stub-exits\]\(#cf-what-stub-exits\) \| ¹ \| \[🔴 held to exit_timeout · timeouts\]"
                     r"\(#[^)]+\) \| \[🔴 held to exit_timeout · errors\]\(#[^)]+\) \| changed in \[2.49.0…2.51.0 "
                     r"\(not bisectable: 2.48.0 has no sources here\)\]\(#[^)]+\) \|", grid), grid
    assert re.search(r"\| \[finalize-raises\]\([^)]+\) \| \[🔴 finalize raised \?\]\(#[^)]+\) \| "
                     r"\[🔴 finalize raised\]\(", grid)
    target = tmp_path / "out" / "grid.md"
    rc, said, err = _report(capsys, "--conformance", FIXTURE, "--output", target)
    assert rc == 0 and said.strip() == f"conformance: {target.resolve()}" and target.read_text() == out
    assert [p.name for p in target.parent.iterdir()] == ["grid.md"]  # no temporary file left
    rc, only, _ = _report(capsys, "--conformance", FIXTURE, "--where", "triton_version=2.41.0")
    assert rc == 0 and "| 2.48.0 |" not in only and "2 cell(s)" in only


def _no_scenarios(root: Path) -> Path:
    from helpers import cycle_row

    from rig.store import Store

    Store(root).write("cycles", [cycle_row(1)], "2.51.0", "c000001")
    return root


@pytest.mark.parametrize("args, says", [
    (["--conformance", "{plain}"], "holds no scenario cycles"),
    (["--conformance", "{missing}"], "no results folder"),
    (["--conformance", "{fixture}", "--out", "{tmp}/r.html"], "--out cannot combine with --conformance"),
    (["--conformance", "{fixture}", "--baseline", "2.48.0"], "--baseline cannot combine with --conformance"),
    (["--conformance", "{fixture}", "--max-histograms", "8"], "--max-histograms cannot combine with --conformance"),
    (["{fixture}", "--output", "{tmp}/g.md"], "--output writes the conformance grid"),
    (["--conformance", "{fixture}", "--where", "engine=tritonserver"], "matches nothing"),
    (["--conformance", "{fixture}", "--where", "colour=red"], "no such column"),
    (["--conformance", "{fixture}", "--output", "{tmp}"], "is a folder"),
])
def test_report_conformance_bad_input_is_one_line_and_exit_2(capsys, tmp_path, args, says):
    paths = {"plain": _no_scenarios(tmp_path / "plain"), "missing": tmp_path / "nope", "fixture": FIXTURE,
             "tmp": tmp_path}
    rc, out, err = _report(capsys, *[a.format(**paths) for a in args])
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("rig: error: ") and says in err, err
    assert not (tmp_path / "g.md").exists() and not (tmp_path / "r.html").exists()


# --- the published page ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def published():
    store = conformance_page.STORE
    if not (store / "cycles").is_dir():
        pytest.skip(f"no kept store at {store.relative_to(ROOT)} yet: keep a reviewed matrix run's with "
                    "python benchmarks/conformance_page.py --from RESULTS")
    return conformance_page.pages(store)


def test_the_published_pages_are_their_kept_store_regenerated(published):
    docs = conformance_page.DOCS
    for rel, text in published.items():
        page = docs / rel
        assert page.exists(), f"docs/{rel} is missing: python benchmarks/conformance_page.py"
        assert text == page.read_text(encoding="utf-8"), (
            f"docs/{rel} differs from its kept store and rig/scenarios/known_verdicts.csv: regenerate the pages "
            "with python benchmarks/conformance_page.py (and review the difference)")
    stale = {f"{conformance_page.PAGES.name}/{p.name}" for p in conformance_page.PAGES.glob("*.md")} - set(published)
    assert not stale, f"pages no longer generated: {sorted(stale)}"


def test_every_published_page_is_in_the_nav_links_within_itself_and_opens_on_a_phone(published):
    """mkdocs.yml's nav lists each page; each grid page's links reach ids on that page (mkdocs
    build --strict says so too, in .ci/run); no page reaches 180 KB (the widest, capi unbatched with
    all 34 cores and 30 scenarios, is about 165 KB against the 782 KB of the one page before); the index
    lists the pages."""
    nav = (ROOT / "mkdocs.yml").read_text()
    index = published[conformance_page.PAGE.name]
    for rel, text in published.items():
        assert len(text.encode()) < 180_000, (rel, len(text.encode()))
        assert f": {rel}\n" in nav, f"{rel} is not in mkdocs.yml's nav"
        if rel == conformance_page.PAGE.name:
            continue
        assert f"]({rel})" in index
        ids = set(re.findall(r'<a id="([^"]+)"></a>', text))
        links = re.findall(r"\]\(#([^)]+)\)", text)
        assert links and set(links) <= ids, sorted(set(links) - ids)[:5]
        assert text.count("](../conformance.md#legend)") == 1
    # 2.71.0's core is built from core's main: its column says so in every grid that has it
    grids = [t for rel, t in published.items() if rel != conformance_page.PAGE.name]
    with_271 = [t for t in grids if "| 2.71.0" in t]
    assert with_271 and all("| 2.71.0³ |" in t and "³ 2.71.0: core built from core's main" in t for t in with_271)
    assert "## Where verdicts changed" in index and "## Legend" in index and "## How it was made" in index


def test_keeping_a_store_keeps_its_scenario_cycles_and_refuses_a_foreign_folder(tmp_path, capsys):
    kept = tmp_path / "kept"
    n, size = conformance_page.keep_store(FIXTURE, kept)
    assert n == 10 and 0 < size < 100_000
    assert conformance_page.pages(kept) == conformance_page.pages(FIXTURE)
    assert conformance_page.keep_store(FIXTURE, kept)[0] == 10  # replaces a kept store
    docs = tmp_path / "docs"
    (docs / "conformance").mkdir(parents=True)
    (docs / "conformance" / "capi-gone.md").write_text("a shape no longer kept")
    assert conformance_page.main(["--store", str(kept), "--docs", str(docs)]) == 0
    assert sorted(p.name for p in (docs / "conformance").iterdir()) == ["capi-instances-2.md", "capi-unbatched.md"]
    assert (docs / "conformance.md").read_text().startswith("# Conformance\n")
    (kept / "notes.txt").write_text("mine")
    assert conformance_page.main(["--from", str(FIXTURE), "--store", str(kept),
                                  "--docs", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds more than a kept store (notes.txt)" in err
    assert (kept / "notes.txt").exists() and not (tmp_path / "other").exists()


def test_a_cell_run_again_is_pooled_with_its_kept_cycles_where_it_ran_the_same_bindings(tmp_path):
    """--pool: more cycles of a race add to its rate instead of replacing it; a cell run through
    other bindings replaces its kept one; a run kept already is not counted twice."""
    from rig.contract.rows import CycleRow, typed_row
    from rig.store import Store

    def store(name, *groups):
        rows = [typed_row(CycleRow, {"model": "m", "retain": "none", "restart": "none", "stop_strategy": "stop",
                                     "started_at": "2026-12-07T00:00:00+00:00", "schema_version": 19, **r})
                for r in _frame(*groups).to_dict("records")]
        s = Store(str(tmp_path / name))
        for run_id in sorted({r.run_id for r in rows}):
            s.write("cycles", [r for r in rows if r.run_id == run_id], "2.65.0", run_id, "2026-12-07")
        return tmp_path / name

    kept = tmp_path / "kept"
    first = store("a", _cycles("ensemble-in-flight", "2.65.0", "crashed", None, None, run_id="r1"),
                  _cycles("ensemble-in-flight", "2.65.0", "requests_lost", n=2, run_id="r1"),
                  _cycles("retained-array", "2.65.0", "exit_timeout", engine="tritonserver", run_id="r1",
                          bindings_own=False, tritonserver_version="2.71.0"))
    again = store("b", _cycles("ensemble-in-flight", "2.65.0", "requests_lost", n=3, run_id="r2"),
                  _cycles("retained-array", "2.65.0", "clean", n=2, engine="tritonserver", run_id="r2",
                          bindings_own=True, tritonserver_version="2.65.0"))
    conformance_page.keep_store(first, kept)
    assert conformance_page.keep_store(again, kept, add=True, pool=True)[0] == 3 + 3 + 2  # the official cell: replaced
    cells = {(c.scenario, c.engine): c for c in cf.cells(Store.open(str(kept)).read("cycles"))}
    assert cells[("ensemble-in-flight", "capi")].lifecycle == {"crashed": 1, "requests_lost": 5}
    assert cells[("retained-array", "tritonserver")].lifecycle == {"clean": 2}
    assert conformance_page.keep_store(again, kept, add=True, pool=True)[0] == 8  # the same run again: once
    conformance_page.keep_store(again, kept, add=True)  # --add alone: a cell run again replaces its kept one
    cells = {(c.scenario, c.engine): c for c in cf.cells(Store.open(str(kept)).read("cycles"))}
    assert cells[("ensemble-in-flight", "capi")].lifecycle == {"requests_lost": 3}


# --- the report's page in a real browser ----------------------------------------------------------

def _browser():
    from helpers import browser

    return browser(1600)


@pytest.mark.slow
def test_the_report_page_shows_the_grid_and_each_mark_leads_to_its_figures(capsys, tmp_path):
    page = tmp_path / "report.html"
    rc, md, err = _report(capsys, FIXTURE, "--out", page)
    assert rc == 0, err
    assert "## Conformance" in md
    drv = _browser()
    try:
        drv.get(page.resolve().as_uri())
        assert "Conformance" in [h.text for h in drv.find_elements("css selector", "h2")]
        grid = drv.find_element("css selector", ".conformance table.cf-grid")
        assert [th.text for th in grid.find_elements("css selector", "th")][:4] == ["scenario", "2.41.0", "2.48.0",
                                                                                   "2.51.0"]
        links = drv.find_elements("css selector", ".cf-grid a")
        # a link per cell run, and per core a "changed in" names (each to that core's cell)
        assert len(links) == 11
        changed = [a for a in links if a.find_element("xpath", "..").text.startswith("changed in")]
        assert [a.text for a in changed] == ["2.49.0…2.51.0 (not bisectable: 2.48.0 has no sources here)"]
        missing = drv.execute_script(
            "return [...document.querySelectorAll('.cf-grid a')].map(a => a.getAttribute('href').slice(1))"
            ".filter(id => !document.getElementById(id) || document.getElementById(id).tagName !== 'TR')")
        assert missing == []
        link = next(a for a in links if a.text == "held to exit_timeout · errors")
        target = link.get_attribute("href").split("#")[1]
        link.click()
        assert drv.execute_script("return location.hash") == f"#{target}"
        row = drv.find_element("css selector", ":target")
        assert row.get_attribute("id") == target and row.text.startswith("stub-exits, 2.51.0 1 exit_timeout 1 errors 1")
        assert drv.execute_script("const r = document.getElementById(arguments[0]).getBoundingClientRect();"
                                  "return r.top > -1 && r.top < window.innerHeight", target)  # scrolled to: within a subpixel
        # health is the cell's colour: a healthy cell's background is not an unhealthy one's
        colour = ("return getComputedStyle(document.querySelector(arguments[0])).backgroundColor")
        healthy, unhealthy = (drv.execute_script(colour, f".cf-grid td.cf-{h}") for h in ("healthy", "unhealthy"))
        assert healthy != unhealthy and "rgba(0, 0, 0, 0)" not in (healthy, unhealthy)
        assert drv.find_element("css selector", ".cf-grid th.cf-row").get_attribute("title")  # what it does
        errors = [e for e in drv.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
    finally:
        drv.quit()


@pytest.mark.slow  # a process of its own: the end-to-end tier
def test_rig_gate_fails_on_a_scenario_cell_that_differs_from_the_known_verdicts(tmp_path):
    """A candidate's scenario cell whose verdicts differ from those known for its scenario,
    shape, engine and core is a finding: `rig gate` fails on it and says which, in its output
    and as the JUnit case `conformance`; as known, that check passes."""
    from helpers import rig as run_rig

    from rig.scenarios import known

    store = tmp_path / "store"
    shutil.copytree(FIXTURE, store)
    table = dict(known.table())
    key = ("stub-exits", False, "unbatched", "capi", "2.51.0")
    path = tmp_path / "known.csv"
    known.write({**table, key: known.Known("exit_timeout", "timeouts", "ok", 3, "test")}, path)
    words = ["gate", str(store), "--baseline", "2.48.0", "--candidate", "2.51.0", "--junit", str(tmp_path / "g.xml")]
    moved = run_rig(*words, env={"RIG_KNOWN_VERDICTS": str(path)})
    assert moved.returncode == 1, moved.stderr
    assert ("FAIL: conformance: stub-exits, unbatched, capi, Triton 2.51.0: 1/1 cycle(s) differ from the known "
            "exit_timeout / timeouts / ok (got 1x exit_timeout / errors / not_measured)") in moved.stdout
    xml = (tmp_path / "g.xml").read_text()
    assert re.search(r'<testcase name="conformance" classname="gate"[^>]*>\s*<failure', xml)
    assert known.lookup(*key).verdicts == ("exit_timeout", "errors")  # the rig's own: as known
    same = run_rig(*words)
    assert "FAIL: conformance" not in same.stdout
    assert not re.search(r'<testcase name="conformance" classname="gate"[^>]*>\s*<failure',
                         (tmp_path / "g.xml").read_text())


def test_where_a_shape_moves_a_verdict_is_named_and_where_it_holds_too():
    def rows(shape, outcome, load="errors", version="2.51.0"):
        return [{"run_id": f"r-{shape}-{version}", "cycle": i, "scenario": "execute-raises", "control": False,
                 "shape": shape, "engine": "capi", "triton_version": version, "outcome": outcome,
                 "load_outcome": load, "growth_outcome": "ok"} for i in (1, 2, 3)]

    frame = pd.DataFrame(rows("unbatched", "exit_timeout") + rows("batched", "clean") + rows("instances-2", "exit_timeout")
                         + rows("unbatched", "clean", version="2.48.0"))
    moves = cfc.shape_moves(cf.cells(frame))
    assert len(moves) == 1  # 2.48.0 ran in its default shape only: nothing to compare
    (m,) = moves
    assert (m["default"], m["verdicts"], m["moved"], m["same"]) == (
        "unbatched", ("exit_timeout", "errors", "ok"), {"batched": ("clean", "errors", "ok")}, ["instances-2"])
    text = cft.shape_moves_markdown(cf.cells(frame))
    assert "| execute-raises | capi | 2.51.0 | unbatched: exit_timeout / errors / ok | batched: clean / errors / ok " \
           "| instances-2 |" in text and "Of 1 scenario cell(s)" in text


# --- health apart from agreement; aborts at exit; the footnoted core; a page's figures ----------------

def test_a_cell_is_healthy_unhealthy_or_intermittent_apart_from_its_judgement(tmp_path):
    known = _known(tmp_path, "execute-raises,0,unbatched,capi,2.51.0,exit_timeout|clean,errors,ok,3,m1",
                   "slows-down,1,unbatched,capi,2.51.0,clean,ok,ok|slowing,3,m1")
    frame = _frame(_cycles("retained-response", "2.51.0", "exit_timeout", n=3),
                   _cycles("finalize-raises", "2.51.0", control=True, growth="not_measured", n=3),
                   _cycles("leaks-memory", "2.51.0", growth="leaking"),
                   _cycles("stop-in-flight", "2.51.0", load="errors"),
                   # one cycle healthy of three: intermittent whatever is known
                   _cycles("bls-in-flight", "2.51.0", n=2), _cycles("bls-in-flight", "2.51.0", "requests_lost", run_id="r2"),
                   # known to go either way between two unhealthy verdicts: unhealthy, marked ~
                   _cycles("execute-raises", "2.51.0", "exit_timeout", "errors", n=3),
                   # known to go either way between a healthy and an unhealthy one: intermittent though all were healthy
                   _cycles("slows-down", "2.51.0", control=True, n=3))
    cells = {c.scenario: c for c in cf.cells(frame, known)}
    assert {name: cf.health(c) for name, c in cells.items()} == {
        "retained-response": cf.UNHEALTHY, "finalize-raises": cf.HEALTHY, "leaks-memory": cf.UNHEALTHY,
        "stop-in-flight": cf.UNHEALTHY, "bls-in-flight": cf.INTERMITTENT_HEALTH, "execute-raises": cf.UNHEALTHY,
        "slows-down": cf.INTERMITTENT_HEALTH}
    assert cft.mark(cells["execute-raises"]) == "🔴 held to exit_timeout · errors ~"
    assert cft.mark(cells["slows-down"]) == "🟡 clean ~"
    assert cft.mark(cells["bls-in-flight"]).startswith("🟡 clean 2/3")
    assert cft.mark(cells["leaks-memory"]) == "🔴 clean · leaking ?"  # nothing known for it here
    t = cf.build(frame, known)
    assert t.health_counts == {cf.HEALTHY: 1, cf.UNHEALTHY: 4, cf.INTERMITTENT_HEALTH: 2}
    assert cf.is_healthy(("clean", "ok", "not_measured")) and not cf.is_healthy(("clean", "not_measured", "ok"))


def test_an_abort_at_exit_is_a_verdict_of_its_own_and_shows_beside_another():
    """aborted_at_exit reads as a clean stop whose stub then aborted (unhealthy); a finalize that
    raised (or a stop that waited out exit_timeout) keeps its verdict, the abort written beside it,
    in the cell and in its figures; a store before stub_exit_aborts reads none."""
    assert "stub_exit_aborts" in cf.COLUMNS
    frame = _frame(_cycles("template", "2.70.0", "aborted_at_exit", n=3, stub_exit_aborts=1),
                   _cycles("finalize-raises", "2.70.0", "finalize_error", n=3, stub_exit_aborts=1),
                   _cycles("retained-response", "2.70.0", "exit_timeout", n=2, stub_exit_aborts=1),
                   _cycles("retained-response", "2.70.0", "exit_timeout", stub_exit_aborts=None, run_id="r2"),
                   _cycles("finalize-raises", "2.51.0", "finalize_error", n=3, stub_exit_aborts=float("nan")))
    cells = {(c.scenario, c.triton_version): c for c in cf.cells(frame)}
    template = cells["template", "2.70.0"]
    assert template.exit_aborts == 3 and cft.cell_text(template) == "clean stop, stub aborted at exit"
    assert cf.health(template) == cf.UNHEALTHY
    raised = cells["finalize-raises", "2.70.0"]
    assert raised.exit_aborts == 3 and cft.cell_text(raised) == "finalize raised · stub aborted at exit"
    held = cells["retained-response", "2.70.0"]
    assert held.exit_aborts == 2 and cft.cell_text(held) == "held to exit_timeout · stub aborted at exit 2/3"
    assert cells["finalize-raises", "2.51.0"].exit_aborts == 0
    assert cft.cell_text(cells["finalize-raises", "2.51.0"]) == "finalize raised"
    md = cft.to_markdown(cf.build(frame))
    assert "| finalize_error 3 (stub aborted at exit in 3) |" in md
    assert "| exit_timeout 3 (stub aborted at exit in 2) |" in md
    assert "| aborted_at_exit 3 |" in md  # the verdict says it: nothing beside
    assert cf.cells(_frame(_cycles("template", "2.70.0", "aborted_at_exit")))[0].exit_aborts == 0  # no column


def test_verdicts_in_words_with_alternatives():
    assert cft.verdict_words("exit_timeout", "errors", "ok") == "held to exit_timeout · errors"
    assert cft.verdict_words("exit_timeout|clean", "ok", "ok|not_measured") == "held to exit_timeout or clean"
    assert cft.verdict_words("crashed|clean", "not_measured|ok", "slowing") == \
        "worker crashed or clean · no load or ok · slowing"
    assert cft.verdict_words("something_new", "ok", None) == "something_new"  # a verdict with no words yet


def test_a_core_not_exactly_its_release_is_footnoted_in_its_column():
    from rig.runtimes.from_source.releases import NOT_EXACT

    assert cf.not_exact("2.71.0") == NOT_EXACT["2.71.0"] and cf.not_exact("2.70.0") is None
    t = cf.build(_frame(_cycles("finalize-raises", "2.70.0", "finalize_error"),
                        _cycles("finalize-raises", "2.71.0", "finalize_error")))
    md = cft.to_markdown(t)
    assert "| scenario | 2.70.0 | 2.71.0³ | changed in |" in md
    assert f"³ 2.71.0: {NOT_EXACT['2.71.0']}." in md
    assert f'<th title="{NOT_EXACT["2.71.0"]}">2.71.0³</th>'.replace("'", "&#x27;") in cfh.to_html(t)
    exact = cft.to_markdown(cf.build(_frame(_cycles("finalize-raises", "2.70.0", "finalize_error"))))
    assert "| scenario | 2.70.0 | changed in |" in exact and "³ 2.70.0" not in exact


def test_a_page_gives_consecutive_cores_alike_one_figures_row_and_every_cell_its_id(tmp_path):
    frame = _frame(*(_cycles("retained-response", v, "exit_timeout", stop=5.0 + i / 1000, run_id=f"r{v}")
                     for i, v in enumerate(["2.48.0", "2.49.0", "2.50.0"])),
                   _cycles("retained-response", "2.51.0", "clean", run_id="r4"),
                   _cycles("retained-response", "2.55.0", "exit_timeout", run_id="r5"))
    (g,) = cf.build(frame, _known(tmp_path)).grids
    page = cft.grid_page(g, "../conformance.md#legend")
    assert ('| <a id="retained-response-2-48-0"></a><a id="retained-response-2-49-0"></a>'
            '<a id="retained-response-2-50-0"></a>retained-response, 2.48.0 to 2.50.0 | '
            '1x exit_timeout / ok / ok | ? nothing known | 5.000–5.002 | 1/1 |') in page
    assert '<a id="retained-response-2-55-0"></a>retained-response, 2.55.0 | 1x exit_timeout' in page  # not after 2.51.0's
    assert "[🔴 held to exit_timeout ?](#retained-response-2-49-0)" in page
    assert "| cell | cycles gave | known | stop p50 s | finalize before stop |" in page and "r2.48.0" not in page
    assert '<a id="cf-what-retained-response"></a>retained-response | the client keeps the last response' in page
    assert page.startswith(cft.key_line("../conformance.md#legend"))


def test_a_change_is_named_by_the_bisection_of_a_cell_it_moved_alike_or_as_a_change_of_bindings():
    """Every "changed in" names its cause: the commit a bisection of another cell found where this
    cell's verdicts moved the same way between the same two cores; the official API's bindings
    where they changed with the core; nothing where the move differs."""
    frame = _frame(_cycles("template", "2.67.0", "clean"), _cycles("template", "2.68.0", "aborted_at_exit"),
                   _cycles("stop-in-flight", "2.67.0", "clean"), _cycles("stop-in-flight", "2.68.0", "aborted_at_exit"),
                   _cycles("reload", "2.67.0", "clean"), _cycles("reload", "2.68.0", "crashed", None, None),
                   _cycles("retained-response", "2.50.0", "exit_timeout", engine="tritonserver"),
                   _cycles("retained-response", "2.51.0", "clean", engine="tritonserver", bindings_own=True,
                           tritonserver_version="2.51.0"))
    bisects = ({"scenario": "template", "control": False, "shape": float("nan"), "engine": "capi", "good": "2.67.0",
                "bad": "2.68.0", "component": "python_backend", "commit": "47f9e030ea1e",
                "subject": "fix: Use Correct ptr Type to Avoid UAF (#433)"},)
    changes = cfc.changed_in(cf.cells(frame), bisects)
    assert changes[("template", False, "capi", "unbatched")] == ["2.68.0: python_backend 47f9e03 (#433)"]
    assert changes[("stop-in-flight", False, "capi", "unbatched")] == [
        "2.68.0: python_backend 47f9e03 (#433) (as bisected on template (unbatched, capi))"]
    assert changes[("reload", False, "capi", "unbatched")] == ["2.68.0"]  # another move: not that commit's
    # 2.50.0 ran PyPI's bindings over its core (a wheel's: not recorded, the rule says), 2.51.0 its own
    assert changes[("retained-response", False, "tritonserver", "unbatched")] == [
        "2.51.0: bindings PyPI's → 2.51.0 (own)"]


def test_a_bisection_names_the_commit_and_a_variant_is_no_release_but_says_what_it_does():
    frame = _frame(_cycles("template", "2.66.0", "clean"), _cycles("template", "2.67.0", "clean"),
                   _cycles("template", "2.68.0", "aborted_at_exit"),
                   _cycles("template", "2.68.0-va606228022", "clean"),  # a patch that undoes 2.68.0's change
                   _cycles("template", "2.67.0-vf251446c74", "aborted_at_exit"),  # a hybrid that brings it
                   _cycles("template", "2.69.0", "aborted_at_exit"))
    bisects = ({"scenario": "template", "control": False, "shape": float("nan"), "engine": "capi", "good": "2.67.0",
                "bad": "2.68.0", "component": "python_backend", "commit": "47f9e030ea1e",
                "subject": "fix: Use Correct ptr Type to Avoid UAF (#433)"},)
    changes = cfc.changed_in(cf.cells(frame), bisects)[("template", False, "capi", "unbatched")]
    # the variants are no releases: the series is 2.66.0, 2.67.0, 2.68.0, 2.69.0, dated by the bisection
    assert changes == ["2.68.0: python_backend 47f9e03 (#433)", "changed by 2.67.0-vf251446c74",
                       "fixed by 2.68.0-va606228022"]
    assert cfc.changed_in(cf.cells(frame))[("template", False, "capi", "unbatched")][0] == "2.68.0"
    # a bisection of another cell, or of releases that do not span the change, names nothing
    assert cfc.bisected(bisects, "template", True, "capi", "unbatched", "2.67.0", "2.68.0") == []
    assert cfc.bisected(bisects, "template", False, "capi", "unbatched", "2.68.0", "2.69.0") == []
    md = cft.to_markdown(cf.build(frame, bisects=bisects))
    assert "changed in [2.68.0: python_backend 47f9e03 (#433)](#" in md and "fixed by 2.68.0-va606228022](#" in md


def test_an_official_grid_says_which_bindings_each_column_ran():
    frame = _frame(_cycles("retained-response", "2.50.0", "exit_timeout", engine="tritonserver"),
                   _cycles("retained-response", "2.51.0", engine="tritonserver", bindings_own=True,
                           tritonserver_version="2.51.0"),
                   _cycles("retained-response", "2.55.0", "exit_timeout", engine="tritonserver", bindings_own=True,
                           tritonserver_version="2.55.0"),
                   _cycles("retained-response", "2.55.0", "exit_timeout"))
    grids = {g.engine: g for g in cf.build(frame).grids}
    assert cft.footnotes(grids["tritonserver"])[-1] == (
        "bindings: 2.50.0 PyPI's over the wheel's core (assumed: those runs do not record them); 2.51.0 to 2.55.0 "
        "each release's own.")
    assert not any(n.startswith("bindings") for n in cft.footnotes(grids["capi"]))
