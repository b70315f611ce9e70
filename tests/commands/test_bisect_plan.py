"""`rig bisect`'s decisions as pure functions: a cycle's signature (the parts the conformance table
tells apart), a step's reading between two sides, the window it refuses, and the plan (given the
hybrids' signatures: one component, two together, or several changes in turn). And the whole walk
over a fake world of commits (no build, no Triton): its result rows and its resume."""

from __future__ import annotations

import json

import pytest

from rig.workflows import bisect_judge as J
from rig.workflows.bisect_plan import Seen, plan

READY, NOT_READY = "server ready, model ready", "server ready, model not ready"


def test_a_cycle_is_judged_by_its_lifecycle_its_load_where_the_releases_differ_and_its_probed_readiness():
    good = [["crashed", "not_measured", None]] * 3
    bad = [["aborted_at_exit", "ok", None]] * 3
    assert J.parts_for(good, bad) == ("lifecycle", "load")
    assert J.parts_for(bad, bad) == ("lifecycle",)  # the load the same on both sides: not a part
    probed = [["finalize_missing", "ok", READY]]
    assert J.parts_for(probed, [["finalize_missing", "ok", NOT_READY]]) == ("lifecycle", "readiness")
    assert J.signature(probed[0], ("lifecycle", "readiness")) == f"finalize_missing / {READY}"
    assert J.signature(bad[0], ("lifecycle",)) == "aborted_at_exit"  # as the table bisect said before
    assert J.counts(good + bad, ("lifecycle", "load")) == {"crashed / not_measured": 3, "aborted_at_exit / ok": 3}


def test_a_cycle_row_keeps_its_verdicts_and_the_readiness_in_the_tables_words():
    row = {"outcome": "finalize_missing", "load_outcome": None, "server_ready_at_probe": True,
           "model_ready_at_probe": False}
    assert J.raw_cycle(row) == ["finalize_missing", "not_measured", NOT_READY, None]
    assert J.raw_cycle({"outcome": "clean", "load_outcome": "ok"}) == ["clean", "ok", None, None]
    assert J.raw_cycle({"outcome": "clean", "load_outcome": "ok", "growth_outcome": "leaking"})[3] == "leaking"
    assert J.raw_cycle({"outcome": "clean", "growth_outcome": float("nan")})[3] is None  # pandas' null


def test_a_change_of_growth_alone_is_judged_where_both_releases_measured_it():
    """memory through the official API, 2.54.0 -> 2.55.0: clean on both, leaking then ok."""
    good, bad = [["clean", "ok", None, "leaking"]] * 3, [["clean", "ok", None, "ok"]] * 3
    assert J.parts_for(good, bad) == ("lifecycle", "growth")
    assert J.counts(good, ("lifecycle", "growth")) == {"clean / leaking": 3}
    assert J.parts_for(good, [["clean", "ok", None, None]] * 3) == ("lifecycle",)  # one side did not measure it
    kept = [["clean", "ok", None]] * 3  # a state kept before growth was judged: not recorded
    assert J.parts_for(kept, bad) == ("lifecycle",) and J.signature(kept[0], ("lifecycle", "growth")) == (
        "clean / not_measured")


def test_a_step_reads_good_bad_a_third_verdict_or_mixed():
    before, after = {"crashed / not_measured"}, {"aborted_at_exit / ok"}
    assert J.reading({"aborted_at_exit / ok": 3}, before, after) == "bad"
    assert J.reading({"crashed / not_measured": 3}, before, after) == "good"
    assert J.reading({"clean / ok": 3}, before, after) == "other"  # neither side's: a third verdict
    assert J.reading({"clean / ok": 2, "crashed / not_measured": 1}, before, after) == "good"  # the set's rule
    three = {"clean / ok": 2, "aborted_at_exit / ok": 1, "crashed / not_measured": 1}
    assert J.reading(three, before, after) == "mixed"
    # in a race (run again), a third verdict two to one against the rest
    assert J.reading({"clean / ok": 6, "aborted_at_exit / ok": 1, "crashed / not_measured": 2}, before, after,
                     race=True) == "other"
    # a readiness change alone: the same lifecycle, the probe moved
    assert J.reading({f"finalize_missing / {NOT_READY}": 3}, {f"finalize_missing / {READY}"},
                     {f"finalize_missing / {NOT_READY}"}) == "bad"


