"""Planning `rig matrix`'s cells: its lists parsed (runtimes, engines, retention, scenarios), the
plan of runtime x engine x retention (or scenario), and each cell's configuration (``cell_config``:
the matrix's base config with the cell's keys). Pure: nothing here runs a cell
(``rig.workflows.matrix_setup`` makes their jobs, ``rig.workflows.matrix_table`` runs them and
tables them)."""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing

from rig.common.errors import RigError
from rig.contract.ngc import embedded_alias
from rig.parent.config import ENGINES, RETAIN
from rig.parent.options import dests
from rig.runtimes.from_source.identity import is_variant

# Options of `rig soak` the matrix sets per cell or has no use for (each cell is a whole soak): those
# the option table offers soak and not matrix (rig.contract.option_table)
# The timeouts of a scenario matrix where none is given (rig.workflows.matrix_setup's, and a bisection's
# cells): each no longer than its verdict needs.
SCENARIO_EXIT_TIMEOUT = 5
SCENARIO_REQUEST_TIMEOUT = 5.0
_OWN = set(dests("soak")) - set(dests("matrix"))


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
        raise RigError(
            f"unknown retention polic{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)}: choose from "
            f"{', '.join(RETAIN)} or all"
        )
    return items


def parse_scenarios(text: str) -> list:
    """The scenarios to run (``rig.scenarios.catalog.Scenario``s), in the registry's order for ``all``."""
    from rig.scenarios import catalog as scenarios

    items = _list(text, "scenarios")
    if items == ["all"]:
        return list(scenarios.SCENARIOS.values())
    return [scenarios.get(x) for x in items]


def parse_shapes(text: str) -> list[str] | None:
    """``--shapes``: all (None: every shape each scenario runs in), first (each scenario's own
    default: ["first"]), or a list of shape names (``rig.scenarios.shapes``); a shape of two parts is
    joined with + in the list (decoupled+instances-2), its name's comma being the list's."""
    from rig.scenarios import shapes

    items = _list(text, "shapes")
    if items in (["all"], ["first"]):
        return None if items == ["all"] else ["first"]
    return [shapes.parse(x.replace("+", ",")).name for x in items]


def scenario_cells(
    scens: list, plan: list[dict], known_path: str | None = None, only_shapes: list[str] | None = None
) -> list[dict]:
    """The scenario axis over the plan (``make_plan``): per scenario, then its control, per model shape
    it runs in (``Scenario.shapes``), one cell per runtime and engine, in that order. A cell is a
    row: ``scenario``, ``control``, ``shape``, ``runtime``, ``triton_version``, ``engine``, ``why``
    (why this engine), ``expected`` (the lifecycle and load verdicts known there: rig.scenarios.known, or
    None: unjudged; a control with none known: its contract, clean), ``growth`` (the growth
    verdict known there); the control of a scenario made from the plain template
    (``Scenario.shared_control``) is the ``template`` scenario's cell, once a shape, runtime and
    engine; a scenario not run through an
    engine is a row 'skipped' that says so."""
    from rig.scenarios import known
    from rig.scenarios.catalog import SCENARIOS, TEMPLATE

    cells, seen = [], set()
    for s in scens:
        for control in (False, True) if s.has_control else (False,):
            wanted = (
                s.shapes[:1]
                if only_shapes == ["first"]
                else [x for x in s.shapes if only_shapes is None or x in only_shapes]
            )
            # a control that is the plain template is the template's cell, once a shape
            name, is_control = (TEMPLATE, False) if control and s.shared_control else (s.name, control)
            for shape in wanted:
                for p in plan:
                    for engine, why in p["engines"]:
                        if (name, is_control, shape, p["spec"], engine) in seen:
                            continue
                        seen.add((name, is_control, shape, p["spec"], engine))
                        scenario = s if name == s.name else SCENARIOS[name]
                        bindings = p.get("bindings") if engine == "tritonserver" else None
                        k = known.expected(scenario, is_control, shape, engine, p["triton"], known_path, bindings)
                        want, growth = (k.verdicts, k.growth) if k else (None, None)
                        cell = {
                            "scenario": name,
                            "control": is_control,
                            "shape": shape,
                            "runtime": p["spec"],
                            "triton_version": p["triton"],
                            "engine": engine,
                            "why": why,
                            "expected": want,
                            "growth": growth,
                        }
                        if name == s.name and engine not in s.engines:  # (the template runs over every one)
                            cell.update(
                                status="skipped",
                                reason=f"scenario {s.name} runs over {', '.join(s.engines)} only, not {engine}",
                            )
                        elif name == s.name and s.needs and p.get("runtime") is not None:
                            _needs(cell, s, p["runtime"])
                        cells.append(cell)
    return cells


