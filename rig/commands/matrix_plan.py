"""Planning `rig matrix`'s cells: its lists parsed (runtimes, engines, retention, scenarios), the
plan of runtime x engine x retention (or scenario), and each cell's command line. Pure: nothing
here runs a cell (``rig.commands.matrix`` runs them and tables them)."""

from __future__ import annotations

import re
import shlex

from rig.config import ENGINES, RETAIN
from rig.errors import RigError

# Options of `rig soak` the matrix sets per cell or has no use for (each cell is a whole soak).
_OWN = {"runtime", "engine", "retain", "skip_ok", "locust_web_port", "scenario", "control"}


def _list(text: str, what: str) -> list[str]:
    items = [x.strip() for x in (text or "").split(",") if x.strip()]
    if not items:
        raise RigError(f"--{what} is a comma-separated list (got {text!r})")
    return list(dict.fromkeys(items))


def parse_retain(text: str) -> list[str]:
    items = _list(text, "retain")
    if items == ["all"]:
        return list(RETAIN)
    bad = [x for x in items if x not in RETAIN]
    if bad:
        raise RigError(f"unknown retention polic{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)}: choose from "
                       f"{', '.join(RETAIN)} or all")
    return items


def parse_scenarios(text: str) -> list:
    """The scenarios to run (``rig.scenarios.Scenario``s), in the registry's order for ``all``."""
    from rig import scenarios

    items = _list(text, "scenarios")
    if items == ["all"]:
        return list(scenarios.SCENARIOS.values())
    return [scenarios.get(x) for x in items]


def scenario_cells(scens: list, plan: list[dict]) -> list[dict]:
    """The scenario axis over the plan (``_plan``): per scenario, then its control, one cell per
    runtime and engine, in that order. A cell is a row: ``scenario``, ``control``, ``runtime``,
    ``triton_version``, ``engine``, ``why`` (why this engine), ``expected`` (the verdicts known
    there, or None), ``growth`` (the growth verdict expected); a scenario not measured through an engine is a row 'skipped' that says so."""
    cells = []
    for s in scens:
        for control in (False, True) if s.has_control else (False,):
            for p in plan:
                for engine, why in p["engines"]:
                    cell = {"scenario": s.name, "control": control, "runtime": p["spec"],
                            "triton_version": p["triton"], "engine": engine, "why": why,
                            "expected": s.control if control else s.expected_for(engine, p["triton"]),
                            "growth": "ok" if control else s.growth}
                    if engine not in s.engines:
                        cell.update(status="skipped", reason=f"scenario {s.name} runs over "
                                    f"{', '.join(s.engines)} only, not {engine}")
                    cells.append(cell)
    return cells


def scenario_argv(base: list[str], cell: dict, cycles: int, results: str, load: tuple[str, ...]) -> list[str]:
    """`rig soak` words of a scenario cell: its verdicts the only ones allowed, its growth verdict
    among them (every verdict where none is known, to record them); leaks allowed where the fault is on (a stop that waits out
    exit_timeout leaves the stubs the rig kills: the scenario's, judged by its verdicts), never
    for a control, which must be clean."""
    from rig.verdicts import GROWTH_OUTCOMES, LOAD_OUTCOMES, OUTCOMES

    want = cell["expected"]
    growth = (cell["growth"],) if cell.get("growth") not in (None, "ok") else ()  # ok: the soak's default
    allowed = (*want, *growth) if want is not None else (*OUTCOMES, *LOAD_OUTCOMES, *GROWTH_OUTCOMES)
    argv = ["soak", *base, *load, "--runtime", cell["runtime"], "--engine", cell["engine"],
            "--scenario", cell["scenario"], *(["--control"] if cell["control"] else []),
            "--cycles", str(cycles), "--results", results, "--allow-outcomes", ",".join(allowed)]
    if not cell["control"] and "--allow-leaks" not in base:
        argv.append("--allow-leaks")
    return argv


def parse_engines(text: str) -> list[str]:
    items = _list(text, "engines")
    bad = [x for x in items if x not in ENGINES]
    if bad:
        raise RigError(f"unknown engine(s) {', '.join(bad)}: choose from {', '.join(ENGINES)}")
    return items


def _version_key(v: str):
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.\-]", v))


def parse_runtimes(text: str, installed: list[str], known: dict[str, str]) -> list[str]:
    """The runtimes to run, in order: ``all`` expands to the installed embedded ones; a version
    neither installed nor known to bundle a core is refused (``rig runtime install`` it first)."""
    out: list[str] = []
    for item in _list(text, "runtimes"):
        if item == "all":
            if not installed:
                raise RigError("--runtimes all: no embedded runtime is installed here (rig runtime install)")
            out.extend(sorted(installed, key=_version_key))
            continue
        v = item[len("embedded-"):] if item.startswith("embedded-") else item
        if v == "embedded":
            from rig.runtime import DEFAULT_EMBEDDED

            v = DEFAULT_EMBEDDED
        if v != "container" and v not in installed and v not in known:
            raise RigError(f"unknown runtime {item!r}: not installed here, and no nvidia-pytriton release known "
                           f"to the rig (known: {', '.join(known)}; `rig runtime install {shlex.quote(v)}` to try it anyway)")
        out.append(v)
    return list(dict.fromkeys(out))


def passthrough(args, skip: tuple[str, ...] = ("allow_outcomes", "results", "cycles")) -> list[str]:
    """The soak options given to the matrix, as command-line words for each cell."""
    words: list[str] = []
    for action in args.soak_actions:
        if action.dest in skip or action.dest in _OWN:
            continue
        value = getattr(args, action.dest, None)
        if value is None or value is False:
            continue
        opt = action.option_strings[0]
        words += [opt] if action.nargs == 0 else [opt, str(value)]
    return words


def cell_argv(base: list[str], runtime: str, engine: str, retain: str, cycles: int, results: str,
              allowed: tuple[str, ...]) -> list[str]:
    return ["soak", *base, "--runtime", runtime, "--engine", engine, "--retain", retain, "--cycles", str(cycles),
            "--results", results, "--allow-outcomes", ",".join(allowed)]


def _plan(specs: list[str], engines: list[str], retains: list[str]) -> list[dict]:
    """Per runtime: the engines that run over it (name, why) and the rows of those that cannot."""
    from rig import engines as eng
    from rig import runtime

    plan = []
    for spec in specs:
        entry = {"spec": spec, "triton": runtime.PYTRITON_CORE.get(spec, "-"), "engines": [], "skipped": []}
        plan.append(entry)

        def skip(engine, why):
            entry["skipped"].append({"runtime": spec, "triton_version": entry["triton"], "engine": engine,
                                     "retain": ",".join(retains), "status": "skipped", "reason": why})
        try:
            rt = runtime.resolve(spec, auto_install=False)
        except RigError as e:
            skip(",".join(engines), str(e))
            continue
        entry["triton"] = rt.triton_version
        chosen: dict[str, str] = {}
        for asked in engines:
            if asked == "tritonserver":  # the bindings over this core, asked in a child process
                ok, why = eng.official_probe(rt)
                if ok:
                    chosen.setdefault("tritonserver", f"asked for: {why}")
                else:
                    skip(asked, why)
                continue
            try:
                name, why = eng.select(asked, rt)
            except RigError as e:
                skip(asked, str(e))
                continue
            chosen.setdefault(name, why)
        entry["engines"] = list(chosen.items())
    return plan