def test_a_window_before_the_sources_or_backwards_is_refused_before_anything_is_built():
    why = J.refusal("2.47.0", "2.51.0")
    assert why and "--good 2.47.0 predates" in why and "2.51.0" in why and "cannot be bisected" in why
    assert "--bad 2.50" in (J.refusal("2.52.0", "2.50") or "")  # either side, the short form too
    assert "--good 0.5.10 (2.48.0) predates" in (J.refusal("0.5.10", "2.52.0") or "")  # by any of its names
    assert "--good 24.09 (2.50.0) predates" in (J.refusal("24.09", "2.52.0") or "")
    assert J.refusal("nonsense", "2.52.0") is None  # the command's parse says what it is not
    assert "newer than" in (J.refusal("2.68.0", "2.67.0") or "")
    assert J.refusal("2.67.0", "2.68.0") is None and J.refusal("r26.03", "r26.04") is None
    assert J.prs("fix: Enable detection (#461) (#462)") == "#461 #462" and J.prs(None) == ""


# ---------------------------------------------------------------------------- the plan


def _oracle(world, asked=None):
    """The hybrids' signatures: ``world(frozenset of components from the newer release)`` gives a
    signature (None: the hybrid does not build), three cycles of it."""

    def seen(held, added, before, after):
        got = world(frozenset(held) | set(added))
        if asked is not None:
            asked.append(tuple(sorted(set(held) | set(added))))
        return None if got is None else Seen({got: 3})

    return seen


MOVED = ["core", "common", "python_backend"]


def test_one_component_gives_the_newer_verdict_its_commits_are_next():
    p = plan(MOVED, _oracle(lambda s: "aborted" if "python_backend" in s else "clean"), {"clean": 3}, {"aborted": 3})
    assert p.decided and [m.components for m in p.moves] == [("python_backend",)]
    assert p.moves[0].before == {"clean"} and p.moves[0].after == {"aborted"}


def test_two_components_together_no_single_moves_it_the_pair_does():
    asked: list = []

    def world(s):  # ready-stub-dead 2.63.0 -> 2.64.0: core#461 with python_backend#423
        return f"fm / {NOT_READY}" if {"core", "python_backend"} <= s else f"fm / {READY}"

    p = plan(MOVED, _oracle(world, asked), {f"fm / {READY}": 3}, {f"fm / {NOT_READY}": 3})
    assert p.decided and [m.components for m in p.moves] == [("core", "python_backend")]
    assert p.moves[0].held == ()
    assert ("common", "core") in asked and ("common", "python_backend") in asked  # every pair: none else does it


def test_two_changes_in_turn_a_third_verdict_then_the_rest_on_top_of_it():
    def world(s):  # ensemble-in-flight 2.67.0 -> 2.68.0: core ends the crash, python_backend adds the abort
        if "core" not in s:
            return "crashed"  # the crash in the stop hides the abort at exit
        return "aborted" if "python_backend" in s else "clean"

    p = plan(MOVED, _oracle(world), {"crashed": 3}, {"aborted": 3})
    assert p.decided
    assert [(m.components, m.held) for m in p.moves] == [(("core",), ()), (("python_backend",), ("core",))]
    assert p.moves[0].before == {"crashed"} and p.moves[0].after == {"clean"}
    assert p.moves[1].before == {"clean"} and p.moves[1].after == {"aborted"}


def test_two_changes_each_moving_one_part_of_the_cell():
    def world(s):
        return ("B" if "core" in s else "A") + " / " + ("Y" if "python_backend" in s else "X")

    p = plan(MOVED, _oracle(world), {"A / X": 3}, {"B / Y": 3})
    assert p.decided and [m.components for m in p.moves] == [("core",), ("python_backend",)]
    assert [m.after for m in p.moves] == [{"B / X"}, {"A / Y"}]  # each from the release before it


