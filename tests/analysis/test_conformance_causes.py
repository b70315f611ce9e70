"""The upgrade question grouped by cause (rig.analysis.conformance.causes): one line a cause (the
window, the commit a bisection of any of its cells named, the move, its cells per API and shape), a
change of the official API's bindings said as such, rates tested (rig.analysis.conformance.rates:
Fisher's exact test, α = 0.05; the cycles more a side that would tell), and the Markdown, the HTML
and the JSON summary saying the same; over small cycles frames and the kept store."""

from __future__ import annotations

import html
import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT

from rig.analysis.conformance import causes as cc
from rig.analysis.conformance import changes as cfc
from rig.analysis.conformance import diff as cd
from rig.analysis.conformance import diff_text as cdt
from rig.analysis.conformance import table as cf
from rig.analysis.conformance.bindings import bindings_of, join_runs
from rig.analysis.conformance.rates import ALPHA, fisher_exact, more_cycles, rate_move

STORE = ROOT / "docs" / "conformance" / "store"
KNOWN_HEAD = "scenario,control,shape,engine,triton_version,lifecycle,load,growth,cycles,run_id\n"
UAF = "fix: Use Correct ptr Type to Avoid UAF (#433)"


def _cycles(scenario: str, version: str, outcomes=("clean",) * 3, control: bool = False, engine: str = "capi",
            shape: str = "unbatched", **extra) -> list[dict]:
    run = f"r-{scenario}-{int(control)}-{engine}-{shape}-{version}"
    return [{"run_id": run, "cycle": i + 1, "scenario": scenario, "control": control, "shape": shape,
             "engine": engine, "triton_version": version, "outcome": o, "load_outcome": "ok", "growth_outcome": "ok",
             "stop_latency_s": 2.0, "finalize_expected": 1, "finalize_before_stop": 1, "finalize_after_stop": 0,
             **extra} for i, o in enumerate(outcomes)]


def _table(tmp_path: Path, *groups: list[dict], known: tuple[str, ...] = (), bisects=()) -> cf.Conformance:
    path = tmp_path / "known.csv"
    path.write_text(KNOWN_HEAD + "".join(r + "\n" for r in known))
    return cf.build(pd.DataFrame([r for g in groups for r in g]), known_path=path, bisects=bisects)


def _bisect(scenario: str, good: str, bad: str, component: str = "python_backend", commit: str = "47f9e030ea1ef6d3",
            subject: str = UAF, run_id: str = "b1", shape=float("nan"), engine: str = "capi", **extra) -> dict:
    return {"run_id": run_id, "kind": "result", "judged": "bad", "scenario": scenario, "control": False,
            "shape": shape, "engine": engine, "good": good, "bad": bad, "component": component, "commit": commit,
            "subject": subject, **extra}


ABORT = ("aborted_at_exit",) * 3


# --- rates ------------------------------------------------------------------------------------------------

def test_fisher_exact_is_scipys_and_three_cycles_a_side_never_tell():
    assert fisher_exact(1, 3, 3, 3) == pytest.approx(0.4)
    assert fisher_exact(0, 3, 3, 3) == pytest.approx(0.1)  # the best 3+3 can do: never below 0.05
    assert fisher_exact(0, 9, 9, 9) < 1e-4
    assert fisher_exact(0, 0, 2, 3) == 1.0
    stats = pytest.importorskip("scipy.stats")
    for an, bn in itertools.product(range(1, 7), repeat=2):
        for ak, bk in itertools.product(range(an + 1), range(bn + 1)):
            want = stats.fisher_exact([[ak, an - ak], [bk, bn - bk]])[1]
            assert fisher_exact(ak, an, bk, bn) == pytest.approx(want, rel=1e-9, abs=1e-12), (ak, an, bk, bn)


def test_the_cycles_more_a_side_that_would_tell_a_rate_within_a_budget():
    assert ALPHA == 0.05
    assert more_cycles(1, 3, 3, 3) == 4  # 1/3 against 3/3: 7 a side (2/7 against 7/7) tells
    assert fisher_exact(2, 7, 7, 7) < ALPHA <= fisher_exact(2, 6, 6, 6)
    assert more_cycles(0, 9, 9, 9) == 0  # already told
    assert more_cycles(1, 3, 2, 6) is None  # the same rate: no number of cycles tells
    assert more_cycles(1, 3, 2, 3, budget=10) is None  # 1/3 against 2/3 needs more than 10 a side
    assert more_cycles(1, 3, 2, 3, budget=60) is not None


