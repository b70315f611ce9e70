"""What `rig bisect` does (its command: ``rig.commands.bisect``): where a conformance cell changed
between two releases, by which component (or two together, or several changes in turn) and which
commits.

Given a cell (a scenario, its control or not, a shape, an engine) and two releases that give it
different signatures (``rig.workflows.bisect_judge``: each cycle's lifecycle verdict, its load verdict
where the releases' differ, the readiness it probed where the scenario probes: what the
conformance table tells apart), it builds hybrids, the good release with components taken from the
bad (``rig.runtimes.from_source.identity``: each a variant of its own), and runs the cell on each;
``rig.workflows.bisect_plan`` reads them: the one component whose hybrid gives the new signatures,
the pair that gives them where no component alone does, or the changes in turn where a hybrid
gives a third signature. It then bisects each named component's first-parent commits between the
two releases, building the good release with the component at each step's commit and the
components held beside it at the bad release's (the compiler cache keeps a step short: one
component's files compile again).

Every step is stored (the table ``bisect``, one row a step and one per commit found:
``rig.contract.table_rows.BisectRow``) and kept in the bisection's work folder (``state.json``,
each step under its build: the base and every ref taken), so an interrupted bisection run again
with the same cell and releases resumes where it stopped; builds are cached by their identity
anyway. A step whose build fails, or whose cycles give both sides' signatures more than once, is
skipped (as ``git bisect skip``) and said: the result then names the range it could not split.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable

from rig.common.errors import Exit, RigError
from rig.workflows import bisect_judge as judging
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
    runner: str | None = None  # a command each step's cell runs through (where the API's bindings load)
    python: str | None = None  # the interpreter the builds' stubs and bindings are for (the runner's)

    @property
    def id(self) -> str:
        """Stable for the same cell and releases: the id an interrupted bisection resumes under."""
        key = json.dumps([self.scenario, self.control, self.shape, self.engine, self.good, self.bad])
        return "b" + hashlib.sha256(key.encode()).hexdigest()[:11]


@dataclasses.dataclass
class Step:
    """One step's signatures, judged against the two sides a change lies between."""

    kind: str  # release | component | pair | together | commit | result
    runtime: str | None
    component: str | None
    commit: str | None
    subject: str | None
    counts: dict[str, int]  # signature -> cycles (``bisect_judge.signature``)
    judged: str  # good | bad | other | mixed | failed (a result: bad, mixed, refused)
    run_id: str | None
    detail: str | None = None
    held: dict[str, str] = dataclasses.field(default_factory=dict)  # other components at the top's commits
    raw: list = dataclasses.field(default_factory=list)  # each cycle's [lifecycle, load, readiness]
    cause: str | None = None  # a result: one | together | apart
    effect: str | None = None  # a result of several changes (apart): what its commit did, before -> after

    def words(self) -> str:
        return judging.words(self.counts)


@dataclasses.dataclass
class Cause:
    """One commit a decided move named (or the range it could not split)."""

    component: str
    commit: str | None
    subject: str | None
    held: dict[str, str]
    moved: str
    decided: bool
    why: str = ""


def check_cell(spec: BisectSpec) -> None:
    """The cell as `rig soak` would check it (an unknown scenario, a shape it does not run in, a
    control it has not: one line), before anything is built."""
    from rig.parent import config

    config.load(None, _overrides(spec, "auto", 1))
    if spec.runner:
        _probe_runner(spec)
    elif spec.engine == "tritonserver":
        from rig.parent.engines import official_probe

        ok, why = official_probe(None, timeout_s=60)
        if not ok:
            raise RigError(
                f"the official API's tritonserver bindings do not load here ({why}): run each step's cell where "
                "they do, with --runner (e.g. --runner 'bash tests/sandbox/official.sh --run' --python its CPython "
                "3.12), or bisect through --engine capi where the change shows there too"
            )