def _needs(cell: dict, s, rt) -> None:
    """A scenario whose models need what this core was built without (ensembles, the sequence
    batcher: ``Scenario.needs``) is a row 'skipped' that says so."""
    from rig.scenarios import core_features

    lacks = core_features.missing(rt, s.needs)
    if lacks:
        cell.update(status="skipped", reason=core_features.why_not(s, rt, lacks))


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``K/N``: this node runs shard K (0 <= K < N, a Kubernetes Indexed Job's completion index) of N."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise RigError(
            f"--shard {text!r}: give K/N with 0 <= K < N (K: this node's index from 0, as a "
            "Kubernetes Indexed Job's JOB_COMPLETION_INDEX; N: the number of nodes)"
        )
    return int(m.group(1)), int(m.group(2))


def cell_key(cell: dict) -> str:
    """A cell's identity, the same on every node and in every run of the same matrix."""
    return "|".join(str(cell.get(k)) for k in ("scenario", "control", "shape", "runtime", "engine", "retain"))


def shard_of(key: str, n: int) -> int:
    """The shard a cell belongs to: a stable hash of its identity (the same on every node, whatever
    else the matrix holds), so N nodes given K = 0..N-1 run every cell exactly once."""
    import hashlib

    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % n


def take_shard(cells: list[dict], shard: tuple[int, int] | None) -> list[dict]:
    if shard is None:
        return cells
    k, n = shard
    return [c for c in cells if shard_of(cell_key(c), n) == k]


def scenario_changes(cell: dict, cycles: int, results: str, load: dict) -> dict:
    """The config keys of a scenario cell over the matrix's base config (``cell_config``): its
    scenario, shape and control; every verdict allowed (the matrix judges the cell by its stored
    verdicts against the known ones, rig.analysis.matrix.judge_scenario); leaks allowed where the
    fault is on (a stop that waits out exit_timeout leaves the stubs the rig kills: the
    scenario's, judged by its verdicts), never for a control, which must be clean (unless the
    matrix's own options allow them: the base's); ``load``, the workload it runs under where it
    needs one (``rig.workflows.matrix_setup.SCENARIO_LOAD_KEYS``)."""
    from rig.contract.verdicts import GROWTH_OUTCOMES, LOAD_OUTCOMES, OUTCOMES

    return {
        **load,
        "runtime": cell["runtime"],
        "engine": cell["engine"],
        "scenario": cell["scenario"],
        "model_shape": cell["shape"],
        "control": cell["control"],
        "cycles": cycles,
        "results": results,
        "thresholds.allow_outcomes": ",".join((*OUTCOMES, *LOAD_OUTCOMES, *GROWTH_OUTCOMES)),
        "thresholds.allow_leaks": None if cell["control"] else True,
    }


def plain_changes(cell: dict, cycles: int, results: str, allowed: tuple[str, ...]) -> dict:
    """The config keys of a cell of runtime x engine x retention over the matrix's base config."""
    return {
        "runtime": cell["runtime"],
        "engine": cell["engine"],
        "retain": cell["retain"],
        "cycles": cycles,
        "results": results,
        "thresholds.allow_outcomes": ",".join(allowed),
    }


