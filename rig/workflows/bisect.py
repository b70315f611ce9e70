"""What `rig bisect` does (its command: ``rig.commands.bisect``): where a conformance cell's verdict
changed between two releases, by which component and which commit.

Given a cell (a scenario, its control or not, a shape, an engine) and two releases that give it
different lifecycle verdicts, it builds hybrids, the good release with one component taken from the
bad (``rig.runtimes.from_source.identity``: each a variant of its own), and runs the cell on each: the component
whose hybrid gives the new verdict is the one that changed it. It then bisects that component's
first-parent commits between the two releases, building the good release with the component at
each step's commit (the compiler cache keeps a step short: one component's files compile again).

Every step is stored (the table ``bisect``, one row a step and one for the result) and kept in the
bisection's work folder (``state.json``), so an interrupted bisection run again with the same cell
and releases resumes where it stopped; builds are cached by their identity anyway. A step whose
build fails, or whose cycles give both sides' verdicts more than once, is skipped (as
``git bisect skip``) and said: the result then names the range it could not split.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Callable

from rig.common.errors import Exit, RigError
from rig.workflows.step_bar import StepBar

KINDS = ("release", "component", "commit")


@dataclasses.dataclass(frozen=True)
class BisectSpec:
    """What a bisection bisects, and how."""

    scenario: str
    control: bool
    shape: str | None
    engine: str
    good: str
    bad: str
    sources: str | None = None
    results: str = "results"
    cycles: int = 3
    race_cycles: int = 6
    jobs: int | None = None

    @property
    def id(self) -> str:
        """Stable for the same cell and releases: the id an interrupted bisection resumes under."""
        key = json.dumps([self.scenario, self.control, self.shape, self.engine, self.good, self.bad])
        return "b" + hashlib.sha256(key.encode()).hexdigest()[:11]


@dataclasses.dataclass
class Step:
    """One step's verdicts, judged against the two releases'."""

    kind: str
    runtime: str | None
    component: str | None
    commit: str | None
    subject: str | None
    counts: dict[str, int]
    judged: str  # good | bad | mixed | failed
    run_id: str | None
    detail: str | None = None

    def words(self) -> str:
        return ", ".join(f"{v} x{n}" for v, n in sorted(self.counts.items())) or "-"


def check_cell(spec: BisectSpec) -> None:
    """The cell as `rig soak` would check it (an unknown scenario, a shape it does not run in, a
    control it has not: one line), before anything is built."""
    from rig.parent import config

    config.load(None, _overrides(spec, "auto", 1))


def _overrides(spec: BisectSpec, runtime: str, cycles: int) -> dict:
    from rig.workflows.matrix_plan import SCENARIO_EXIT_TIMEOUT, SCENARIO_REQUEST_TIMEOUT

    return {
        "scenario": spec.scenario,
        "control": spec.control,
        "model_shape": spec.shape,
        "engine": spec.engine,
        "runtime": runtime,
        "cycles": cycles,
        "results": spec.results,
        "exit_timeout": SCENARIO_EXIT_TIMEOUT,
        "request_timeout": SCENARIO_REQUEST_TIMEOUT,
    }


class Bisection:
    """One bisection: its steps so far (resumed from its state file), the store it writes to."""

    def __init__(self, spec: BisectSpec, out: Callable[[str], None] = print):
        from rig.store import Store

        self.spec = spec
        self.out = out
        self.store = Store(spec.results)
        self.work = self.store.work_dir(spec.id)
        self.work.mkdir(parents=True, exist_ok=True)
        self.state_file = self.work / "state.json"
        self.done: dict[str, dict] = {}
        if self.state_file.exists():
            self.done = json.loads(self.state_file.read_text()).get("steps", {})
        self.steps: list[Step] = []
        self.good_set: set[str] = set()
        self.bad_set: set[str] = set()
        self.bar = StepBar(sys.stdout)
        self.caveat = ""  # a component whose hybrid could not say
        self.base, self.top = spec.good, spec.bad  # the two releases the hybrids stand between
        self.undecided: list[str] = []  # releases between them that could not be judged

    # ------------------------------------------------------------------ the walk

    def run(self) -> int:
        s = self.spec
        cell = f"{s.scenario}{' (control)' if s.control else ''}, shape {s.shape or 'its first'}, {s.engine}"
        self.out(f"bisect {s.id}: {cell}, between {s.good} and {s.bad}; work folder {self.work}")
        if self.done:
            self.out(f"resuming: {len(self.done)} step(s) done before")
        good_m = self._release(s.good)
        bad_m = self._release(s.bad)
        g = self._step("release", f"built-{s.good}", None, None, None, judge=False)
        b = self._step("release", f"built-{s.bad}", None, None, None, judge=False)
        self.good_set, self.bad_set = set(g.counts), set(b.counts)
        if not (self.bad_set - self.good_set) and not (self.good_set - self.bad_set):
            raise RigError(
                f"the cell gives {g.words()} on {s.good} and {b.words()} on {s.bad}: no verdict tells them "
                "apart, nothing to bisect (more --cycles, or another cell)"
            )
        g.judged, b.judged = "good", "bad"
        self._record(g)
        self._record(b)
        from rig.workflows.bisect_span import narrow, releases_between

        inner = releases_between(s.good, s.bad)
        if inner:  # the releases between first: a hybrid of neighbours builds where one across years may not
            self.bar.total = 2 + math.ceil(math.log2(len(inner) + 1))
            lo, hi, self.undecided = narrow(inner, self._release_judged)
            self.base, self.top = lo or s.good, hi or s.bad
            good_m, bad_m = self._release(self.base), self._release(self.top)
        moved = [c for c in _components() if good_m["commits"].get(c) != bad_m["commits"].get(c)]
        self.bar.total = len(self.steps) + len(moved)
        culprits, unbuilt = [], []
        for c in moved:
            step = self._hybrid(c, bad_m["commits"][c])
            if step.judged == "bad":
                culprits.append(c)
            elif step.judged in ("failed", "mixed"):
                unbuilt.append(c)
        self.caveat = (
            f"; not ruled out: {', '.join(unbuilt)} (its hybrid did not build or stayed mixed)" if unbuilt else ""
        )
        if len(culprits) != 1:
            why = (
                f"no component alone gives {self.top}'s verdict on {self.base} ({', '.join(moved)} moved): they "
                "changed it together"
                if not culprits
                else f"each of {', '.join(culprits)} alone gives {self.top}'s verdict"
            )
            return self._result(None, None, None, self._span() + why + self.caveat, decided=False)
        c = culprits[0]
        return self._commits(c, good_m["commits"][c], bad_m["commits"][c])

    def _commits(self, c: str, good_commit: str, bad_commit: str) -> int:
        from rig.runtimes.from_source.cache import builds_dir
        from rig.runtimes.from_source.sources import Sources, first_parent

        sources = Sources(self.spec.sources)
        mirror = sources.mirror(c, builds_dir() / "mirrors", _quiet)
        commits = first_parent(mirror, good_commit, bad_commit)
        if not commits:
            return self._result(c, bad_commit, None, f"{c} has no commit between the two releases", decided=False)
        subjects = dict(commits)
        # the last is the bad release's own commit of c: its hybrid was the component step
        lo, hi = -1, len(commits) - 1
        skipped: set[int] = set()
        self.bar.total = len(self.steps) + math.ceil(math.log2(max(2, len(commits))))
        while True:
            left = [i for i in range(lo + 1, hi) if i not in skipped]
            if not left:
                break
            mid = left[len(left) // 2]
            sha = commits[mid][0]
            step = self._step("commit", None, c, sha, subjects[sha])
            self._record(step)
            if step.judged == "bad":
                hi = mid
            elif step.judged == "good":
                lo = mid
            else:
                skipped.add(mid)
        first, subject = commits[hi]
        between = [commits[i][0][:8] for i in range(lo + 1, hi)]
        if between:  # skipped steps left a range
            why = (
                f"the change is one of {', '.join(between)} or {first[:8]} (steps between could not be judged: "
                "a build failed or the cycles were mixed)"
            )
            return self._result(c, first, subject, why, decided=False)
        walked = f"{len(commits)} commit(s) of {c} between {self.base} and {self.top}{self.caveat}"
        return self._result(c, first, subject, self._span() + walked, decided=True)

    def _span(self) -> str:
        """Where the releases between narrowed it, said first; empty where none lay between."""
        s = self.spec
        if (self.base, self.top) == (s.good, s.bad):
            return ""
        left = f" ({', '.join(self.undecided)} could not be judged)" if self.undecided else ""
        return f"between releases {self.base} and {self.top} (of {s.good} to {s.bad}){left}: "

    def _release_judged(self, version: str) -> str:
        """A release between the two, built where it is not, its cell run and judged."""
        try:
            self._release(version)
        except RigError as e:
            step = Step("release", f"built-{version}", None, None, None, {}, "failed", None, f"build failed: {e}")
            self._keep(f"built-{version}", step, time.monotonic())
        else:
            step = self._step("release", f"built-{version}", None, None, None)
        self._record(step)
        return step.judged

    # ------------------------------------------------------------------ steps

    def _release(self, version: str) -> dict:
        """The release's manifest, built first where it is not (from the same sources)."""
        from rig.runtimes.from_source import Request, build, built_root, is_built, manifest

        if is_built(built_root(version)):
            return manifest(built_root(version))
        self.out(f"building {version} (not built here yet; log under <cache>/builds/{version}.log)")
        return build(Request(version=version, sources=self.spec.sources, jobs=self.spec.jobs), out=_quiet)

    def _hybrid(self, component: str, commit: str) -> Step:
        step = self._step("component", None, component, commit, None)
        self._record(step)
        return step

    def _step(
        self, kind: str, runtime: str | None, component: str | None, commit: str | None, subject, judge: bool = True
    ) -> Step:
        """A step: the runtime built where it is a variant, the cell run on it, judged (resumed
        from the state file where it was run before)."""
        on = "" if self.base == self.spec.good else f"{self.base}+"  # a hybrid of narrowed releases: its own key
        key = runtime or f"{on}{component}@{commit}"
        if key in self.done:
            return Step(**self.done[key])
        what = runtime or f"{self.base} with {component} at {str(commit)[:8]}"
        self.bar.start(f"{kind}: {what}")
        t0 = time.monotonic()
        if runtime is None:
            from rig.runtimes.from_source import Request, build

            try:
                m = build(
                    Request(
                        version=self.base,
                        sources=self.spec.sources,
                        refs={str(component): str(commit)},
                        jobs=self.spec.jobs,
                    ),
                    out=_quiet,
                    progress=False,
                )
            except RigError as e:
                step = Step(kind, None, component, commit, subject, {}, "failed", None, f"build failed: {e}")
                self._keep(key, step, t0)
                return step
            runtime = f"built-{m['label']}"
        counts, run_id = self._cell(runtime, self.spec.cycles)
        judged = self._judge(counts) if judge else kind
        if judged == "mixed" and self.spec.race_cycles:  # a race: more cycles before it is skipped
            more, run_id = self._cell(runtime, self.spec.race_cycles)
            counts = dict(collections.Counter(counts) + collections.Counter(more))
            judged = self._judge(counts, race=True)
        step = Step(kind, runtime, component, commit, subject, counts, judged, run_id)
        self._keep(key, step, t0)
        return step

    def _cell(self, runtime: str, cycles: int) -> tuple[dict[str, int], str | None]:
        from rig.contract import verdicts
        from rig.parent import config
        from rig.workflows import soak

        cfg = config.load(None, _overrides(self.spec, runtime, cycles))
        allowed = tuple(verdicts.OUTCOMES) + tuple(verdicts.LOAD_OUTCOMES) + tuple(verdicts.GROWTH_OUTCOMES)
        _status, tally, run_id, _ = soak.execute(cfg, "cycle", allowed=allowed, log=_quiet)
        return dict(collections.Counter(r.outcome for r in tally.rows)), run_id

    def _judge(self, counts: dict[str, int], race: bool = False) -> str:
        """``bad`` where the cycles gave a verdict only the bad release gives and none only the
        good one gives; ``good`` the other way; ``mixed`` otherwise. In a race (``race``: the
        cycles were run again), the side with more of its own verdicts wins if by two to one."""
        if self._set_judge(counts) != "mixed" or not race:
            return self._set_judge(counts)
        bad = sum(n for v, n in counts.items() if v in self.bad_set - self.good_set)
        good = sum(n for v, n in counts.items() if v in self.good_set - self.bad_set)
        return "bad" if bad >= 2 * max(1, good) else "good" if good >= 2 * max(1, bad) else "mixed"

    def _set_judge(self, counts: dict[str, int]) -> str:
        seen = set(counts)
        only_bad, only_good = self.bad_set - self.good_set, self.good_set - self.bad_set
        if seen & only_bad and not seen & only_good:
            return "bad"
        if seen & only_good and not seen & only_bad:
            return "good"
        return "mixed"  # both sides' verdicts, or only verdicts both give

    def _keep(self, key: str, step: Step, t0: float) -> None:
        self.done[key] = dataclasses.asdict(step)
        self.state_file.write_text(json.dumps({"spec": dataclasses.asdict(self.spec), "steps": self.done}, indent=1))
        self.bar.finish(f"{step.words()} -> {step.judged} ({time.monotonic() - t0:.0f} s)")

    # ------------------------------------------------------------------ records

    def _row(self, step: Step, n: int, detail: str | None = None):
        from rig.contract.rows import now_iso
        from rig.contract.table_rows import BisectRow

        s = self.spec
        return BisectRow(
            run_id=s.id,
            step=n,
            kind=step.kind,
            scenario=s.scenario,
            control=s.control,
            shape=s.shape,
            engine=s.engine,
            good=s.good,
            bad=s.bad,
            component=step.component,
            commit=step.commit,
            subject=step.subject,
            runtime=step.runtime,
            cycles=sum(step.counts.values()),
            verdicts=step.words() if step.counts else None,
            judged=step.judged,
            cell_run_id=step.run_id,
            detail=detail or step.detail,
            started_at=now_iso(),
        )

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        n = len(self.steps) - 1
        self.store.write("bisect", [self._row(step, n)], self.spec.bad, f"s{n:03d}")

    def _result(self, component, commit, subject, why: str, decided: bool) -> int:
        s = self.spec
        verdict = "bad" if decided else "mixed"
        result = Step("result", None, component, commit, subject, {}, verdict, None, why)
        self._record(result)
        self.bar.close()
        cell = f"{s.scenario}{' (control)' if s.control else ''} on {s.engine}"
        lines = [f"bisect {s.id}: {cell}: {self.steps[0].words()} on {s.good}, {self.steps[1].words()} on {s.bad}"]
        if decided:
            prs = ", ".join(f"#{n}" for n in re.findall(r"\(#(\d+)\)", subject or "")) or "no PR named"
            lines.append(f"first commit with {s.bad}'s verdict: {component} {str(commit)[:8]} {subject!r} ({prs})")
            lines.append(why)
        else:
            lines.append(f"not decided: {why}")
        lines.append("| step | kind | component | commit | verdicts | judged |")
        lines.append("|---|---|---|---|---|---|")
        for i, st in enumerate(self.steps[:-1]):
            lines.append(
                f"| {i} | {st.kind} | {st.component or '-'} | {(st.commit or '-')[:8]} | {st.words()} | "
                f"{st.judged}{' (' + st.detail + ')' if st.detail else ''} |"
            )
        lines.append(f"stored: {s.results} (table bisect, run_id {s.id}); steps kept in {self.state_file}")
        for line in lines:
            self.out(line)
        return Exit.OK if decided else Exit.FAILED


def _components() -> tuple[str, ...]:
    from rig.runtimes.from_source import releases

    return tuple(releases.COMPONENTS)


def _quiet(_line: str) -> None:
    pass