def test_a_rate_move_names_the_verdict_that_rose():
    r = rate_move({"requests_lost": 2, "crashed": 1}, {"crashed": 3})
    assert (r.verdict, r.before, r.after, r.significant, r.more) == ("crashed", (1, 3), (3, 3), False, 4)
    assert r.text() == "rate of crashed 1/3 → 3/3"
    assert r.judged() == ("not significant at n=3+3 (p = 0.4); more cycles needed: 4 more a side would tell at "
                          "α = 0.05")
    assert rate_move({"clean": 2, "exit_timeout": 1}, {"clean": 4, "exit_timeout": 2}) is None  # the same shares
    assert rate_move({"clean": 9}, {"exit_timeout": 9}).judged().startswith("significant (Fisher's exact p = ")


# --- bisections --------------------------------------------------------------------------------------------

def test_a_bisection_may_name_several_commits_for_one_window():
    one = [_bisect("template", "2.67.0", "2.68.0")]
    (c,) = cfc.bisected(one, "template", False, "capi", "unbatched", "2.67.0", "2.68.0")
    assert str(c) == "python_backend 47f9e03 (#433)" and c.does is None
    two = [_bisect("template", "2.67.0", "2.68.0", "core", "aaaaaaa1", "fix: A (#1)", effect="crash gone"),
           _bisect("template", "2.67.0", "2.68.0", effect="abort at exit")]
    commits = cfc.bisected(two, "template", False, "capi", "unbatched", "2.67.0", "2.68.0")
    assert [(c.component, c.does) for c in commits] == [("core", "crash gone"), ("python_backend", "abort at exit")]
    assert cfc.commits_text(commits) == ("two changes: core aaaaaaa (#1) (crash gone), python_backend 47f9e03 (#433) "
                                         "(abort at exit)")
    joint = [_bisect("template", "2.67.0", "2.68.0", "core", "aaaaaaa1", "fix: A (#1)"), one[0]]
    assert cfc.commits_text(cfc.bisected(joint, "template", False, "capi", "unbatched", "2.67.0", "2.68.0")) == \
        "needs core aaaaaaa (#1) and python_backend 47f9e03 (#433)"
    # of two bisections that span the window, the narrower names it
    wide = [_bisect("template", "2.63.0", "2.68.0", "core", "bbbbbbb", run_id="wide"), one[0]]
    assert cfc.bisection(wide, "template", False, "capi", "unbatched", "2.67.0", "2.68.0").run_id == "b1"
    # the grid's "changed in" says several too
    frame = pd.DataFrame(_cycles("template", "2.67.0") + _cycles("template", "2.68.0", ABORT))
    assert cfc.changed_in(cf.cells(frame), two)[("template", False, "capi", "unbatched")] == [
        "2.68.0: two changes: core aaaaaaa (#1) (crash gone), python_backend 47f9e03 (#433) (abort at exit)"]


# --- causes ------------------------------------------------------------------------------------------------

def test_a_bisection_of_one_cell_names_the_commit_for_every_cell_of_its_cause(tmp_path):
    table = _table(
        tmp_path,
        *(_cycles(s, v, ABORT if v == "2.68.0" else ("clean",) * 3, engine=e, shape=sh)
          for s in ("template", "reload") for v in ("2.67.0", "2.68.0") for e in ("capi", "tritonserver")
          for sh in ("unbatched", "batched")),
        # another move in the same window: a cause of its own, not bisected
        _cycles("stub-exits", "2.67.0", ("crashed",) * 3), _cycles("stub-exits", "2.68.0", ABORT),
        bisects=[_bisect("template", "2.67.0", "2.68.0")])
    u = cd.upgrade(table, "2.67.0", "2.68.0", results="R")
    first, second = u.causes
    assert cc.headline(u.causes, u.differing, u.source, u.target) == "from 2.67.0 to 2.68.0: 2 causes explain 9 cells"
    assert cc.cause_line(first) == (
        "2.68.0: python_backend 47f9e03 (#433) (bisected on template (unbatched, capi)): lifecycle clean → "
        "aborted_at_exit, 8 cells (capi: unbatched 2, batched 2; tritonserver: unbatched 2, batched 2)")
    assert cc.cause_line(second) == (
        "2.68.0: lifecycle crashed → aborted_at_exit, 1 cell (capi: unbatched 1); not bisected yet: `rig bisect "
        "--scenario stub-exits --shape unbatched --engine capi --good 2.67.0 --bad 2.68.0`")
    # a bisection that names the same commit for the second move makes them one cause
    table = _table(
        tmp_path, _cycles("template", "2.67.0"), _cycles("template", "2.68.0", ABORT),
        _cycles("stub-exits", "2.67.0", ("crashed",) * 3), _cycles("stub-exits", "2.68.0", ABORT),
        bisects=[_bisect("template", "2.67.0", "2.68.0"), _bisect("stub-exits", "2.67.0", "2.68.0", run_id="b2")])
    (one,) = cd.upgrade(table, "2.67.0", "2.68.0").causes
    assert cc.what(one) == "lifecycle clean → aborted_at_exit (1); lifecycle crashed → aborted_at_exit (1)"