def cell_config(base, changes: dict):
    """A cell's configuration: ``base`` (a ``RunConfig``) with ``changes`` (``config.derive``),
    validated as the cell will validate it (bad input: one ``RigError`` line, before any cell
    runs), and the TOML text its ``CellSpec`` carries (the config before validation: a scenario
    named, applied once by the cell, as `rig soak --scenario` applies it)."""
    from rig.parent import config

    text = config.derive(base, changes, validate=False).to_toml()
    cfg = config.from_toml_text(text)
    if changes.get("results") is not None:
        cfg = dataclasses.replace(cfg, results=changes["results"])  # as given (the text redacts a URI's credentials)
    return cfg, text


def parse_engines(text: str) -> list[str]:
    items = _list(text, "engines")
    bad = [x for x in items if x not in ENGINES]
    if bad:
        raise RigError(f"unknown engine(s) {', '.join(bad)}: choose from {', '.join(ENGINES)}")
    return items


def _version_key(v: str):
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.\-]", v))


def newest_per_core(known: dict[str, str], installed: list[str]) -> list[str]:
    """One runtime per Triton core, ordered by core: the one installed here where there is one
    (the newest of them), else the newest nvidia-pytriton release that bundles it."""
    by_core: dict[str, list[str]] = {}
    for v, core in known.items():
        by_core.setdefault(core, []).append(v)
    for v in installed:
        if v not in known:
            by_core.setdefault(f"?{v}", []).append(v)
    out = []
    for core, versions in sorted(by_core.items(), key=lambda kv: _version_key(kv[0].lstrip("?"))):  # noqa: B007
        mine = [v for v in versions if v in installed]
        out.append(max(mine or versions, key=_version_key))
    return out


def local_runtimes() -> tuple[list[str], bool]:
    """What ``--runtimes all`` and ``installed`` choose from here: the embedded runtimes installed
    and the current builds (``built-2.67.0``), and whether this is a container with a Triton of its
    own (an NGC image's /opt/tritonserver, or ``$TRITON_HOME``: ``runtime.container_home``)."""
    from rig.parent import runtime

    installed = [r["package_version"] for r in runtime.list_embedded()] + [
        b["name"] for b in runtime.list_built() if b["current"]
    ]
    return installed, runtime.container_home() is not None


def _said(names: list[str], known: dict[str, str]) -> list[str]:
    """Runtimes as their Triton versions (``0.5.10`` -> ``2.48.0``, ``built-2.67.0`` -> ``2.67.0``)."""
    return sorted(dict.fromkeys(known.get(n) or n.removeprefix("built-") for n in names), key=_version_key)