def test_what_it_cannot_decide_it_says():
    # each of two alone gives it
    p = plan(MOVED, _oracle(lambda s: "bad" if s & {"core", "common"} else "good"), {"good": 3}, {"bad": 3})
    assert not p.decided and "each of core, common alone" in p.why
    # no single, no pair: the change needs all three
    p = plan(MOVED, _oracle(lambda s: "bad" if len(s) == 3 else "good"), {"good": 3}, {"bad": 3})
    assert not p.decided and "nor any pair" in p.why
    # a hybrid that does not build is named, not ruled out
    p = plan(MOVED, _oracle(lambda s: None if "core" in s else "good"), {"good": 3}, {"bad": 3})
    assert not p.decided and any("core (did not build)" in n for n in p.notes)
    p = plan(MOVED, _oracle(lambda s: None if s == {"core"} else "bad" if "python_backend" in s else "good"),
             {"good": 3}, {"bad": 3})
    assert p.decided and [m.components for m in p.moves] == [("python_backend",)]
    assert p.notes == ["not ruled out: core (did not build)"]
    # one component moved and it does not move the cell
    p = plan(["core"], _oracle(lambda s: "good"), {"good": 3}, {"bad": 3})
    assert not p.decided and "core alone does not move the cell" in p.why


# ---------------------------------------------------------------------------- the whole walk, faked

RELEASES = {"2.63.0": {"core": "c0", "common": "m0", "backend": "k0", "python_backend": "p0"},
            "2.64.0": {"core": "c3", "common": "m0", "backend": "k0", "python_backend": "p2"}}
COMMITS = {"core": ["c0", "c1", "c2", "c3"], "python_backend": ["p0", "p1", "p2"]}


def _fake_world(monkeypatch, verdict):
    """Bisection with its builds, cells and git faked: ``verdict(core index, python_backend index)``
    gives a cycle's [lifecycle, load, readiness]; returns the list of builds asked."""
    import rig.runtimes.from_source as fs
    import rig.runtimes.from_source.sources as src
    from rig.workflows.bisect import Bisection

    built: list[dict] = []

    def build(req, out=None, progress=None):
        built.append(dict(req.refs))
        return {"label": req.version + "-v" + "+".join(f"{c}={r}" for c, r in sorted(req.refs.items()))}

    def cell(self, runtime, cycles):
        version, _, refs = runtime.removeprefix("built-").partition("-v")
        commits = dict(RELEASES[version])
        commits.update(dict(x.split("=") for x in refs.split("+") if x))
        core, pb = commits["core"], commits["python_backend"]
        raw = verdict(COMMITS["core"].index(core), COMMITS["python_backend"].index(pb))
        return [list(raw)] * cycles, f"run-{runtime}"

    class FakeSources:
        def __init__(self, folder):
            pass

        def mirror(self, name, where, log):
            return name

    def first_parent(mirror, good, bad):
        c = COMMITS[mirror]
        return [(x, f"{mirror} change {x} (#{10 + c.index(x)})") for x in c[c.index(good) + 1: c.index(bad) + 1]]

    monkeypatch.setattr(fs, "build", build)
    monkeypatch.setattr(src, "Sources", FakeSources)
    monkeypatch.setattr(src, "first_parent", first_parent)
    monkeypatch.setattr(Bisection, "_release", lambda self, v: {"commits": RELEASES[v]})
    monkeypatch.setattr(Bisection, "_cell", cell)
    return built


def _bisect(tmp_path, scenario="ready-stub-dead"):
    from rig.store import Store
    from rig.workflows.bisect import Bisection, BisectSpec

    said: list[str] = []
    spec = BisectSpec(scenario, False, None, "capi", "2.63.0", "2.64.0", None, str(tmp_path), cycles=3)
    code = Bisection(spec, out=said.append).run()
    rows = Store(str(tmp_path)).read("bisect").sort_values("step")
    return code, said, rows


def _named(rows, scenario: str) -> str:
    """What the conformance table says of the change, from the result rows (rig.analysis.conformance.changes)."""
    from rig.analysis.conformance import changes

    found = changes.bisected(changes.decided_bisects(rows), scenario, False, "capi", "unbatched", "2.63.0", "2.64.0")
    return changes.commits_text(found)


