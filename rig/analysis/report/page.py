"""`rig report`: a results folder's lifecycle, performance and nightly trends, each group of
runs beside the baseline, as a Markdown summary and one self-contained HTML page.

Groups are the combinations of the tags that vary in the data (Triton version, engine, model,
retention, stop strategy, restart mode; the run itself when none varies). The first tag that
varies is the compared one: every other value of it is tested against the baseline's, with the
rest of the tags held equal. Work is group-bys over whole columns; statistics run per group,
never per row, and HDR histograms are decoded only for the groups shown (``MAX_HISTOGRAMS``).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from rig.analysis import plots
from rig.analysis.conformance import changes as conformance_changes
from rig.analysis.conformance import diff as conformance_diff
from rig.analysis.conformance import diff_text as conformance_diff_text
from rig.analysis.conformance import html as conformance_html
from rig.analysis.conformance import table as conformance
from rig.analysis.report import differences, parts
from rig.analysis.report import growth as report_growth
from rig.analysis.report import html as rh
from rig.analysis.report import scenarios as report_scenarios
from rig.analysis.report import server as report_server
from rig.common.errors import RigError
from rig.common.text import redact
from rig.contract.rows import CycleRow
from rig.parent.config import RunConfig

DIMS = ("triton_version", "engine", "model", "retain", "stop_strategy", "restart")
WINDOW_COLUMNS = [
    "run_id",
    "cycle",
    "window",
    "engine",
    "model",
    "tool",
    "mode",
    "concurrency",
    "rate",
    "requests",
    "throughput",
    "p50_us",
    "p99_us",
    "triton_version",
    "date",
    "first_p50_us",
    "first_p99_us",
    "gap_p50_us",
    "gap_p99_us",
    "responses",
    "responses_per_request",
]  # what the sections read
WINDOW_COLUMNS += [c for c in report_server.COLUMNS if c not in WINDOW_COLUMNS]  # where the time goes (schema 14)
CYCLE_COLUMNS = [
    "run_id",
    "cycle",
    "engine",
    "model",
    "retain",
    "outcome",
    "load_outcome",
    "restart",
    "stop_strategy",
    "start_latency_s",
    "stop_latency_s",
    "finalize_expected",
    "finalize_before_stop",
    "stubs_killed",
    "shm_regions_leaked",
    "throughput",
    "worker_rss_bytes",
    "stub_rss_bytes",
    "triton_version",
    "date",
    "scenario",
    "control",
    "finalize_after_stop",
]
CYCLE_COLUMNS += [c for c in report_scenarios.COLUMNS if c not in CYCLE_COLUMNS]  # the scenario tables'
CYCLE_COLUMNS += [c for c in report_growth.COLUMNS if c not in CYCLE_COLUMNS]  # growth and slowdown
CYCLE_COLUMNS += [
    c
    for c in [*conformance.COLUMNS, *conformance.BINDINGS_COLUMNS]
    if c not in CYCLE_COLUMNS  # the conformance grid's (shape: schema 12)
    and c in {f.name for f in dataclasses.fields(CycleRow)}
]
TABLES = ("runs", "cycles", "windows")
DEFAULTS = {k: getattr(RunConfig, k) for k in ("retain", "stop_strategy", "restart")}  # the rig's own defaults


@dataclasses.dataclass
class Data:
    root: str
    runs: pd.DataFrame
    cycles: pd.DataFrame
    windows: pd.DataFrame  # without the histogram column
    filters: tuple = ()  # pyarrow expressions the windows were read under


def load(root: str, where_keys=()) -> Data:
    """The three tables of a results folder: the columns the report reads (``CYCLE_COLUMNS``,
    ``WINDOW_COLUMNS``, the runs' ids) and the ``--where`` keys each table has; never the
    windows' heavy histogram column, read later for the points shown. One-line errors for a
    missing, empty or foreign folder (``Store.open``)."""
    from rig.store import TABLES as ROWS
    from rig.store import Store

    store = Store.open(root)

    def columns(table: str, base: list[str]) -> list[str]:
        names = {f.name for f in dataclasses.fields(ROWS[table])} | {"triton_version", "date"}
        return list(dict.fromkeys([*base, *(k for k in where_keys if k in names and k != "histogram")]))

    run_keys = [k for k in columns("runs", []) if k not in CYCLE_COLUMNS + WINDOW_COLUMNS]
    # the runs table (a file per run) only where a --where key is its own: runs are counted from
    # the cycles and windows they hold
    runs = store.read("runs", columns=["run_id", *run_keys]) if run_keys else pd.DataFrame(columns=["run_id"])
    cycle_columns = columns("cycles", CYCLE_COLUMNS)
    # the cycles are read in the renderer's process (plots.start_renderer) where one runs,
    # while this one reads the windows
    pending = plots.submit(_read, str(root), "cycles", cycle_columns)
    plots.warm()
    failed = None
    try:
        windows = store.read("windows", columns=columns("windows", WINDOW_COLUMNS))
    except RigError as e:
        failed = e
    cycles = None
    if pending is not None:
        try:
            cycles = pending.result()
        except RigError:
            raise
        except Exception:  # the renderer could not: read them here  # noqa: BLE001
            cycles = None
    if cycles is None:
        cycles = store.read("cycles", columns=cycle_columns)
    if failed is not None:
        raise failed
    if cycles.empty and windows.empty:
        raise RigError(
            f"{redact(str(root))} holds no cycles or windows yet; run rig soak or rig bench "
            f"with --results {redact(str(root))}"
        )
    return Data(str(root), runs, cycles, windows)


def _read(root: str, table: str, columns: list[str]) -> pd.DataFrame:
    from rig.store import Store

    return Store(root).read(table, columns=columns)


def select(data: Data, where: list[str]) -> Data:
    """Keep the rows each ``KEY=VALUE`` (``rig.store.where``) holds for; a key only ``runs`` has
    filters through the run ids. An unknown key or a filter that leaves nothing is a one-line error."""
    from rig.store import TABLES as ROWS
    from rig.store import where as wh

    runs, cycles, windows = data.runs, data.cycles, data.windows
    known = {f.name for t in TABLES for f in dataclasses.fields(ROWS[t])} | {"triton_version", "date"}
    for key, values in wh.parse(where):
        wh.check(key, known - {"histogram"})
        if not any(key in t for t in (runs, cycles, windows)):
            raise RigError(f"--where {key}=...: not read; load the tables with report.load(root, where_keys=[{key!r}])")
        shown = wh.present((runs, cycles, windows), key)
        if key in cycles or key in windows:
            if key in runs:
                runs = runs[wh.match(runs[key], values)]
            if key in cycles:
                cycles = cycles[wh.match(cycles[key], values)]
            if key in windows:
                windows = windows[wh.match(windows[key], values)]
            if key not in windows:  # e.g. retain: windows follow their cycles
                windows = windows.merge(cycles[["run_id", "cycle"]].drop_duplicates(), on=["run_id", "cycle"])
            if key not in cycles:
                cycles = cycles.merge(windows[["run_id", "cycle"]].drop_duplicates(), on=["run_id", "cycle"])
        else:
            runs = runs[wh.match(runs[key], values)]
            cycles = cycles[cycles.run_id.isin(runs.run_id)]
            windows = windows[windows.run_id.isin(runs.run_id)]
        if cycles.empty and windows.empty:
            what = "no run" if key == "run_id" else "nothing"
            raise RigError(f"--where {key}={','.join(values)} matches {what} in {redact(data.root)} (present: {shown})")
    return Data(data.root, runs, cycles, windows)


def _version_key(v: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(v), "")
    except InvalidVersion:
        return (1, Version("0"), v)


def _tag_windows(data: Data, vary=None) -> pd.DataFrame:
    """Windows with their cycle's retention, stop strategy and restart mode (bench windows
    have no cycle row: those read as '-'); of those, only the ones in ``vary`` where given."""
    tags = [d for d in ("retain", "stop_strategy", "restart") if d in data.cycles and (vary is None or d in vary)]
    if not tags:
        return data.windows
    w = data.windows.merge(
        data.cycles[["run_id", "cycle"] + tags].drop_duplicates(["run_id", "cycle"]), on=["run_id", "cycle"], how="left"
    )
    for d in tags:
        w[d] = w[d].astype("string").fillna("-")
    return w


def _distinct(data: Data, column: str) -> set[str]:
    """The values ``column`` takes in the cycles and windows (nulls left out), as strings."""
    return {str(v) for t in (data.cycles, data.windows) if column in t for v in t[column].dropna().unique()}


def plan(data: Data, baseline: str | None) -> dict:
    """Which tags vary (the group key), which is compared, and its baseline value."""
    seen = {d: _distinct(data, d) for d in (*DIMS, "run_id")}
    vary = [d for d in DIMS if len(seen[d]) > 1]
    if not vary and len(seen["run_id"]) > 1:
        vary = ["run_id"]
    axis = vary[0] if vary else None
    values = sorted(seen[axis], key=_version_key) if axis else []
    versions = sorted(seen["triton_version"], key=_version_key)
    if baseline is not None:
        if axis is None or baseline not in values:
            if axis in (None, "triton_version") or baseline in versions or baseline[:1].isdigit():
                if baseline not in versions:
                    raise RigError(
                        f"--baseline {baseline}: no Triton version {baseline} in {redact(data.root)} "
                        f"(present: {', '.join(versions) or 'none'})"
                    )
                raise RigError(
                    f"--baseline {baseline}: only one Triton version here; the runs differ by "
                    f"{axis}: pass one of {', '.join(values)}"
                )
            raise RigError(f"--baseline {baseline}: not a value of {axis} here (present: {', '.join(values)})")
        base, why = baseline, "as asked"
    elif axis in DEFAULTS and DEFAULTS[axis] in values:
        base, why = DEFAULTS[axis], "the rig's default"
    elif axis:
        base = values[0]
        why = (
            "the oldest version"
            if axis == "triton_version"
            else ("the earliest run" if axis == "run_id" else "the first in order")
        )
    else:
        base, why = None, ""
    return {"vary": vary, "axis": axis, "baseline": base, "why": why, "values": values, "seen": seen}


def build(
    data: Data, baseline: str | None = None, max_histograms: int = 8, upgrade: dict | None = None
) -> tuple[str, str]:
    """The Markdown summary and the HTML page of ``data``; ``upgrade``: the upgrade question's
    arguments (``conformance_diff.upgrade``: source, target, ...) where asked."""
    pl = plan(data, baseline)
    vary, axis, base = pl["vary"], pl["axis"], pl["baseline"]
    cycles = data.cycles.copy()
    windows = _tag_windows(data, vary)
    windows = windows.assign(_run=pd.factorize(windows["run_id"])[0])  # run ids as integers, factorized once
    gkeys = vary or []
    title = f"rig report: {redact(data.root)}"  # a URI's credentials never go into the page
    summary = [
        f"{len(pl['seen']['run_id']):,} run(s), {len(cycles):,} cycle(s), {len(windows):,} window(s); Triton "
        + ", ".join(sorted(pl["seen"]["triton_version"], key=_version_key))
    ]
    if axis:
        summary.append(
            f"Compared by {axis}; baseline {axis}={base} ({pl['why']}); groups differ by {', '.join(gkeys)}."
        )
    else:
        summary.append("One group: nothing varies here to compare.")
    sections = []
    # first: an upgrade asked of cores the results do not hold is an error before the work
    moved = upgrade_section(cycles, data.root, upgrade) if len(cycles) or upgrade else None
    # the sections whose figures are ready first come first: a renderer (plots.start_renderer)
    # draws those while the rest is computed
    trend = parts.trends_section(cycles, windows, gkeys)
    life = parts.lifecycle_section(cycles, gkeys) if len(cycles) else None
    pts = parts.points(windows, gkeys)
    diffs = differences.differences_section(cycles, pts, gkeys, axis, base) if axis else None
    perf = parts.performance_section(data, pts, gkeys, max_histograms) if len(windows) else None
    streams = parts.streaming_section(data.root, windows, gkeys) if len(windows) else None
    times = report_server.server_section(windows, gkeys) if len(windows) else None
    scenario_table = report_scenarios.scenarios_section(cycles) if len(cycles) else None
    grid = conformance_section(cycles, windows, data.root) if len(cycles) else None
    growth = report_growth.growth_section(data.root, cycles, windows) if len(cycles) else None
    for s in (scenario_table, grid, moved, life, perf, times, growth, streams, diffs, trend):
        if s is not None:
            sections.append(s)
    if diffs is not None:
        summary += getattr(diffs, "headlines", [])
    return rh.markdown(title, summary, sections), rh.page(title, summary, sections)


def bisects_of(root: str | None) -> tuple[dict, ...]:
    """The decided bisections the store at ``root`` holds (table ``bisect``), for "changed in"."""
    if root is None:
        return ()
    from rig.store import Store

    try:
        return conformance_changes.decided_bisects(Store(root).read("bisect"))
    except (RigError, OSError):
        return ()


def conformance_section(
    cycles: pd.DataFrame, windows: pd.DataFrame | None = None, root: str | None = None
) -> rh.Section | None:
    """The conformance grid (``rig.analysis.conformance.table``) where the scenario cycles come from more
    than one core or model shape (``windows``: for the batch sizes its batched cells formed); in
    the Markdown summary, a line that points to it."""
    if not conformance.spans_cores_or_shapes(cycles):
        return None
    table = conformance.build(cycles, windows=windows, bisects=bisects_of(root))
    if not table.cells:
        return None
    counts = ", ".join(f"{n} {j}" for j, n in table.counts.items())
    return rh.Section("Conformance").add(
        f"Each scenario's verdicts per core, API and model shape against the known ones: {counts}.",
        rh.Html(
            conformance_html.to_html(table),
            markdown="The grid is in the HTML page; `rig report --conformance RESULTS` prints it here.",
        ),
    )


def upgrade_section(cycles: pd.DataFrame, root: str, asked: dict | None = None) -> rh.Section | None:
    """The upgrade question (``rig.analysis.conformance.diff``) as asked (``--from``/``--to``), else,
    where the scenario cycles span several cores, from the oldest of them to the newest."""
    if asked is None and not conformance.spans_cores_or_shapes(cycles):
        return None
    table = conformance.build(cycles, bisects=bisects_of(root))
    span = conformance_diff.default_span(table)
    if asked is None and span is None:
        return None
    u = conformance_diff.upgrade(table, results=redact(root), **(asked or {"source": span[0], "target": span[1]}))
    first, *per = conformance_diff_text.header(u)
    said = "\n".join([first, "", *(f"- {x}" for x in per)])
    if any(a.rows or a.only_before or a.only_after for a in u.apis):
        said += (
            f"\n\nThe cells are in the HTML page; `rig report --conformance {redact(root)} --from {u.source} "
            f"--to {u.target}` prints them here."
        )
    return rh.Section(conformance_diff_text.section_title(u)).add(
        rh.Html(conformance_diff_text.to_html(u), markdown=said)
    )