def test_a_cell_that_changed_twice_is_under_each_cause_and_a_window_before_the_sources_says_why(tmp_path):
    table = _table(tmp_path, _cycles("stub-exits", "2.46.0"), _cycles("stub-exits", "2.47.0", ("crashed",) * 3),
                   _cycles("stub-exits", "2.48.0", ("crashed",) * 3), _cycles("stub-exits", "2.52.0", ABORT))
    u = cd.upgrade(table, "2.46.0", "2.52.0", results="R")
    first, second = u.causes
    assert cc.cause_line(first) == ("2.47.0: lifecycle clean → crashed, 1 cell (capi: unbatched 1); not bisected: "
                                    "2.46.0 predates the sources here (r24.10 on)")
    assert second.window == "between 2.48.0 and 2.52.0 (2.49.0, 2.50.0, 2.51.0 not run)"
    assert second.not_bisected.startswith("not bisected: 2.48.0 predates the sources here")
    assert cc.headline(u.causes, u.differing, u.source, u.target) == (
        "from 2.46.0 to 2.52.0: 2 causes explain 1 cell (1 changed more than once: each is under each of its causes)")
    md = cdt.to_markdown(u)
    assert ("| capi | unbatched | stub-exits | clean / ok / ok (3/3) | aborted_at_exit / ok / ok (3/3) | 2.46.0: clean "
            "/ ok / ok (3/3) → 2.47.0: crashed / ok / ok (3/3) | cause 2 (between 2.48.0 and 2.52.0 (2.49.0, 2.50.0, "
            "2.51.0 not run)) |") in md


def test_a_step_with_a_change_of_bindings_is_the_bindings_never_triton(tmp_path):
    et = ("exit_timeout",) * 3
    groups = [_cycles("retained-response", "2.51.0", et, engine=e) for e in ("capi", "tritonserver")]
    groups += [_cycles("retained-response", "2.52.0", et, engine="capi"),
               _cycles("retained-response", "2.52.0", engine="tritonserver")]
    u = cd.upgrade(_table(tmp_path, *groups), "2.51.0", "2.52.0")
    (cause,) = u.causes
    assert cause.kind == cc.BINDINGS and not cause.not_bisected
    assert cc.cause_line(cause) == (
        "2.52.0: bindings PyPI's → 2.52.0 (own) (assumed: the cycles do not record them), a change of bindings, not "
        "of Triton: lifecycle exit_timeout → clean, 1 cell (tritonserver: unbatched 1)")
    # recorded: the bindings' version (a run's tritonserver_version joined in), or whether they are the core's own
    runs = pd.DataFrame({"run_id": ["r-retained-response-0-tritonserver-unbatched-2.51.0",
                                    "r-retained-response-0-tritonserver-unbatched-2.52.0"],
                         "tritonserver_version": ["2.71.0", "2.52.0"]})
    frame = join_runs(pd.DataFrame([r for g in groups for r in g]), runs)
    (cause,) = cd.upgrade(cf.build(frame, known_path=tmp_path / "known.csv"), "2.51.0", "2.52.0").causes
    assert cause.bindings == "bindings 2.71.0 → 2.52.0 (own)"
    own = [_cycles("retained-response", "2.51.0", et, engine="tritonserver", bindings_own=True),
           _cycles("retained-response", "2.52.0", engine="tritonserver", bindings_own=True)]
    (cause,) = cd.upgrade(_table(tmp_path, *own), "2.51.0", "2.52.0").causes
    assert cause.kind == cc.VERDICTS and cause.not_bisected.startswith("not bisected yet")  # 2.51.0's own: Triton's
    (c,) = cf.cells(pd.DataFrame(own[0]))
    assert bindings_of(c).own and bindings_of(cf.cells(pd.DataFrame(groups[0]))[0]) is None  # capi has none


