"""`rig matrix --scenarios ... --race-cycles N`: more cycles for a race. A scenario cell whose cycles
gave more than one lifecycle verdict (1 crashed, 2 clean) has a rate, k of n, that its few cycles
know poorly; it runs again, as more runs of the same cell (the same configuration, new run ids, into
the same store: the conformance analysis and the matrix's own judgement pool a cell's cycles over its
runs), until its rate is known or its budget is spent.

The stopping rule (``next_cycles``): a rate is known once the 95 % Wilson interval of its least-known
lifecycle verdict (the one whose interval is widest: the rate nearest one half) is at most
``RACE_WIDTH`` (0.5) wide, its rate known to about ±0.25. At that width, with as many cycles on the
other side, Fisher's exact test at α = 0.05 (``rig.analysis.conformance.rates``, what `rig report
--conformance` compares two releases' rates by) calls a release where the verdict settled the other
way (never came up, where it came up most here; always, where it came up least) a significant
change: three cycles never can. The budget, ``--race-cycles`` (default ``RACE_CYCLES``, 9: with the
matrix's 3 cycles, 12 at most, by which every rate's interval is under 0.5 wide), is the most cycles
added to one cell, counted as asked for. Each run asks for the cycles that would make the rate known
were it to hold (``needed``), or the rest of the budget where none within it would; a run that
does not finish its cycles (its cell crashed, timed out, or the machine or its input failed it) ends
its cell's extension there. A cell whose first run did not finish is never extended.

Each extended cell is one row in the table, its figures and judgement over every run's cycles
(``rig.workflows.matrix_run.pooled_row``), and a line (``race_line``), as measured on 2.51.0::

    race: execute-raises-slow [unbatched] 2.51.0 capi: exit_timeout 2/4 -> 3/10 (more cycles: 6; 95 % interval
    0.11-0.60, 0.50 wide: known)
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable
from pathlib import Path

if typing.TYPE_CHECKING:
    from rig.workflows.matrix_run import Job

RACE_CYCLES = 9  # the most cycles added to one intermittent cell (--race-cycles' default)
RACE_WIDTH = 0.5  # a rate is known once its 95 % interval is at most this wide
CONFIDENCE = 0.95
EXTENDED = ("pass", "fail")  # the statuses of a run that finished its cycles (fail: a threshold crossed)


@dataclasses.dataclass(frozen=True)
class RateNow:
    """The least-known rate of a cell's lifecycle verdicts: ``k`` of ``n`` cycles gave ``verdict``."""

    verdict: str
    k: int
    n: int
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    @property
    def known(self) -> bool:
        return self.width <= RACE_WIDTH + 1e-9


def _interval(k: int, n: int) -> tuple[float, float]:
    from rig.analysis import stats

    _, low, high = stats.wilson(k, n, CONFIDENCE)
    return float(low or 0.0), float(high or 0.0)


def least_known(lifecycle: dict[str, int]) -> RateNow | None:
    """The rate of the lifecycle verdict (``{verdict: cycles}``) whose 95 % interval is widest (of
    two verdicts, both are as wide: the one other than ``clean``, else the rarer, is named); None
    with no cycles."""
    n = sum(lifecycle.values())
    if n <= 0:
        return None
    rates = []
    for verdict, k in lifecycle.items():
        low, high = _interval(k, n)
        rates.append(RateNow(verdict, k, n, low, high))
    return max(rates, key=lambda r: (round(r.width, 9), r.verdict != "clean", -r.k, r.verdict))


def is_race(lifecycle: dict[str, int] | None) -> bool:
    """Whether a cell's cycles gave more than one lifecycle verdict."""
    return len([v for v, k in (lifecycle or {}).items() if k]) > 1


def needed(lifecycle: dict[str, int], budget: int) -> int | None:
    """The cycles more that would make the cell's rate known (``RateNow.known``) were the rates seen
    to hold (each verdict's count scaled to the new cycles, rounded, as ``rates.more_cycles``
    scales them): 0 where it is known; None where no number within ``budget`` would do."""
    n = sum(lifecycle.values())
    if n <= 0:
        return None
    for m in range(budget + 1):
        scaled = {v: math.floor(k * (n + m) / n + 0.5) for v, k in lifecycle.items()}
        rate = least_known(scaled)
        if rate is not None and rate.known:
            return m
    return None


def next_cycles(lifecycle: dict[str, int], left: int) -> int:
    """The stopping rule: how many cycles the cell's next run asks for, ``left`` of its budget
    being left: 0 where its rate is known (or it raced not: one verdict), or nothing is left;
    else the cycles that would make it known were its rates to hold (``needed``), at least one,
    or the rest of the budget where none within it would."""
    if left <= 0 or not is_race(lifecycle):
        return 0
    rate = least_known(lifecycle)
    if rate is None or rate.known:
        return 0
    m = needed(lifecycle, left)
    return left if m is None else max(1, min(m, left))


@dataclasses.dataclass
class _Race:
    before: dict[str, int]  # the first run's lifecycle verdicts
    lifecycle: dict[str, int]  # every run's, pooled
    left: int  # cycles of the budget left
    answers: list[dict]
    more: int = 0  # cycles asked for, more than the first run's
    runs: int = 0  # runs more
    stopped: str = ""

    def add(self, m: int, job: Job, row: dict) -> None:
        """A run of ``m`` more cycles (``job``, its finished ``row``) pooled in; a run that did not
        finish its cycles stops the race."""
        self.answers.append(job.answer or {"status": row.get("status"), "run_id": row.get("run_id")})
        self.left -= m
        self.more += m
        self.runs += 1
        for v, k in (row.get("outcomes") or {}).items():
            self.lifecycle[str(v)] = self.lifecycle.get(str(v), 0) + int(k)
        if row.get("status") not in EXTENDED:
            self.stopped = f"its run {row.get('status')}: stopped"