def _probe_runner(spec: BisectSpec) -> None:
    """The runner runs the rig (and, for the official API, imports its bindings) before anything is
    built: one line where it does not."""
    import shlex
    import subprocess

    check = "import rig"
    if spec.engine == "tritonserver":  # its bindings over the runner's default core, as rig doctor asks
        check = (
            "from rig.parent.engines import official_probe; ok, why = official_probe(None, timeout_s=120); "
            "print(why); raise SystemExit(0 if ok else 1)"
        )
    try:
        p = subprocess.run(
            [*shlex.split(str(spec.runner)), "python", "-c", check],
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RigError(f"--runner {spec.runner!r} does not run: {e}") from None
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["no output"])[-1]
        what = "the official bindings do not load there" if spec.engine == "tritonserver" else "the rig does not import"
        raise RigError(f"--runner {spec.runner!r} cannot run the cell ({what}: {last})")


def _overrides(spec: BisectSpec, runtime: str, cycles: int) -> dict:
    from pathlib import Path

    from rig.workflows.matrix_plan import SCENARIO_EXIT_TIMEOUT, SCENARIO_REQUEST_TIMEOUT

    return {
        "scenario": spec.scenario,
        "control": spec.control,
        "model_shape": spec.shape,
        "engine": spec.engine,
        "runtime": runtime,
        "cycles": cycles,
        # a runner's cell writes to the same store: by a path it sees as this one does
        "results": str(Path(spec.results).resolve()) if spec.runner and "://" not in spec.results else spec.results,
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
        self.parts: tuple[str, ...] | None = None  # what a cycle is judged by: set by the two releases
        self.good_set: set[str] = set()
        self.bad_set: set[str] = set()
        self.bar = StepBar(sys.stdout)
        self.base, self.top = spec.good, spec.bad  # the two releases the hybrids stand between
        self.base_m: dict = {}
        self.top_m: dict = {}
        self.undecided: list[str] = []  # releases between them that could not be judged
        self.thirds: list[str] = []  # releases between them that gave a third verdict

    # ------------------------------------------------------------------ the walk

    def run(self) -> int:
        s = self.spec
        cell = f"{s.scenario}{' (control)' if s.control else ''}, shape {s.shape or 'its first'}, {s.engine}"
        self.out(f"bisect {s.id}: {cell}, between {s.good} and {s.bad}; work folder {self.work}")
        if self.done:
            self.out(f"resuming: {len(self.done)} step(s) done before")
        self.base_m = self._release(s.good)
        self.top_m = self._release(s.bad)
        g = self._step("release", f"built-{s.good}")
        b = self._step("release", f"built-{s.bad}")
        self.parts = judging.parts_for(g.raw, b.raw)
        for st in (g, b):
            st.counts = judging.counts(st.raw, self.parts)
        self.good_set, self.bad_set = set(g.counts), set(b.counts)
        if self.good_set == self.bad_set:
            raise RigError(
                f"the cell gives {g.words()} on {s.good} and {b.words()} on {s.bad} (judged by its "
                f"{', '.join(self.parts)}): no verdict tells them apart, nothing to bisect (more --cycles, or "
                "another cell)"
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
            self.base_m, self.top_m = self._release(self.base), self._release(self.top)
        moved = [c for c in _components() if self.base_m["commits"].get(c) != self.top_m["commits"].get(c)]
        self.bar.total = len(self.steps) + len(moved)
        from rig.workflows.bisect_plan import plan

        p = plan(moved, self._seen, dict.fromkeys(self.good_set, 1), dict.fromkeys(self.bad_set, 1))
        notes = "".join(f"; {n}" for n in p.notes)
        if not p.decided:
            moves = "".join(
                f"; {' and '.join(m.components)}{self._on(m.held)} moved it: {_set_words(m.before)} -> "
                f"{_set_words(m.after)}"
                for m in p.moves
            )
            return self._results([], self._span() + p.why + moves + notes)
        causes: list[tuple[Cause, str]] = []
        for m in p.moves:
            kind = "together" if len(m.components) > 1 else "one" if len(p.moves) == 1 else "apart"
            for c in m.components:
                partner = [o for o in m.components if o != c]
                held = {h: self.top_m["commits"][h] for h in (*m.held, *partner)}
                before = m.before if not partner else m.before | self._sides_of(held)
                causes.append((self._walk(c, held, before, m.after), kind))
        return self._results(causes, self._span().rstrip(": ") + notes)

    def _sides_of(self, held: dict[str, str]) -> frozenset[str]:
        """The signatures the base gave with ``held`` taken from the top (a step the plan ran)."""
        return frozenset(self._step("component", None, held, next(iter(held))).counts)

    def _seen(self, held: frozenset[str], added: tuple[str, ...], before, after):
        """The planner's oracle (``bisect_plan.Oracle``): the hybrid of the base with ``held`` and
        ``added`` taken from the top, built and run (or resumed), judged between ``before`` and ``after``."""
        from rig.workflows.bisect_plan import Seen

        kind = "component" if len(added) == 1 else "pair" if len(added) == 2 else "together"
        refs = {c: self.top_m["commits"][c] for c in (*sorted(held), *added)}
        step = self._hybrid(kind, refs, added[0], sides=(before, after))
        if step.judged == "failed":
            return None
        return Seen(step.counts, race=len(step.raw) > self.spec.cycles)

    def _walk(self, c: str, held: dict[str, str], before, after) -> Cause:
        """``c``'s first-parent commits between the base's and the top's, bisected with ``held`` at the
        top's commits: the first whose signatures are ``after``'s, not ``before``'s."""
        from rig.runtimes.from_source.cache import builds_dir
        from rig.runtimes.from_source.sources import Sources, first_parent
        from rig.workflows.bisect_span import narrow

        moved = f"{_set_words(before)} -> {_set_words(after)}"
        top_commit = self.top_m["commits"][c]
        sources = Sources(self.spec.sources)
        mirror = sources.mirror(c, builds_dir() / "mirrors", _quiet)
        commits = first_parent(mirror, self.base_m["commits"][c], top_commit)
        if not commits:
            return Cause(c, top_commit, None, held, moved, False, f"{c} has no commit between the two releases")
        subjects = dict(commits)
        # the last is the top's own commit of c: its hybrid was the plan's step
        self.bar.total = len(self.steps) + math.ceil(math.log2(max(2, len(commits))))

        def judge(sha: str) -> str:
            step = self._hybrid("commit", {**held, c: sha}, c, subjects[sha], sides=(before, after))
            return step.judged

        _lo, hi, between = narrow([sha for sha, _ in commits[:-1]], judge)
        first = hi or top_commit
        if between:  # skipped steps left a range
            why = (
                f"the change is one of {', '.join(x[:8] for x in between)} or {first[:8]} (steps between could not "
                "be judged: a build failed or the cycles were mixed)"
            )
            return Cause(c, first, subjects[first], held, moved, False, why)
        walked = f"{len(commits)} commit(s) of {c} between {self.base} and {self.top}{self._on(tuple(held))}"
        return Cause(c, first, subjects[first], held, moved, True, walked)

    def _span(self) -> str:
        """Where the releases between narrowed it, said first; empty where none lay between."""
        s = self.spec
        thirds = "".join(f"; {t} gave a third verdict: more than one change lies between" for t in self.thirds)
        if (self.base, self.top) == (s.good, s.bad):
            return thirds.removeprefix("; ") + (": " if thirds else "")
        left = f" ({', '.join(self.undecided)} could not be judged)" if self.undecided else ""
        return f"between releases {self.base} and {self.top} (of {s.good} to {s.bad}){left}{thirds}: "

    def _on(self, held) -> str:
        return f" (with {', '.join(sorted(held))} from {self.top})" if held else ""

    def _release_judged(self, version: str) -> str:
        """A release between the two, built where it is not, its cell run and judged."""
        try:
            self._release(version)
        except RigError as e:
            step = Step("release", f"built-{version}", None, None, None, {}, "failed", None, f"build failed: {e}")
            self._keep(f"built-{version}", step, time.monotonic())
        else:
            step = self._step("release", f"built-{version}", sides=(frozenset(self.good_set), frozenset(self.bad_set)))
        if step.judged == "other":
            self.thirds.append(f"{version} ({step.words()})")
        self._record(step)
        return step.judged

    # ------------------------------------------------------------------ steps

    def _release(self, version: str) -> dict:
        """The release's manifest, built first where it is not (from the same sources)."""
        from rig.runtimes.from_source import Request, build, built_root, is_built, manifest
        from rig.runtimes.from_source.cache import python_tag

        if is_built(built_root(version), python_tag(self.spec.python)):
            return manifest(built_root(version))
        self.out(f"building {version} (not built here yet; log under <cache>/builds/{version}.log)")
        req = Request(version=version, sources=self.spec.sources, jobs=self.spec.jobs, python=self.spec.python)
        return build(req, out=_quiet)

    def _hybrid(self, kind: str, refs: dict[str, str], component: str | None, subject=None, sides=None) -> Step:
        """The base with ``refs`` (component -> commit) taken from elsewhere, run and recorded;
        ``component``: the one the step is about (the others are held)."""
        component = component or next(iter(refs))
        step = self._step(kind, None, refs, component, subject, sides)
        self._record(step)
        return step

    def _step(self, kind: str, runtime: str | None, refs=None, component=None, subject=None, sides=None) -> Step:
        """A step: the runtime built where it is a variant, the cell run on it, judged between
        ``sides`` (before, after; None: not judged), resumed from the state file where it was run
        before. Its key is its build: the release's runtime, or the base and every ref taken
        (``core@<sha>+python_backend@<sha>``), whatever kind of step asked it."""
        refs = refs or {}
        on = "" if self.base == self.spec.good else f"{self.base}+"  # a hybrid of narrowed releases: its own key
        key = runtime or on + "+".join(f"{c}@{refs[c]}" for c in sorted(refs))
        commit = refs.get(component) if component else None
        held = {c: r for c, r in refs.items() if c != component}
        what = runtime or f"{self.base} with {component} at {str(commit)[:8]}" + "".join(
            f", {c} at {r[:8]}" for c, r in sorted(held.items())
        )
        t0 = time.monotonic()
        step = self._resumed(key, kind, component, commit, subject, held)
        fresh = step is None
        if step is None:
            self.bar.start(f"{kind}: {what}")
            if runtime is None:
                from rig.runtimes.from_source import Request, build

                try:
                    m = build(
                        Request(
                            version=self.base,
                            sources=self.spec.sources,
                            refs=dict(refs),
                            jobs=self.spec.jobs,
                            python=self.spec.python,
                        ),
                        out=_quiet,
                        progress=False,
                    )
                except RigError as e:
                    step = Step(kind, None, component, commit, subject, {}, "failed", None, f"build failed: {e}", held)
                    self._keep(key, step, t0)
                    return step
                runtime = f"built-{m['label']}"
            raw, run_id = self._cell(runtime, self.spec.cycles)
            step = Step(kind, runtime, component, commit, subject, {}, kind, run_id, None, held, raw)
        elif step.judged == "failed":
            return step
        parts = self.parts or judging.parts_for(step.raw, step.raw)
        step.counts = judging.counts(step.raw, parts)
        if sides is not None:
            race = len(step.raw) > self.spec.cycles
            step.judged = judging.reading(step.counts, sides[0], sides[1], race=race)
            if step.judged == "mixed" and self.spec.race_cycles and not race:  # a race: more cycles first
                if not fresh:
                    self.bar.start(f"{kind}: {what} (its race: more cycles)")
                more, step.run_id = self._cell(str(step.runtime), self.spec.race_cycles)
                step.raw = step.raw + more
                step.counts = judging.counts(step.raw, parts)
                step.judged = judging.reading(step.counts, sides[0], sides[1], race=True)
            step.detail = "neither side's signatures" if step.judged == "other" else step.detail
        if fresh or self.done[key].get("raw") != step.raw:
            self._keep(key, step, t0)
        return step

    def _resumed(self, key, kind, component, commit, subject, held) -> Step | None:
        """The step kept under ``key`` (None: none, or one an older bisection kept with its
        lifecycle verdicts only, where more parts are judged now: run again)."""
        if key not in self.done:
            return None
        kept = dict(self.done[key])
        raw = kept.get("raw") or []
        if not raw and kept.get("judged") != "failed":
            if self.parts is None or self.parts != (judging.LIFECYCLE,):
                return None
            raw = [[v, judging.NOT_MEASURED, None] for v, n in kept["counts"].items() for _ in range(n)]
        kept.update(kind=kind, component=component, commit=commit, subject=subject, held=held, raw=raw)
        return Step(**{f.name: kept[f.name] for f in dataclasses.fields(Step) if f.name in kept})

    def _cell(self, runtime: str, cycles: int) -> tuple[list, str | None]:
        from rig.contract import verdicts
        from rig.parent import config
        from rig.workflows import soak

        cfg = config.load(None, _overrides(self.spec, runtime, cycles))
        allowed = tuple(verdicts.OUTCOMES) + tuple(verdicts.LOAD_OUTCOMES) + tuple(verdicts.GROWTH_OUTCOMES)
        if self.spec.runner:
            return self._cell_through(cfg, allowed, runtime)
        _status, tally, run_id, _ = soak.execute(cfg, "cycle", allowed=allowed, log=_quiet)
        return [judging.raw_cycle(r) for r in tally.rows], run_id

    def _cell_through(self, cfg, allowed: tuple[str, ...], runtime: str) -> tuple[list, str | None]:
        """The cell run as `rig cell` through the runner (the sandbox where the official bindings
        load), its spec written in the work folder (which the runner sees at the same path), its
        cycles read back from the store under the run id named here."""
        import shlex
        import subprocess

        from rig.contract.cell import CellSpec
        from rig.parent.orchestrator import new_run_id

        run_id = new_run_id()
        spec = CellSpec("soak", cfg.to_toml(), run_id, label=runtime, allowed=allowed, results=str(cfg.results))
        path = (self.work / f"cell-{run_id}.json").resolve()
        path.write_text(spec.to_json())
        argv = [*shlex.split(str(self.spec.runner)), "rig", "cell", "--spec", str(path), "--result-fd", "-1"]
        limit = 900 + cfg.cycles * (cfg.exit_timeout + cfg.request_timeout + 120)
        try:
            p = subprocess.run(
                argv, check=False, capture_output=True, text=True, timeout=limit, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise RigError(f"the cell on {runtime} through --runner ran past {limit:.0f} s (run {run_id})") from None
        rows = self.store.read("cycles", run_id=run_id)
        if rows is None or len(rows) == 0:
            last = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["no output"])[-1]
            raise RigError(f"the cell on {runtime} through --runner stored no cycle (exit {p.returncode}): {last}")
        rows = rows.sort_values("cycle") if "cycle" in rows else rows
        return [judging.raw_cycle(r) for r in rows.to_dict("records")], run_id

    def _judge(self, counts: dict[str, int], race: bool = False) -> str:
        """A step's signatures judged between the two releases' (``bisect_judge.judge``)."""
        return judging.judge(counts, self.good_set, self.bad_set, race)

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
            held=", ".join(f"{c}@{r}" for c, r in sorted(step.held.items())) or None,
            cause=step.cause,
            effect=step.effect,
        )

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        n = len(self.steps) - 1
        self.store.write("bisect", [self._row(step, n)], self.spec.bad, f"s{n:03d}")

    def refuse(self, why: str) -> int:
        """A window that cannot be bisected, said on a result row (judged ``refused``) before
        anything is built."""
        self._record(Step("result", None, None, None, None, {}, "refused", None, why))
        self.bar.close()
        self.out(f"bisect {self.spec.id}: refused: {why}")
        return Exit.FAILED

    def _results(self, causes: list[tuple[Cause, str]], why: str) -> int:
        """The result rows, one per commit found (``cause``: one, together, apart; all judged bad
        where every one was decided, else mixed), or one saying why nothing was decided; and the
        steps said."""
        s = self.spec
        decided = bool(causes) and all(c.decided for c, _ in causes)
        verdict = "bad" if decided else "mixed"
        if not causes:
            self._record(Step("result", None, None, None, None, {}, "mixed", None, why))
        for c, kind in causes:
            moved = f"it moved {c.moved}" if kind != "apart" else ""  # apart: said as the row's effect
            detail = "; ".join(x for x in (c.why, moved, why) if x)
            self._record(
                Step(
                    "result",
                    None,
                    c.component,
                    c.commit,
                    c.subject,
                    {},
                    verdict,
                    None,
                    detail,
                    c.held,
                    [],
                    kind,
                    c.moved if kind == "apart" else None,
                )
            )
        self.bar.close()
        cell = f"{s.scenario}{' (control)' if s.control else ''} on {s.engine}"
        lines = [f"bisect {s.id}: {cell}: {self.steps[0].words()} on {s.good}, {self.steps[1].words()} on {s.bad}"]
        lines += _said(causes, decided, why, s.bad, self.base)
        lines.append("| step | kind | component | commit | held at the newer release | verdicts | judged |")
        lines.append("|---|---|---|---|---|---|---|")
        for i, st in enumerate(self.steps[: len(self.steps) - max(1, len(causes))]):
            held = ", ".join(f"{c}@{r[:8]}" for c, r in sorted(st.held.items())) or "-"
            lines.append(
                f"| {i} | {st.kind} | {st.component or '-'} | {(st.commit or '-')[:8]} | {held} | {st.words()} | "
                f"{st.judged}{' (' + st.detail + ')' if st.detail else ''} |"
            )
        lines.append(f"stored: {s.results} (table bisect, run_id {s.id}); steps kept in {self.state_file}")
        for line in lines:
            self.out(line)
        return Exit.OK if decided else Exit.FAILED


def _said(causes: list[tuple[Cause, str]], decided: bool, why: str, bad: str, base: str) -> list[str]:
    """The result in words: the one commit, the commits needed together, or the changes in turn."""
    if not causes:
        return [f"not decided: {why}"]

    def named(c: Cause) -> str:
        pr = judging.prs(c.subject)
        return f"{c.component} {str(c.commit)[:8]}" + (f" ({pr})" if pr else " (no PR named)")

    head = "" if decided else "not decided: "
    kinds = {k for _, k in causes}
    if kinds == {"one"}:
        c = causes[0][0]
        first = f"first commit with {bad}'s verdict: {c.component} {str(c.commit)[:8]} {c.subject!r}"
        return [head + first + f" ({judging.prs(c.subject) or 'no PR named'})", c.why + (f"; {why}" if why else "")]
    if kinds == {"together"}:
        needs = " and ".join(named(c) for c, _ in causes)
        out = [f"{head}needs {needs}: neither alone gives {bad}'s verdict on {base}"]
    else:
        parts = "; ".join(f"{named(c)}: {c.moved}" for c, _ in causes)
        out = [f"{head}{_count_word(len(causes))} changes: {parts}"]
    out += [f"{c.component}: {c.why}" for c, _ in causes]
    if why:
        out.append(why)
    return out


def _count_word(n: int) -> str:
    return {2: "two", 3: "three", 4: "four"}.get(n, str(n))


def _set_words(sigs) -> str:
    return " | ".join(sorted(sigs)) or "-"


def _components() -> tuple[str, ...]:
    from rig.runtimes.from_source import releases

    return tuple(releases.COMPONENTS)


def _quiet(_line: str) -> None:
    pass
