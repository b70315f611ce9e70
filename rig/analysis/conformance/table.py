"""The conformance table: every lifecycle scenario (and its negative control) on every Triton core,
through each API and in each model shape, its cycles' verdicts judged against the ones it is
known to give (``rig.scenarios.known``: ``rig/scenarios/known_verdicts.csv``).

A *cell* is one (engine, shape, scenario, control, Triton version): its cycles' three verdicts
counted (lifecycle, load, growth), the verdicts most of them gave, stop p50, finalize figures, the
runs it came from, and its judgement: ``as known`` (every cycle gave the known verdicts),
``finding`` (some cycle gave others) or ``unjudged`` (nothing is known for the cell). A growth
verdict a cycle did not measure (``not_measured``, or none in a store before schema 11) is never
held against it, as in ``rig.analysis.matrix.growth_held``.

Apart from that judgement, a cell's *health* (``health``): ``healthy`` where every cycle stopped
clean, answered its requests and did not grow (lifecycle ``clean``, load ``ok``, growth ``ok`` or not
measured), ``unhealthy`` where none did (a scenario that reproduces a bug on a core is unhealthy
there: that is what a reader looks for), ``intermittent`` where some did, or where the known verdicts
alternate between a healthy and an unhealthy one (a race).

*Changed in*: for each scenario row of one API and shape, the cores in version order (numeric:
2.9 < 2.10 < 2.48.0), and every core whose verdicts (the cell's majority) differ from the core's
before it.

``build`` makes the table from a cycles frame (``Store.read("cycles")``); ``findings`` lists the
cells that differ from the known verdicts (for ``rig gate`` and ``rig matrix``);
``rig.analysis.conformance.text`` renders one compact grid per API and shape (rows: scenarios, columns: cores, each
cell what its cycles did in words, coloured by its health, marked where it differs from the known
verdicts, linked to its figures in a table below the grid; a batched shape's figures also the batch
sizes Triton formed, from the cycles' windows). Pure: no Triton, no store (``not_exact`` reads a
table of ``rig.runtimes.from_source.releases``).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from pathlib import Path

from rig.analysis.conformance.batches import cell_batches, cycle_batches
from rig.analysis.conformance.cells import Cell, Verdicts
from rig.analysis.conformance.changes import changed_in
from rig.analysis.conformance.order import UNBATCHED, cell_order, engine_order, scenario_order, shape_order
from rig.analysis.matrix import growth_held
from rig.analysis.release_order import SPAN, between, dated, releases, version_key  # noqa: F401  (re-exported)
from rig.analysis.verdict import records
from rig.contract.verdicts import NOT_MEASURED
from rig.runtimes.from_source.identity import is_variant
from rig.scenarios import catalog as scenarios
from rig.scenarios import known as known_verdicts

# The cycles' columns the table reads (``shape`` from schema 12; a row without one is unbatched).
COLUMNS = [
    "run_id",
    "cycle",
    "scenario",
    "control",
    "shape",
    "engine",
    "triton_version",
    "outcome",
    "load_outcome",
    "growth_outcome",
    "stop_latency_s",
    "finalize_expected",
    "finalize_before_stop",
    "finalize_after_stop",
    "batch_sizes",
    "server_ready_at_probe",
    "model_ready_at_probe",
    "stub_exit_aborts",
]
# Read where a cycles frame has them (no stored cycle does yet: ``bindings.join_runs`` joins a run's
# ``tritonserver_version`` in): the official API's bindings, and whether they are the core's own build.
BINDINGS_COLUMNS = ["tritonserver_version", "bindings_own"]
AS_KNOWN, FINDING, UNJUDGED = "as known", "finding", "unjudged"
SIGNS = {AS_KNOWN: "✓", FINDING: "✗", UNJUDGED: "?"}
NEVER_RUN = "¹"  # the mark of a cell with no cycle stored
SKIPPED = "²"  # the mark of a cell skipped, with why
NOT_EXACT_MARK = "³"  # the mark of a built core that is not exactly its release (``not_exact``)
NO_CHANGE = "—"
API_NAMES = {"capi": "C API (`capi`)", "tritonserver": "official Python API (`tritonserver`)"}
# How a load or growth verdict other than ok is written after the lifecycle's, in a grid's cell
SHORT = {
    "errors": "errors",
    "timeouts": "timeouts",
    "wrong_outputs": "wrong outputs",
    "nothing_completed": "nothing completed",
    "not_measured": "no load",
    "leaking": "leaking",
    "slowing": "slowing",
}
# A lifecycle verdict (rig.contract.verdicts.OUTCOMES) in a grid's cell: a person's words, short
LIFECYCLE_WORDS = {
    "clean": "clean",
    "requests_lost": "requests lost",
    "exit_timeout": "held to exit_timeout",
    "stop_error": "stop failed",
    "load_failed": "load failed",
    "stub_crashed": "stub crashed",
    "aborted_at_exit": "clean stop, stub aborted at exit",
    "finalize_error": "finalize raised",
    "finalize_missing": "finalize missing",
    "hung": "worker hung",
    "crashed": "worker crashed",
}
EXIT_ABORT_WORDS = "stub aborted at exit"  # beside a verdict that is not aborted_at_exit
HEALTHY, UNHEALTHY, INTERMITTENT_HEALTH = "healthy", "unhealthy", "intermittent"
HEALTH = (HEALTHY, UNHEALTHY, INTERMITTENT_HEALTH)


@dataclasses.dataclass(frozen=True)
class Grid:
    """One API and shape: a row per scenario (its control a row of its own), a column per core."""

    engine: str
    shape: str
    cores: tuple[str, ...]  # in version order
    rows: tuple[tuple[str, bool], ...]  # (scenario, control) in the registry's order
    cells: dict  # (scenario, control, version) -> Cell
    changed: dict  # (scenario, control) -> the cores where the verdicts changed
    skipped: dict  # (scenario, control, version) -> why it was skipped


@dataclasses.dataclass(frozen=True)
class Conformance:
    cells: tuple[Cell, ...]
    grids: tuple[Grid, ...]
    bisects: tuple[dict, ...] = ()  # the decided bisections of the store (table bisect: their result rows)

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(cell.judgement for cell in self.cells)
        return {j: c.get(j, 0) for j in SIGNS}

    @property
    def health_counts(self) -> dict[str, int]:
        c = Counter(health(cell) for cell in self.cells)
        return {h: c.get(h, 0) for h in HEALTH}


def shape_of(value) -> str:
    """A stored cycle's shape: none (a row before schema 12) is ``unbatched``."""
    return str(value) if value not in (None, "") else UNBATCHED