def race_line(row: dict, race: dict) -> str:
    """``race: NAME [SHAPE] TRITON ENGINE: VERDICT k/n -> k/n (more cycles: M[ in R runs]; 95 %
    interval LOW-HIGH, W wide: why it stopped)``."""
    name = (row.get("scenario") or "-") + (" (control)" if row.get("control") else "")
    (k0, n0), (k, n) = race["before"], race["after"]
    runs = f" in {race['runs']} runs" if race["runs"] > 1 else ""
    low, high = race["interval"]
    return (
        f"race: {name} [{row.get('shape') or '-'}] {row.get('triton_version') or '-'} {row.get('engine') or '-'}: "
        f"{race['verdict']} {k0}/{n0} -> {k}/{n} (more cycles: {race['more_cycles']}{runs}; 95 % interval "
        f"{low:.2f}-{high:.2f}, {high - low:.2f} wide: {race['stopped']})"
    )


def extend(
    jobs: list[Job],
    rows: list[dict],
    budget: int,
    parallel: int,
    timeout: float,
    cycles: int,
    results: str,
    log_dir: Path | None,
    judge: Callable[[dict], object],
    status: Callable[[dict], str],
) -> list[dict]:
    """``rows`` (the finished, judged rows of ``jobs``, in order) with each race (``is_race``; a
    scenario cell's first run that finished its cycles) run again for more cycles, at most
    ``budget`` a cell, until its rate is known (``next_cycles``): side by side as its first runs
    were (``parallel``), a round at a time; each such row replaced by its runs pooled and judged
    again (``pooled_row``), its ``race`` said (``race_line``, printed). ``timeout``: a run of
    ``cycles`` cycles' limit (a run of more, in proportion)."""
    from rig.workflows.matrix_run import run_jobs

    races = _races(jobs, rows, budget)
    if not races:
        return rows
    print(
        f"\n{len(races)} cell(s) gave more than one lifecycle verdict: more cycles for each until its rate is "
        f"known (the 95 % interval of its least-known verdict's rate at most {RACE_WIDTH:g} wide), at most "
        f"{budget} more a cell (--race-cycles)",
        flush=True,
    )
    rounds = 0
    while asked := _asked(races, budget):
        rounds += 1
        more_jobs = [_again(jobs[i], m) for i, m in asked]
        longest = max(m for _, m in asked)
        more_rows = run_jobs(
            more_jobs,
            parallel,
            timeout * max(1.0, longest / max(1, cycles)),
            results,
            log_dir / f"race-{rounds}" if log_dir is not None else None,
            lambda row: row,
            status,
        )
        for (i, m), job, row in zip(asked, more_jobs, more_rows):
            races[i].add(m, job, row)
    for i, race in races.items():
        if race.runs:
            rows[i] = _pooled(jobs[i], race, budget, results, judge)
            print(race_line(rows[i], rows[i]["race"]), flush=True)
    return rows


def _races(jobs: list[Job], rows: list[dict], budget: int) -> dict[int, _Race]:
    """The cells that raced (by index), each with its first run's verdicts: a scenario cell whose
    first run finished its cycles and gave more than one lifecycle verdict."""
    races: dict[int, _Race] = {}
    for i, (job, row) in enumerate(zip(jobs, rows)):
        if (
            budget > 0
            and job.again is not None
            and job.answer is not None
            and job.answer.get("status") in EXTENDED
            and is_race(row.get("outcomes"))
        ):
            life = {str(v): int(k) for v, k in row["outcomes"].items()}
            races[i] = _Race(dict(life), dict(life), budget, [job.answer])
    return races


def _asked(races: dict[int, _Race], budget: int) -> list[tuple[int, int]]:
    """This round's (cell, more cycles); a race that needs none more is stopped, and says why."""
    asked = []
    for i, race in races.items():
        if race.stopped:
            continue
        m = next_cycles(race.lifecycle, race.left)
        if m:
            asked.append((i, m))
        else:
            rate = least_known(race.lifecycle)
            race.stopped = "known" if rate is not None and rate.known else f"budget of {budget} spent"
    return asked


def _again(job: Job, m: int) -> Job:
    """A new run of ``job``'s cell, of ``m`` cycles."""
    more = job.again(m)  # type: ignore[misc]
    more.label = f"{job.label} (race: {m} more cycle(s))"
    more.start_line = f"{more.label}: soak, a new run of the same cell"
    return more


def _pooled(job: Job, race: _Race, budget: int, results: str, judge: Callable[[dict], object]) -> dict:
    """The cell's row over all its runs, judged again, with its ``race`` said."""
    from rig.workflows.matrix_run import pooled_row

    row = pooled_row(job, race.answers, results, judge)
    rate = least_known({str(v): int(k) for v, k in (row.get("outcomes") or race.lifecycle).items()})
    assert rate is not None
    row["race"] = {
        "verdict": rate.verdict,
        "before": [race.before.get(rate.verdict, 0), sum(race.before.values())],
        "after": [rate.k, rate.n],
        "more_cycles": race.more,
        "runs": race.runs,
        "interval": [rate.low, rate.high],
        "known": rate.known,
        "stopped": race.stopped or ("known" if rate.known else f"budget of {budget} spent"),
    }
    return row
