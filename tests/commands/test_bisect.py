"""`rig bisect`'s pure parts: a bisection's id (what it resumes under), how a step is judged against
the two releases' verdicts, and the commits it walks (from the git bundles). A whole bisection
builds several cores: measured by hand (docs/measurements/builds.md), not in CI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import ROOT
from rig.workflows.bisect import BisectSpec, Bisection

BUNDLES = Path(os.environ.get("RIG_TRITON_SOURCES") or ROOT.parent / "shared" / "triton-src")


def _spec(**kw) -> BisectSpec:
    return BisectSpec(**{"scenario": "baseline", "control": False, "shape": None, "engine": "capi",
                         "good": "2.67.0", "bad": "2.68.0", **kw})


def test_the_same_cell_and_releases_resume_under_the_same_id():
    assert _spec().id == _spec(cycles=9, results="elsewhere").id  # how many cycles, where: not what
    assert len({_spec().id, _spec(control=True).id, _spec(bad="2.69.0").id, _spec(engine="tritonserver").id}) == 4


def test_a_step_is_judged_by_the_verdicts_only_one_side_gives(tmp_path):
    b = Bisection(_spec(results=str(tmp_path)), out=lambda line: None)
    b.good_set, b.bad_set = {"clean"}, {"aborted_at_exit"}
    assert b._judge({"aborted_at_exit": 3}) == "bad" and b._judge({"clean": 3}) == "good"
    assert b._judge({"clean": 2, "aborted_at_exit": 1}) == "mixed"
    assert b._judge({"crashed": 3}) == "mixed"  # neither side's: never taken for either
    # a race: run again, the side with twice the other's own verdicts wins
    assert b._judge({"clean": 2, "aborted_at_exit": 7}, race=True) == "bad"
    assert b._judge({"clean": 5, "aborted_at_exit": 4}, race=True) == "mixed"
    # an intermittent good release (exit_timeout|clean) against a bad that aborts
    b.good_set, b.bad_set = {"clean", "exit_timeout"}, {"aborted_at_exit", "exit_timeout"}
    assert b._judge({"exit_timeout": 3}) == "mixed" and b._judge({"exit_timeout": 2, "clean": 1}) == "good"


@pytest.mark.skipif(not (BUNDLES / "python_backend.bundle").exists(), reason=f"no git bundles at {BUNDLES}")
def test_the_commits_walked_are_the_bad_releases_first_parents_not_the_goods(tmp_path):
    from rig.runtimes.from_source.sources import Sources, first_parent

    s = Sources(str(BUNDLES))
    mirror = s.mirror("core", tmp_path, lambda line: None)
    good, bad = s.resolve("core", "r26.03", mirror), s.resolve("core", "r26.04", mirror)
    commits = first_parent(mirror, good, bad)
    assert commits and commits[-1][0] == bad  # oldest first, the bad release's own commit last
    assert all(len(c) == 40 and subject for c, subject in commits)
    assert any("(#473)" in subject for _, subject in commits)  # core#473, dated 2.68.0 in the table
    assert first_parent(mirror, bad, bad) == []


def test_the_releases_between_are_the_ones_built_here_oldest_first():
    from rig.workflows.bisect_span import releases_between

    assert releases_between("2.57.0", "2.62.0") == ["2.58.0", "2.59.0", "2.59.1", "2.60.0", "2.61.0"]
    assert releases_between("2.67.0", "2.68.0") == []


def test_the_releases_between_are_bisected_down_to_two_neighbours_a_release_not_judged_skipped():
    from rig.workflows.bisect_span import narrow

    inner = ["2.58.0", "2.59.0", "2.59.1", "2.60.0", "2.61.0"]
    asked: list[str] = []

    def changed_in_260(v, broken=()):
        asked.append(v)
        return "failed" if v in broken else ("bad" if v >= "2.60.0" else "good")

    assert narrow(inner, changed_in_260) == ("2.59.1", "2.60.0", [])
    assert len(asked) == 3  # log2 of 6 spans, not every release
    assert narrow(inner, lambda v: changed_in_260(v, broken={"2.59.1"})) == ("2.59.0", "2.60.0", ["2.59.1"])
    assert narrow(inner, lambda v: "bad") == (None, "2.58.0", [])  # changed in the first: the good release is base
    assert narrow(inner, lambda v: "good") == ("2.61.0", None, [])
    assert narrow([], lambda v: "bad") == (None, None, [])


def test_a_bisection_through_the_official_api_where_its_bindings_do_not_load_is_one_line(tmp_path, capsys):
    """Refused before anything is built, saying what to do instead, not after minutes of building
    stubs for an engine that cannot start here."""
    import importlib.util

    from rig import cli

    if importlib.util.find_spec("tritonserver") is not None:
        pytest.skip("the tritonserver bindings are installed here: the bisection would run")
    code = cli.main(["bisect", "--scenario", "retained-response", "--engine", "tritonserver", "--good", "2.54.0",
                     "--bad", "2.55.0", "--results", str(tmp_path / "R")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bindings do not load here" in err[0] and "--engine capi" in err[0]
    assert not (tmp_path / "R").exists()
    assert "--runner" in err[0]


def test_a_runner_that_cannot_run_the_cell_is_one_line_before_anything_is_built(tmp_path, capsys):
    from rig import cli

    code = cli.main(["bisect", "--scenario", "retained-response", "--engine", "tritonserver", "--good", "2.54.0",
                     "--bad", "2.55.0", "--runner", "false", "--results", str(tmp_path / "R")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--runner 'false' cannot run the cell" in err[0]
    assert not (tmp_path / "R").exists()


@pytest.mark.slow
def test_a_steps_cell_runs_through_the_runner_and_is_read_back_from_the_store(tmp_path, monkeypatch):
    """The path a bisection through the sandbox takes (`rig cell` through the runner, its cycles read
    back by the run id named here), with a runner that runs it on this machine: a real core, a real
    stub, the template's cell through the C API on the embedded default."""
    import sys

    from rig.parent import runtime

    monkeypatch.chdir(tmp_path)
    runner = f"env PATH={Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    spec = _spec(scenario="template", runner=runner, results="R")  # relative: the runner is given it whole
    b = Bisection(spec, out=lambda _line: None)
    raw, run_id = b._cell(runtime.resolve(None).name, 2)
    assert len(raw) == 2 and all(r[0] == "clean" and r[1] == "ok" for r in raw), raw
    assert (tmp_path / "R").is_dir() and run_id
    kept = json.loads(next(b.work.glob("cell-*.json")).read_text())
    assert str(tmp_path / "R") in kept["results"]  # the path the runner sees as this process does