def is_batched(shape: str) -> bool:
    """Whether a shape's model takes a batch (``rig.scenarios.shapes.takes_batches``)."""
    from rig.scenarios.shapes import takes_batches

    return takes_batches(shape)


def batched_runs(frame) -> list[str]:
    """The runs of a cycles frame's scenario cycles in a batched shape: whose windows to read."""
    if not hasattr(frame, "columns") or not {"run_id", "scenario"} <= set(frame.columns):
        return []
    shapes = frame["shape"] if "shape" in frame.columns else [None] * len(frame)
    return sorted(
        {
            str(r)
            for r, name, sh in zip(frame["run_id"], frame["scenario"], shapes)
            if name and name == name and name != "baseline" and is_batched(shape_of(sh))
        }
    )


def is_healthy(verdicts: Verdicts) -> bool:
    """Whether one cycle's verdicts are healthy: a clean stop, every request answered right, no
    growth (or none measured)."""
    life, load, growth = verdicts
    return life == "clean" and load == "ok" and growth in ("ok", NOT_MEASURED)


def _alternatives(verdicts) -> list[Verdicts]:
    """Every combination that known verdicts with alternatives (``exit_timeout|clean``) allow."""
    fields = [str(v or "ok").split(known_verdicts.ANY) for v in verdicts]
    return [(a, b, c) for a in fields[0] for b in fields[1] for c in fields[2]]


def health(c: Cell) -> str:
    """A cell's health, apart from its judgement: ``healthy`` where every cycle's verdicts are
    (``is_healthy``), ``unhealthy`` where none are, ``intermittent`` where some are, or where its
    known verdicts alternate between a healthy and an unhealthy one (a race, whatever these cycles
    drew)."""
    given = {tuple(k.split(" / ")): n for k, n in c.got.items()} or {c.verdicts: c.cycles}
    good = sum(n for v, n in given.items() if len(v) == 3 and is_healthy(v))
    if known_verdicts.intermittent(c.known) and len({is_healthy(v) for v in _alternatives(c.known)}) == 2:
        return INTERMITTENT_HEALTH
    total = sum(given.values())
    return HEALTHY if good == total else UNHEALTHY if good == 0 else INTERMITTENT_HEALTH


# What the variants of a kept store are, where their manifests are not on this machine: filled by
# whoever renders that store (benchmarks/conformance_page.py, from docs/conformance/variants.json).
VARIANTS_SAID: dict[str, str] = {}


