"""`rig matrix --race-cycles N`: a scenario cell whose cycles gave more than one lifecycle verdict runs
again for more cycles until its rate is known (rig.workflows.matrix_races). Fast: the stopping rule,
pure, held to what it claims of Fisher's exact test (rig.analysis.conformance.rates); the option; the
extension over real stored cycles with a stand-in for the cell's process. Slow: a real core's race.
"""

from __future__ import annotations

import re

import pytest

from helpers import cycle_row
from rig.analysis import matrix as M
from rig.analysis.conformance.rates import ALPHA, fisher_exact
from rig.common.errors import RigError
from rig.workflows import matrix_jobs, matrix_races, matrix_run
from rig.workflows import matrix_setup as setup
from rig.workflows.matrix_races import RACE_CYCLES, RACE_WIDTH, least_known, needed, next_cycles

# ---------------------------------------------------------------- fast: the stopping rule


def test_a_cell_with_one_verdict_or_a_known_rate_gets_no_more_cycles():
    assert next_cycles({"clean": 3}, 9) == 0  # no race
    assert next_cycles({"clean": 2, "exit_timeout": 1}, 0) == 0  # no budget
    assert next_cycles({"clean": 6, "exit_timeout": 6}, 9) == 0  # 6/12: known (0.49 wide)
    assert least_known({"clean": 6, "exit_timeout": 6}).width < RACE_WIDTH
    assert least_known({}) is None and needed({}, 9) is None


def test_a_race_asks_for_the_cycles_its_rate_needs_or_the_rest_of_its_budget():
    # 1 of 3: known at 10 cycles were the rate to hold (3/10, 0.50 wide), 7 more
    assert needed({"clean": 2, "exit_timeout": 1}, 30) == 7
    assert next_cycles({"clean": 2, "exit_timeout": 1}, 9) == 7
    # within a budget that cannot do it: the rest of the budget
    assert needed({"clean": 2, "exit_timeout": 1}, 3) is None
    assert next_cycles({"clean": 2, "exit_timeout": 1}, 3) == 3
    # a lopsided rate is known sooner: 1 of 6 at 7 (1/7, 0.49 wide)
    assert next_cycles({"clean": 5, "exit_timeout": 1}, 9) == 1
    # of two verdicts both are as wide: the one other than clean is named; of three, the widest
    assert least_known({"clean": 2, "exit_timeout": 1}).verdict == "exit_timeout"
    assert least_known({"crashed": 1, "clean": 4, "exit_timeout": 5}).verdict == "exit_timeout"
    rate = least_known({"clean": 1, "exit_timeout": 2})
    assert (rate.verdict, rate.k, rate.n) == ("exit_timeout", 2, 3) and not rate.known
    assert 0.20 < rate.low < 0.21 and 0.93 < rate.high < 0.94  # the 95 % Wilson interval


def test_the_default_budget_knows_every_race_by_twelve_cycles():
    """The rule's claim: with the matrix's 3 cycles and the default budget (9), a race reaches 12 cycles
    at most, by which every rate's interval is under RACE_WIDTH wide; 3 cycles never are."""
    assert RACE_CYCLES == 9 and RACE_WIDTH == 0.5
    assert all(least_known({"a": k, "b": 12 - k}).known for k in range(1, 12))
    assert not any(least_known({"a": k, "b": 3 - k}).known for k in range(1, 3))


def test_a_known_rate_is_one_fishers_test_tells_from_a_settled_release():
    """The rule's meaning (matrix_races' docstring): at RACE_WIDTH, with as many cycles on the other
    side, Fisher's exact test (rates.fisher_exact, what `rig report --conformance` compares rates by)
    calls a release where the verdict settled the other way (never, where it came up most; always,
    where least) a significant change; at 3 cycles, never."""
    for n in range(3, 41):
        for k in range(1, n):
            if least_known({"a": k, "b": n - k}).known:
                settled = 0 if 2 * k >= n else n
                assert fisher_exact(k, n, settled, n) < ALPHA, (k, n)
    assert all(fisher_exact(k, 3, s, 3) >= ALPHA for k in (1, 2) for s in (0, 3))


# ---------------------------------------------------------------- fast: the option


def _args(*argv):
    from rig.cli import build_parser

    return build_parser().parse_args(["matrix", "--runtimes", "0.7.0", *argv])