def test_a_significant_change_of_rate_in_a_known_race_is_a_cause_and_a_small_one_is_listed_apart(tmp_path):
    race = "clean|exit_timeout"
    known = tuple(f"execute-raises,0,unbatched,capi,{v},{race},ok,ok,9,r" for v in ("2.60.0", "2.61.0", "2.62.0"))
    table = _table(tmp_path, _cycles("execute-raises", "2.60.0", ("clean",) * 9),
                   _cycles("execute-raises", "2.61.0", ("exit_timeout",) * 9),
                   _cycles("execute-raises", "2.62.0", ("exit_timeout",) * 8 + ("clean",)), known=known)
    u = cd.upgrade(table, "2.60.0", "2.62.0")
    assert u.apis[0].rows == ()  # the verdicts: within the race on both cores
    (cause,) = u.causes
    assert cause.kind == cc.RATE and cause.rate.significant
    assert cc.cause_line(cause).startswith("2.61.0: rate of exit_timeout 0/9 → 9/9, significant (Fisher's exact p = ")
    (small,) = u.unsettled
    assert small.rate.text() == "rate of clean 0/9 → 1/9" and not small.rate.significant
    assert cc.headline(u.causes, u.differing, u.source, u.target) == (
        "from 2.60.0 to 2.62.0: no cell's verdicts differ; 1 change of rate (Fisher's exact test, α = 0.05)")
    md = cdt.to_markdown(u)
    assert "## Rates that moved, not significant at α = 0.05" in md
    assert ("| capi | unbatched | execute-raises | 2.61.0 and 2.62.0 | rate of clean 0/9 → 1/9 | not significant at "
            "n=9+9 (p = 1); more cycles needed") in md


# --- the three renderings agree ------------------------------------------------------------------------------

def _agree(u: cd.Upgrade) -> dict:
    md, page, summary = cdt.to_markdown(u), cdt.to_html(u), cdt.to_summary(u)
    json.dumps(summary)  # JSON-ready
    assert summary["headline"] == cdt.what_changed(u)[0]
    assert [c["line"] for c in summary["causes"]] == [cc.cause_line(c) for c in u.causes]
    for i, c in enumerate(summary["causes"], 1):
        assert f"\n{i}. {c['line']}\n" in md
        assert f"<li>{html.escape(c['line']).replace('`', '')}" in page.replace("<code>", "").replace("</code>", "")
        assert c["cells"] == sum(n for shapes in c["by_api"].values() for n in shapes.values()) == len(c["steps"])
    assert len(summary["unsettled_rates"]) == len(u.unsettled)
    return summary


@pytest.fixture(scope="module")
def kept() -> cf.Conformance:
    from rig.store import Store

    store = Store.open(STORE)
    return cf.build(store.read("cycles", columns=cf.COLUMNS), bisects=cfc.decided_bisects(store.read("bisect")))


def test_the_kept_store_from_2_67_to_2_70_opens_with_its_causes(kept):
    u = cd.upgrade(kept, "2.67.0", "2.70.0", results="docs/conformance/store")
    summary = _agree(u)
    first = u.causes[0]
    assert first.bisection is not None and first.bisection.cell == "template (unbatched, capi)"
    assert cc.cause_line(first).startswith(
        "2.68.0: python_backend 47f9e03 (#433) (bisected on template (unbatched, capi)): lifecycle clean → "
        "aborted_at_exit, ")
    assert set(first.by_api) == {"capi", "tritonserver"} and first.cells > u.differing / 2
    # every cell that differs is under a cause, each cause in the one window the C API now dates
    assert {s.key for c in u.causes for s in c.steps} == {r.key for a in u.apis for r in a.rows}
    assert {c.window for c in u.causes} == {"2.68.0"}
    assert summary["causes"][0]["commits"][0]["commit"].startswith("47f9e03")
    assert summary["causes"][0]["bisected_on"]["run_id"] == "bf5305317799"  # the narrower of the two
    md = cdt.to_markdown(u)
    assert md.index("## What changed") < md.index("## 1. 2.68.0: python_backend 47f9e03 (#433)") < \
        md.index("## C API (`capi`)")