def parse_runtimes(text: str, installed: list[str], known: dict[str, str], container: bool = False) -> list[str]:
    """The runtimes to run, in order: ``all`` is every embedded core (``newest_per_core``: one
    runtime per Triton version, installed first where missing), then every core built here from
    source that no embedded one bundles, then, in a container with a Triton of its own
    (``container``: an NGC image), that core, the one the image exists for; ``installed`` every
    runtime installed or built here (the container's too);
    ``2.67.0`` or ``built-2.67.0`` a built one; a version neither installed nor known to bundle a
    core is refused (``rig runtime install`` or ``rig runtime build`` it first)."""
    out: list[str] = []
    built = [v for v in installed if v.startswith("built-")]
    installed = [v for v in installed if not v.startswith("built-")]
    from rig.parent.runtime import runtime_name

    for item in (runtime_name(i) for i in _list(text, "runtimes")):
        if item == "all":
            embedded = newest_per_core(known, installed)
            out.extend(embedded)
            # then every core built from source that no embedded runtime bundles, oldest first
            cores = {known.get(v) for v in embedded}
            out.extend(
                sorted(
                    # a variant (a patch, another ref) runs where it is named, never in `all`
                    (b for b in built if b[len("built-") :] not in cores and not is_variant(b[len("built-") :])),
                    key=lambda b: _version_key(b[len("built-") :]),
                )
            )
            if container:
                out.append("container")
            continue
        if embedded_alias(item):  # a Triton version only a wheel bundles: that wheel's runtime
            item = embedded_alias(item)
        if item.startswith("built-") or re.fullmatch(r"2\.\d+\.\d+", item) or is_variant(item):
            name = item if item.startswith("built-") else f"built-{item}"
            if name not in built:
                raise RigError(
                    f"runtime {item!r} is not built here (built: {', '.join(built) or 'none'}): "
                    f"rig runtime build {name[len('built-') :]}"
                )
            out.append(name)
            continue
        if item == "installed":
            out.extend(
                sorted(
                    (b for b in built if not is_variant(b[len("built-") :])),
                    key=lambda b: _version_key(b[len("built-") :]),
                )
            )
            if not installed and not built and not container:
                raise RigError(
                    "--runtimes installed: no runtime is installed or built here (rig runtime install, "
                    "rig runtime build)"
                )
            out.extend(sorted(installed, key=_version_key))
            if container:
                out.append("container")
            continue
        v = item.removeprefix("embedded-")
        if v == "embedded":
            from rig.parent.runtime import DEFAULT_EMBEDDED

            v = DEFAULT_EMBEDDED
        if v != "container" and v not in installed and v not in known:
            raise RigError(
                f"unknown runtime {item!r}: say a Triton version, 2.36.0 to 2.51.0 from a PyPI wheel "
                f"(rig runtime install) or 2.51.0 on built here (rig runtime build); installed and built "
                f"here: {', '.join(_said(installed + built, known)) or 'none'}"
            )
        out.append(v)
    return list(dict.fromkeys(out))


def soak_options(args, runtime: str, retain: str | None, cycles: int) -> argparse.Namespace:
    """The soak options the matrix was given, as `rig soak` parses them (its defaults, then each
    option given; no command-line words), with a first cell's runtime, engine and retention, and
    ``cycles`` where neither the options nor a config file set them: what ``run_config`` reads
    the base configuration of every cell from, once."""
    from rig.parent.options import soak_parser

    ns = soak_parser().parse_args([])
    for action in args.soak_actions:
        setattr(ns, action.dest, getattr(args, action.dest, None))
    ns.runtime, ns.engine, ns.retain = runtime, "capi", retain
    if ns.cycles is None and not ns.config:
        ns.cycles = cycles
    return ns


def make_plan(specs: list[str], engines: list[str], retains: list[str]) -> list[dict]:
    """Per runtime: the engines that run over it (name, why) and the rows of those that cannot."""
    from rig.parent import engines as eng
    from rig.parent import runtime

    plan = []
    for spec in specs:
        entry: dict[str, typing.Any] = {
            "spec": spec,
            "triton": runtime.PYTRITON_CORE.get(spec, "-"),
            "engines": [],
            "skipped": [],
        }
        plan.append(entry)

        def skip(engine, why):
            entry["skipped"].append(  # noqa: B023
                {
                    "runtime": spec,  # noqa: B023
                    "triton_version": entry["triton"],  # noqa: B023
                    "engine": engine,
                    "retain": ",".join(retains),
                    "status": "skipped",
                    "reason": why,
                }
            )

        try:
            rt = runtime.resolve(spec, auto_install=False)
        except RigError as e:
            skip(",".join(engines), str(e))
            continue
        entry["triton"] = rt.triton_version
        entry["runtime"] = rt  # what a scenario's models need of its core (scenario_cells)
        chosen: dict[str, str] = {}
        for asked in engines:
            if asked == "tritonserver":  # the bindings over this core, asked in a child process
                ok, why = eng.official_probe(rt)
                if ok:
                    chosen.setdefault("tritonserver", f"asked for: {why}")
                    version, own = runtime.official_bindings(rt)  # the known row of those bindings
                    entry["bindings"] = "own" if own else (version or "")
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