def test_the_budget_is_stated_checked_and_only_for_scenarios(capsys):
    from rig.cli import main

    assert setup.parse_race_cycles(None, True) == RACE_CYCLES and setup.parse_race_cycles(None, False) == 0
    assert setup.parse_race_cycles("0", True) == 0 and setup.parse_race_cycles("4", True) == 4
    for bad in ("-1", "many"):
        with pytest.raises(RigError, match="--race-cycles"):
            setup.parse_race_cycles(bad, True)
    with pytest.raises(RigError, match="applies to --scenarios cells only"):
        setup.parse_race_cycles("3", False)
    assert main(["matrix", "--runtimes", "0.7.0", "--race-cycles", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--race-cycles applies to --scenarios cells only" in err[0]
    args = _args("--scenarios", "execute-raises-slow")
    setup.check_axes(args)
    assert args.race_cycles == RACE_CYCLES
    # the budget (per cell), its default and the rule, stated in --help
    import argparse

    from rig.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    (said,) = [a.help for a in sub.choices["matrix"]._actions if a.dest == "race_cycles"]
    assert "a cell whose cycles gave more than one lifecycle verdict" in said and "at most N more cycles" in said
    assert f"default {RACE_CYCLES}" in said and f"at most {RACE_WIDTH:g} wide" in said


# ---------------------------------------------------------------- fast: real stored cycles, a stand-in cell


CELL = {"scenario": "execute-raises-slow", "control": False, "shape": "unbatched", "runtime": "0.7.0",
        "triton_version": "2.51.0", "engine": "capi", "why": "asked for", "expected": ("clean|exit_timeout", "errors"),
        "growth": "ok"}


def _stand_in(monkeypatch, tmp_path, draws: list[str], then: str = "pass"):
    """``matrix_run._run_cell`` stood in for: each run stores as many cycles as its spec asks for, their
    lifecycle verdicts drawn in turn from ``draws``, into the real store, and answers ``pass`` (a run after
    the first: ``then``). Returns the cycles each run was asked for."""
    from rig.parent.config import from_toml_text
    from rig.store import Store

    store, asked, drawn = Store(str(tmp_path)), [], iter(draws)

    def run_cell(spec, timeout, env=None, log=None, spec_path=None):
        n = from_toml_text(spec.config).cycles
        run_id = f"20270101T0000{len(asked):02d}-abcdef"
        asked.append(n)
        rows = [cycle_row(c, run_id, outcome=next(drawn), load_outcome="errors", growth_outcome="ok",
                          scenario="execute-raises-slow", shape="unbatched", control=False)
                for c in range(1, n + 1)]
        store.write("cycles", rows, "2.51.0", "run")
        status = "pass" if len(asked) == 1 else then
        return {"run_id": run_id, "exit": 0, "status": status, "reason": "" if status == "pass" else "died of SIGSEGV"}

    monkeypatch.setattr(matrix_run, "_run_cell", run_cell)
    return asked


def _matrix(tmp_path, budget: int, expected=("clean|exit_timeout", "errors")):
    from rig.parent.config import RunConfig

    base = RunConfig(exit_timeout=3, cycles=3, results=str(tmp_path))
    job = matrix_jobs.scenario_job({**CELL, "expected": expected}, base, dict(setup.SCENARIO_LOAD_KEYS))
    rows = matrix_run.run_jobs([job], 1, 60, str(tmp_path), None, M.judge_scenario, M.status)
    return matrix_races.extend([job], rows, budget, 1, 60, 3, str(tmp_path), None, M.judge_scenario, M.status)


def test_a_race_runs_again_until_known_its_cycles_pooled_and_judged(monkeypatch, tmp_path, capsys):
    # 1 of 3 exit_timeout: 7 more asked for (known at 10, were the rate to hold); they give 2 of 7: 3/10
    asked = _stand_in(monkeypatch, tmp_path, ["clean", "exit_timeout", "clean"] + ["clean"] * 5 + ["exit_timeout"] * 2)
    (row,) = _matrix(tmp_path, 9)
    assert asked == [3, 7]
    assert row["cycles"] == 10 and row["outcomes"] == {"clean": 7, "exit_timeout": 3}
    assert row["status"] == "pass" and row["as_expected"] == 10  # judged over every run's cycles
    assert len(row["run_ids"]) == 2 and row["run_id"] == row["run_ids"][0]
    race = row["race"]
    assert (race["verdict"], race["before"], race["after"], race["more_cycles"], race["runs"]) == (
        "exit_timeout", [1, 3], [3, 10], 7, 1)
    assert race["known"] and race["stopped"] == "known"
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("race: "))
    assert re.fullmatch(r"race: execute-raises-slow \[unbatched\] 2\.51\.0 capi: exit_timeout 1/3 -> 3/10 "
                        r"\(more cycles: 7; 95 % interval 0\.\d\d-0\.\d\d, 0\.(4\d|50) wide: known\)", line), line
    assert "1 cell(s) gave more than one lifecycle verdict" in out
    table = M.format_scenarios([row])
    assert "| clean 7, exit_timeout 3 |" in table and "| yes (10/10) | pass |" in table


def test_a_race_within_a_small_budget_stops_when_it_is_spent(monkeypatch, tmp_path, capsys):
    asked = _stand_in(monkeypatch, tmp_path, ["clean", "exit_timeout", "clean"] + ["clean", "exit_timeout"] * 2)
    (row,) = _matrix(tmp_path, 4)
    assert asked == [3, 4] and row["cycles"] == 7
    assert not row["race"]["known"] and row["race"]["stopped"] == "budget of 4 spent"
    assert "(more cycles: 4; 95 % interval" in capsys.readouterr().out


def test_more_cycles_that_differ_from_the_known_are_a_finding(monkeypatch, tmp_path):
    _stand_in(monkeypatch, tmp_path, ["clean", "exit_timeout", "clean"] + ["crashed"] * 9)
    (row,) = _matrix(tmp_path, 9)
    assert row["status"] == "finding" and "crashed" in row["reason"] and row["cycles"] == 10
    assert M.exit_status([row]) == 1


def test_a_run_that_crashes_ends_its_cells_race(monkeypatch, tmp_path, capsys):
    asked = _stand_in(monkeypatch, tmp_path, ["clean", "exit_timeout", "clean"] + ["clean"] * 7, then="crashed")
    (row,) = _matrix(tmp_path, 9)
    assert asked == [3, 7]  # never asked again, though the rate is not known
    assert row["status"] == "crashed" and row["reason"] == "its more cycles: died of SIGSEGV"
    assert row["race"]["stopped"] == "its run crashed: stopped"
    assert "its run crashed: stopped)" in capsys.readouterr().out


def test_no_race_no_budget_or_a_crashed_first_run_runs_nothing_more(monkeypatch, tmp_path):
    asked = _stand_in(monkeypatch, tmp_path, ["clean"] * 3)
    (row,) = _matrix(tmp_path, 9)
    assert asked == [3] and "race" not in row and row["cycles"] == 3
    asked = _stand_in(monkeypatch, tmp_path / "b", ["clean", "exit_timeout", "clean"])
    (row,) = _matrix(tmp_path / "b", 0)
    assert asked == [3] and "race" not in row


# ---------------------------------------------------------------- slow: a real core


@pytest.mark.slow
def test_a_real_cells_more_cycles_land_under_the_same_cell(monkeypatch, tmp_path, capsys):
    """`rig matrix --scenarios execute-raises-slow --shapes unbatched` on the embedded 2.51.0 through
    capi, 2 cycles, a budget of 2: real cells on a real core. Its race is a draw (here it raced in 4
    cycles once, not in 3 another time), so a stand-in judgement calls every cell with cycles a race;
    the extension, its runs, the store and the table are the matrix's own. The more cycles land under
    the same cell (the conformance analysis pools its two runs), and the race line says them."""
    import signal

    from rig.analysis.conformance.table import cells
    from rig.cli import main
    from rig.store import Store

    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(matrix_races, "is_race", lambda lifecycle: sum((lifecycle or {}).values()) > 0)
    results = tmp_path / "r"
    try:
        code = main(["matrix", "--scenarios", "execute-raises-slow", "--runtimes", "0.7.0", "--engines", "capi",
                     "--shapes", "unbatched", "--cycles", "2", "--race-cycles", "2", "--jobs", "2",
                     "--results", str(results)])
    finally:
        signal.signal(signal.SIGTERM, handler)
    out = capsys.readouterr().out
    assert code in (0, 1), out[-3000:]  # 1: a finding, where the core gave a verdict never seen there
    assert "2 cell(s) gave more than one lifecycle verdict" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("race: ")]
    assert len(lines) == 2, out[-3000:]
    for line, name in zip(lines, ("execute-raises-slow", "execute-raises-slow (control)")):
        # 2 cycles agreeing know a rate to 0.66 (Wilson, 2/2); 4 to 0.49: the 2 more make it known
        assert re.fullmatch(rf"race: {re.escape(name)} \[unbatched\] 2\.51\.0 capi: \w+ [0-2]/2 -> [0-4]/4 "
                            r"\(more cycles: 2; 95 % interval 0\.\d\d-[01]\.\d\d, 0\.\d\d wide: [^)]+\)", line), line
    cycles = Store(str(results)).read("cycles")
    assert len(cycles) == 8 and cycles.run_id.nunique() == 4
    pooled = [c for c in cells(cycles) if c.scenario == "execute-raises-slow"]
    assert sorted((c.control, c.cycles, len(c.run_ids)) for c in pooled) == [(False, 4, 2), (True, 4, 2)]
    table = [ln for ln in out.splitlines() if ln.startswith("| execute-raises-slow")]
    assert len(table) == 2 and all(re.search(r"\| \w+ \((4)/4\) \|", ln) for ln in table), table