def variant_said(version: str) -> str:
    """What a variant core is, in words: from its manifest where it was built here, else as kept
    (``VARIANTS_SAID``); "" where neither says."""
    from rig.runtimes.from_source.cache import built_root, manifest
    from rig.runtimes.from_source.identity import describe_variant

    return describe_variant(manifest(built_root(str(version)))) or VARIANTS_SAID.get(str(version), "")


def not_exact(version: str) -> str | None:
    """Why a core built here is not exactly its release (``rig.runtimes.from_source.releases.NOT_EXACT``; a
    variant: what its manifest says it is, ``rig.runtimes.from_source.identity``, or what the kept store says of
    it, ``VARIANTS_SAID``); None where it is (every PyPI core, every release built from its own
    branches)."""
    from rig.runtimes.from_source.releases import NOT_EXACT

    if is_variant(str(version)):
        from rig.runtimes.from_source.identity import release_of

        said = variant_said(str(version))
        return said or f"a variant of {release_of(str(version))} (a patch or another ref; its manifest is not here)"
    return NOT_EXACT.get(str(version))


def _triple(r: dict) -> Verdicts:
    return (str(r["outcome"]), str(r.get("load_outcome") or NOT_MEASURED), str(r.get("growth_outcome") or "ok"))


def _holds(r: dict, want: Verdicts) -> bool:
    return known_verdicts.holds((str(r["outcome"]), str(r.get("load_outcome") or NOT_MEASURED)), want) and growth_held(
        r.get("growth_outcome"), want[2]
    )


def _probe_text(r: dict) -> str | None:
    """A cycle's readiness probe (``server_ready_at_probe``, ``model_ready_at_probe``) in words."""
    server, model = r.get("server_ready_at_probe"), r.get("model_ready_at_probe")
    if server is None and model is None:
        return None
    word = {True: "ready", False: "not ready", None: "not asked"}
    return (
        f"server {word[None if server is None else bool(server)]}, model {word[None if model is None else bool(model)]}"
    )


def _probed(rows: list[dict]) -> str | None:
    said = Counter(t for t in map(_probe_text, rows) if t is not None)
    return said.most_common(1)[0][0] if said else None


def _count(values) -> dict[str, int]:
    return dict(sorted(Counter(v for v in values if v is not None).items()))


def _aborted_at_exit(r: dict) -> bool:
    n = r.get("stub_exit_aborts")
    return n is not None and not math.isnan(n) and int(n) > 0


def _cell(key, rows: list[dict], known: dict, preferred: dict, by_cycle: dict) -> Cell:
    engine, shape, scenario, control, version = key
    verdicts = [_triple(r) for r in rows]
    top, agreeing = known_verdicts.majority(verdicts)
    said = Counter(map(known_verdicts.bindings_label, rows)).most_common(1)[0][0]  # the bindings they ran
    k = known_verdicts.pick(known, preferred, (scenario, control, shape, engine, version), said)
    if k is None and scenario in scenarios.SCENARIOS:  # a control's contract, as the matrix holds it
        k = known_verdicts.contract(scenarios.SCENARIOS[scenario], control)
    want = None if k is None else (k.lifecycle, k.load, k.growth or "ok")
    differing = 0 if want is None else sum(not _holds(r, want) for r in rows)
    judgement = UNJUDGED if want is None else FINDING if differing else AS_KNOWN
    stops = sorted(float(r["stop_latency_s"]) for r in rows if r.get("stop_latency_s") is not None)

    def total(col):
        return sum(int(r.get(col) or 0) for r in rows)

    return Cell(
        engine,
        shape,
        scenario,
        control,
        version,
        len(rows),
        _count(str(r["outcome"]) for r in rows),
        _count(r.get("load_outcome") for r in rows),
        _count(r.get("growth_outcome") for r in rows),
        top,
        agreeing,
        want,
        judgement,
        differing,
        statistics.median(stops) if stops else None,
        total("finalize_before_stop"),
        total("finalize_expected"),
        total("finalize_after_stop"),
        tuple(sorted({str(r["run_id"]) for r in rows if r.get("run_id") is not None})),
        {" / ".join(v): n for v, n in sorted(Counter(verdicts).items())},
        cell_batches(rows, by_cycle),
        _probed(rows),
        sum(map(_aborted_at_exit, rows)),
        _most(str(r["tritonserver_version"]) for r in rows if _given(r.get("tritonserver_version"))),
        _most(bool(r["bindings_own"]) for r in rows if _given(r.get("bindings_own"))),
    )