def test_a_readiness_change_two_components_needed_together_names_both_commits(tmp_path, monkeypatch):
    built = _fake_world(monkeypatch, lambda core, pb: ["finalize_missing", "ok",
                                                       NOT_READY if core >= 2 and pb >= 1 else READY])
    code, said, rows = _bisect(tmp_path)
    assert code == 0, said
    results = rows[rows["kind"] == "result"]
    assert list(results["component"]) == ["core", "python_backend"] and list(results["commit"]) == ["c2", "p1"]
    assert set(results["cause"]) == {"together"} and set(results["judged"]) == {"bad"}
    assert list(results["held"]) == ["python_backend@p2", "core@c3"]  # each walked with the other at 2.64.0's
    assert any(line.startswith("needs core c2 (#12) and python_backend p1 (#11)") for line in said), said
    assert "pair" in set(rows["kind"])
    # the conformance table names both, as one change that needs them
    assert _named(rows, "ready-stub-dead") == "needs core c2 (#12) and python_backend p1 (#11)"
    # resumed: nothing built or run again, the same rows
    n = len(built)
    code2, _, rows2 = _bisect(tmp_path)
    assert code2 == 0 and len(built) == n
    assert list(rows2[rows2["kind"] == "result"]["commit"]) == ["c2", "p1"]


def test_two_changes_in_turn_each_commit_its_own_result_row(tmp_path, monkeypatch):
    def verdict(core, pb):  # core c1 ends the crash; python_backend p2 adds the abort at exit
        if core < 1:
            return ["crashed", "not_measured", None]
        return ["aborted_at_exit" if pb >= 2 else "clean", "ok", None]

    _fake_world(monkeypatch, verdict)
    code, said, rows = _bisect(tmp_path, "ensemble-in-flight")
    assert code == 0, said
    results = rows[rows["kind"] == "result"]
    assert list(results["commit"]) == ["c1", "p2"] and set(results["cause"]) == {"apart"}
    assert list(results["effect"]) == ["crashed / not_measured -> clean / ok", "clean / ok -> aborted_at_exit / ok"]
    assert any(line.startswith("two changes: core c1 (#11): crashed / not_measured -> clean / ok; python_backend p2")
               for line in said), said
    assert _named(rows, "ensemble-in-flight") == ("two changes: core c1 (#11) (crashed / not_measured -> clean / ok), "
                                                  "python_backend p2 (#12) (clean / ok -> aborted_at_exit / ok)")


def test_one_commit_as_before_and_a_state_file_of_the_older_kind_resumes(tmp_path, monkeypatch):
    built = _fake_world(monkeypatch, lambda core, pb: ["aborted_at_exit" if pb >= 1 else "clean", "ok", None])
    from rig.store import Store
    from rig.workflows.bisect import BisectSpec

    spec = BisectSpec("template", False, None, "capi", "2.63.0", "2.64.0", None, str(tmp_path), cycles=3)
    work = Store(str(tmp_path)).work_dir(spec.id)
    work.mkdir(parents=True)
    old = {"kind": "component", "runtime": "built-2.63.0-vpython_backend=p2", "component": "python_backend",
           "commit": "p2", "subject": None, "counts": {"aborted_at_exit": 3}, "judged": "bad", "run_id": "r",
           "detail": None}  # a step as the older bisect kept it: its lifecycle verdicts, no cycles
    (work / "state.json").write_text(json.dumps({"steps": {"python_backend@p2": old}}))
    code, said, rows = _bisect(tmp_path, "template")
    assert code == 0, said
    assert {"python_backend": "p2"} not in built  # the older step was used, not built again
    r = rows[rows["kind"] == "result"].iloc[0]
    assert (r["component"], r["commit"], r["cause"], r["judged"]) == ("python_backend", "p1", "one", "bad")
    assert any("first commit with 2.64.0's verdict: python_backend p1" in line for line in said)
    assert _named(rows, "template") == "python_backend p1 (#11)"


@pytest.mark.parametrize("args", [["--good", "2.47.0", "--bad", "2.51.0"], ["--good", "2.68.0", "--bad", "2.67.0"]])
def test_the_command_refuses_a_window_in_one_line_and_records_it_where_asked(tmp_path, args):
    import argparse

    from rig.commands import bisect as cmd
    from rig.common.errors import RigError
    from rig.store import Store

    parser = argparse.ArgumentParser()
    cmd.add_parser(parser.add_subparsers())
    base = ["bisect", "--scenario", "ensemble-in-flight", *args, "--results", str(tmp_path)]
    with pytest.raises(RigError) as e:
        cmd.run(parser.parse_args(base))
    assert "\n" not in str(e.value)
    assert cmd.run(parser.parse_args([*base, "--record-refusal"])) == 1
    row = Store(str(tmp_path)).read("bisect").iloc[0]
    assert (row["kind"], row["judged"], row["detail"]) == ("result", "refused", str(e.value))