def test_the_kept_store_reads_the_ensembles_crash_once_more_cycles_settled_it(kept):
    """2.65.0 crashed in 1 of 3 cycles and 2.66.0 in 3 of 3: a change of rate too small to tell
    (Fisher: p = 0.4). Run again with 12 cycles a side (rig matrix --cycles 12, kept), 2.65.0 lost
    requests in 12 of 12 and 2.66.0 crashed in 12 of 12: a change of verdict, a cause of its own."""
    u = cd.upgrade(kept, "2.60.0", "2.71.0", engine=["capi"], shape=["unbatched"], scenario=["ensemble-in-flight"])
    _agree(u)
    crash, control, abort = u.causes
    assert (crash.window, cc.what(crash)) == ("2.66.0", "lifecycle requests_lost → crashed, load ok → not_measured")
    (step,) = crash.steps
    assert (step.last.lifecycle, step.changed.lifecycle) == ({"requests_lost": 12}, {"crashed": 12})
    assert abort.window == control.window == "2.68.0" and not abort.not_bisected
    # bisected (the kept store's bisect table): two changes in one release, each with its commit
    assert cc.who(abort).startswith("two changes: core a02b0c0 (#482) (crashed / not_measured -> clean / ok), "
                                    "python_backend 47f9e03 (#433) (clean / ok -> aborted_at_exit / ok)")
    # the control's move is the template's, bisected: the question narrowed away from it, the commit still named
    assert control.bisection is not None and cc.who(control) == ("python_backend 47f9e03 (#433) (bisected on "
                                                                 "template (unbatched, capi))")
    md = cdt.to_markdown(u)
    assert "requests_lost / ok / not_measured (12/12)" in md and "crashed / not_measured / not_measured (12/12)" in md


def test_the_cycles_a_cell_needs_read_off_its_cells():
    from types import SimpleNamespace

    from rig.analysis.conformance.rates import cycles_needed

    def cell(**lifecycle):
        return SimpleNamespace(lifecycle=lifecycle)

    assert cycles_needed(cell(requests_lost=2, crashed=1), cell(crashed=3)) == 4
    assert cycles_needed(cell(clean=3), cell(clean=6)) is None
    assert cycles_needed(cell(clean=9), cell(exit_timeout=9)) == 0


def test_a_span_says_why_a_release_in_it_cannot_be_run_here():
    from rig.analysis.release_order import not_run_text

    # 2.40.0: no nvidia-pytriton wheel bundles it, and the sources here start at r24.10
    assert not_run_text(["2.40.0"]).startswith("2.40.0 not run: no nvidia-pytriton wheel bundles its core")
    # a release that could be built or installed here is only said not run
    assert not_run_text(["2.56.0", "2.57.0"]) == "2.56.0, 2.57.0 not run"
    assert not_run_text(["2.48.0"]) == "2.48.0 not run"


def test_a_majority_that_drifted_within_one_known_race_says_no_bisection_would_find_it(tmp_path):
    """dlpack-versioned through the C API: clean|exit_timeout on 2.51.0; exit_timeout|aborted_at_exit on
    2.70.0 and aborted_at_exit|exit_timeout on 2.71.0: the step to 2.71.0 is the race's draw, and the
    command it offers is more cycles, not a bisection that would find nothing."""
    race = ("dlpack-versioned,0,unbatched,capi,2.51.0,clean|exit_timeout,ok,ok,6,m",
            "dlpack-versioned,0,unbatched,capi,2.70.0,exit_timeout|aborted_at_exit,ok,ok,6,m",
            "dlpack-versioned,0,unbatched,capi,2.71.0,aborted_at_exit|exit_timeout,ok,ok,6,m")
    table = _table(tmp_path, _cycles("dlpack-versioned", "2.51.0", ("clean", "clean", "exit_timeout")),
                   _cycles("dlpack-versioned", "2.70.0", ("exit_timeout", "exit_timeout", "aborted_at_exit")),
                   _cycles("dlpack-versioned", "2.71.0", ("aborted_at_exit", "aborted_at_exit", "exit_timeout")),
                   known=race)
    (cause,) = cd.upgrade(table, "2.51.0", "2.71.0").causes
    assert cause.window == "2.71.0" or cause.changed == "2.71.0"
    assert cause.not_bisected.startswith("not bisected: a race's draw, 2.70.0 and 2.71.0 give verdicts within one")
    assert "rig matrix --scenarios dlpack-versioned --shapes unbatched --engines capi --runtimes 2.70.0,2.71.0 " \
           "--race-cycles 12" in cause.not_bisected