def _given(value) -> bool:
    return value is not None and value == value and value != ""


def _most(values):
    """The value most of them hold (None: none)."""
    said = Counter(values)
    return said.most_common(1)[0][0] if said else None


def cells(frame, known_path: str | Path | None = None, windows=None) -> list[Cell]:
    """Every scenario cell of a cycles frame (or records), judged against the known verdicts
    (``known_path``: the known-verdicts file; None: ``rig.scenarios.known.default_path()``). Cycles with no
    scenario, ``baseline`` ones and those without a Triton version are left out. ``windows``: the
    cycles' windows (``cycle_batches``), for the batch sizes each cell formed."""
    if hasattr(frame, "columns"):  # only the columns read: a whole cycles frame is 80 of them
        frame = frame[[c for c in [*COLUMNS, *BINDINGS_COLUMNS] if c in frame.columns]]
    groups: dict[tuple, list[dict]] = {}
    for r in records(frame):
        name = r.get("scenario")
        if not name or name == "baseline" or not r.get("triton_version") or not r.get("outcome"):
            continue
        key = (
            str(r.get("engine") or "-"),
            shape_of(r.get("shape")),
            str(name),
            bool(r.get("control")),
            str(r["triton_version"]),
        )
        groups.setdefault(key, []).append(r)
    known, preferred = known_verdicts.entries(known_path), known_verdicts.table(known_path)
    by_cycle = cycle_batches(windows)
    return [
        _cell(key, rows, known, preferred, by_cycle)
        for key, rows in sorted(groups.items(), key=lambda kv: cell_order(kv[0]))
    ]


def build(frame, known_path: str | Path | None = None, skipped=None, windows=None, bisects=()) -> Conformance:
    """The conformance table of a cycles frame: its cells, and one grid per API and shape, each
    with a column for every core that API ran (in any shape).
    ``skipped``: cells that were not run, with why (dicts with ``scenario``, ``control``,
    ``engine``, ``shape``, ``triton_version``, ``reason``; the store records none of them, the
    matrix knows them). ``windows``: the cycles' windows (their ``run_id``, ``cycle`` and
    ``batch_sizes``), for the batch sizes each batched cell formed. ``bisects``: the decided
    bisections (``decided_bisects``), named in "changed in"."""
    cs = cells(frame, known_path, windows)
    changes = changed_in(cs, bisects)
    skips: dict[tuple, str] = {}
    for s in skipped or ():
        key = (
            str(s.get("engine") or "-"),
            shape_of(s.get("shape")),
            str(s["scenario"]),
            bool(s.get("control")),
            str(s.get("triton_version") or "-"),
        )
        skips[key] = str(s.get("reason") or "skipped")
    grids = []
    for engine, shape in sorted(
        {(c.engine, c.shape) for c in cs} | {k[:2] for k in skips},
        key=lambda es: (engine_order(es[0]), shape_order(es[1])),
    ):
        mine = [c for c in cs if (c.engine, c.shape) == (engine, shape)]
        mine_skips = {k[2:]: why for k, why in skips.items() if k[:2] == (engine, shape)}
        # every core the API ran, in every one of its shapes: a release not run in this shape is a
        # column of never-run cells, not a column left out (a reader sees the gap a change spans)
        cores = sorted(
            {c.triton_version for c in cs if c.engine == engine} | {k[4] for k in skips if k[0] == engine},
            key=version_key,
        )
        rows = sorted(
            {(c.scenario, c.control) for c in mine} | {k[:2] for k in mine_skips},
            key=lambda r: (scenario_order(r[0]), r[1]),
        )
        grids.append(
            Grid(
                engine,
                shape,
                tuple(cores),
                tuple(rows),
                {(c.scenario, c.control, c.triton_version): c for c in mine},
                {r: tuple(changes.get((*r, engine, shape), ())) for r in rows},
                mine_skips,
            )
        )
    return Conformance(tuple(cs), tuple(grids), tuple(bisects))


# --- rendering ------------------------------------------------------------------------------------


def spans_cores_or_shapes(frame) -> bool:
    """Whether the scenario cycles of a cycles frame come from more than one core or model shape
    (the report shows the grid then)."""
    if "scenario" not in frame or "triton_version" not in frame:
        return False
    c = frame[frame["scenario"].notna() & (frame["scenario"] != "baseline") & frame["triton_version"].notna()]
    shapes = c["shape"].fillna(UNBATCHED) if "shape" in c else None
    return c["triton_version"].nunique() > 1 or (shapes is not None and shapes.nunique() > 1)
