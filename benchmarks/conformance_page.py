"""The published conformance pages, generated from the reference run's store kept in the
repository (docs/conformance/store/: the scenario cycles only, the columns the grid reads, and the
batch sizes of the batched cells' windows; one Parquet file per table, core and date):
docs/conformance.md, the index (the pages, where verdicts changed, the legend, how it was made),
and one page per API and shape, docs/conformance/ENGINE-SHAPE.md (its grid, what its rows do, its
cells' figures), each small enough to open on a phone. mkdocs.yml's nav lists them.

    python benchmarks/conformance_page.py                 # regenerate the pages from the kept store
    python benchmarks/conformance_page.py --from RESULTS  # keep RESULTS' scenario cycles as the store, then regenerate
    python benchmarks/conformance_page.py --from RESULTS --add   # add RESULTS' cells to it (replacing those run again)
    python benchmarks/conformance_page.py --from RESULTS --pool  # add them, pooling a cell run again with its kept cycles
    python benchmarks/conformance_page.py --bisects RESULTS      # add RESULTS' bisections alone (rig bisect --results)

RESULTS is the --results of a reviewed `rig matrix --scenarios all ...` run. The pages are a pure
function of the kept store and rig/scenarios/known_verdicts.csv: tests/analysis/test_conformance.py regenerates
them and compares each with its page byte for byte.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rig.analysis.conformance import table as cf  # noqa: E402
from rig.analysis.conformance import changes as cfc  # noqa: E402
from rig.analysis.conformance import order as cfo  # noqa: E402
from rig.analysis.conformance import text as cft  # noqa: E402
from rig.analysis.conformance.cells import row_label  # noqa: E402
from rig.common.errors import RigError  # noqa: E402
from rig.common.text import md_cell  # noqa: E402

DOCS = ROOT / "docs"
STORE = DOCS / "conformance" / "store"
VARIANTS = DOCS / "conformance" / "variants.json"  # what each variant core of the store is (its manifest's words)
PAGE = DOCS / "conformance.md"   # the index
PAGES = DOCS / "conformance"     # one page per API and shape
NAV_API = {"capi": "C API", "tritonserver": "official API"}
MATRIX = "rig matrix --scenarios all --runtimes all --engines capi,tritonserver --cycles 3 --results R"
# What the kept store holds of each cycle: the grid's columns, those every stored cycle must have
# (the store reads a file without them as foreign), and those an older row's verdicts are re-read from.
VERDICT_INPUTS = ("stop_error", "finalize_errors", "requests", "errors")


def kept_columns() -> list[str]:
    from rig.contract.rows import CycleRow
    from rig.store import arrow_schema

    schema = arrow_schema(CycleRow)
    required = [f.name for f in schema if not f.nullable]
    return [c for c in dict.fromkeys([*required, *cf.COLUMNS, *cf.BINDINGS_COLUMNS, *VERDICT_INPUTS]) if c in schema.names]


def kept_window_columns() -> list[str]:
    """What the kept store holds of a window: the columns every stored window must have, and its
    batch sizes (the figures of a batched cell)."""
    from rig.contract.rows import WindowRow
    from rig.store import arrow_schema

    return [*(f.name for f in arrow_schema(WindowRow) if not f.nullable), "batch_sizes"]


def _batch_windows(source, cycles):
    """The windows of ``cycles``' batched cells that recorded batch sizes (``kept_window_columns``),
    read from the store ``source``; None where there are none."""
    import pyarrow.compute as pc

    runs = cf.batched_runs(cycles)
    if not runs:
        return None
    windows = source.read("windows", columns=[*kept_window_columns(), "triton_version", "date"],
                          filter=pc.field("run_id").isin(runs) & pc.field("batch_sizes").is_valid())
    keys = set(zip(cycles["run_id"].astype(str), cycles["cycle"].astype(int)))
    windows = windows[[k in keys for k in zip(windows["run_id"].astype(str), windows["cycle"].astype(int))]]
    return windows if len(windows) else None


def _put(out, table: str, frame, columns: list[str], row_type, keys: list[str]) -> None:
    """``frame`` into the kept store's ``table``: one merged file per core and date."""
    import pyarrow as pa

    from rig.store import arrow_schema

    schema = pa.schema([arrow_schema(row_type).field(c) for c in columns])
    for (version, date), part in frame.groupby(["triton_version", "date"], sort=True):
        part = part.sort_values(keys, kind="stable")
        tbl = pa.Table.from_pandas(part[columns], schema=schema, preserve_index=False).replace_schema_metadata(None)
        folder = f"{out.base}/{table}/triton_version={str(version).replace('/', '_')}/date={date}"
        out.put(tbl, folder, "conformance-merged.parquet")


def _cell_keys(cycles):
    """Each cycle's cell: (core, engine, scenario, control, shape)."""
    return zip(cycles["triton_version"].astype(str), cycles["engine"].astype(str), cycles["scenario"].astype(str),
               cycles["control"].fillna(False).astype(bool), cycles["shape"].fillna("unbatched").astype(str))


def _bindings_labels(cycles):
    """Each cycle's official-API bindings, as the known verdicts say them (``own``, a version, "")."""
    from rig.scenarios.known import bindings_label

    cols = [c for c in ("engine", "bindings_own", "tritonserver_version") if c in cycles]
    return [bindings_label(r) for r in cycles[cols].to_dict("records")]


def keep_store(results: str | Path, store: Path = STORE, add: bool = False, pool: bool = False) -> tuple[int, int]:
    """Replace ``store`` with the scenario cycles of ``results`` (``kept_columns`` only), and the
    windows of its batched cells that recorded batch sizes (``kept_window_columns``), one merged
    file per table, core and date. With ``add``, the store keeps its cycles (and their windows) of
    every cell (scenario or control, shape, engine and core) that ``results`` does not hold: a cell
    run again replaces the cell, the others stay. With ``pool`` (``add`` too), a cell run again keeps
    its kept cycles beside the new ones where they ran the same bindings (the official API's: a
    race's rate is counted over both runs, ``rig.analysis.conformance.rates``), and is replaced where
    they did not; a run already kept is not counted twice. Returns (cycles kept, bytes written)."""
    import pandas as pd

    from rig.contract.rows import CycleRow, WindowRow
    from rig.store import Store

    columns = kept_columns()
    cycles = Store.open(results).read("cycles", columns=[*columns, "triton_version", "date"])
    cycles = cycles[cycles["scenario"].notna() & (cycles["scenario"] != "baseline")]
    if cycles.empty:
        raise RigError(f"{results} holds no scenario cycles: give the --results of rig matrix --scenarios all")
    windows = [_batch_windows(Store.open(results), cycles)]
    bisects = [Store.open(results).read("bisect")]  # the bisections it holds: "changed in" names their commits
    if add and store.exists():
        bisects.append(Store.open(store).read("bisect"))
        kept = Store.open(store).read("cycles", columns=[*columns, "triton_version", "date"])
        if pool:  # the same cell through the same bindings: kept beside; a run kept already: once
            same = set(zip(_cell_keys(cycles), _bindings_labels(cycles)))
            stays = [(k, b) in same for k, b in zip(_cell_keys(kept), _bindings_labels(kept))]
            cycles = cycles[~cycles["run_id"].isin(set(kept["run_id"]))]
        else:
            stays = [False] * len(kept)
        new = set(_cell_keys(cycles))
        kept = kept[[k not in new or s for k, s in zip(_cell_keys(kept), stays)]]
        windows.append(_batch_windows(Store.open(store), kept))
        cycles = pd.concat([kept, cycles], ignore_index=True)
    if store.exists():
        foreign = [p.name for p in store.iterdir() if p.name not in ("cycles", "windows", "bisect")]
        if foreign:
            raise RigError(f"{store} holds more than a kept store ({', '.join(sorted(foreign))}): remove it by hand")
        shutil.rmtree(store)
    out = Store(store)
    _put(out, "cycles", cycles, columns, CycleRow, ["run_id", "cycle"])
    windows = [w for w in windows if w is not None]
    if windows:
        frame = pd.concat(windows, ignore_index=True).drop_duplicates(["run_id", "cycle", "window"])  # pooled: once
        _put(out, "windows", frame, kept_window_columns(), WindowRow,
             ["run_id", "cycle", "window"])
    bisects = [b for b in bisects if b is not None and len(b)]
    if bisects:
        from rig.contract.table_rows import BisectRow

        frame = pd.concat(bisects, ignore_index=True).drop_duplicates(["run_id", "step"], keep="first")
        _put(out, "bisect", frame, [f.name for f in dataclasses.fields(BisectRow)], BisectRow, ["run_id", "step"])
    return len(cycles), sum(p.stat().st_size for p in store.rglob("*.parquet"))


def keep_bisects(results: str | Path, store: Path = STORE) -> int:
    """Add the bisections of ``results`` (the ``--results`` of `rig bisect`) to the kept store's
    ``bisect`` table, a bisection run again (its run_id) replacing the kept one; the store's cycles
    and windows stay as they are (a bisection's own cell runs, on releases and hybrids, are not
    the table's). Returns the bisections kept."""
    import pandas as pd

    from rig.contract.table_rows import BisectRow
    from rig.store import Store

    new = Store.open(results).read("bisect")
    if new is None or not len(new):
        raise RigError(f"{results} holds no bisection: give the --results of rig bisect")
    kept = Store.open(store).read("bisect")
    frames = [new]
    if kept is not None and len(kept):
        frames.append(kept[~kept["run_id"].isin(set(new["run_id"]))])
    frame = pd.concat(frames, ignore_index=True).drop_duplicates(["run_id", "step"], keep="first")
    shutil.rmtree(store / "bisect", ignore_errors=True)
    _put(Store(store), "bisect", frame, [f.name for f in dataclasses.fields(BisectRow)], BisectRow, ["run_id", "step"])
    return frame["run_id"].nunique()


def build_lines(versions: list[str]) -> list[str]:
    """The builds a reproduction needs first: every core no PyPI wheel bundles (rig runtime build)."""
    from rig.parent.runtime import PYTRITON_CORE

    built = [v for v in versions if v not in PYTRITON_CORE.values()]
    if not built:
        return []
    return [f"for v in {' '.join(built)}; do rig runtime build $v --sources ../shared/triton-src; done"]


def own_bindings_lines(cells) -> list[str]:
    """Where the official API ran a wheel's core with its release's own bindings (2.51.0: the
    matrix's ``all`` takes the wheel's core, with PyPI's bindings), the build with those bindings for
    the sandbox's Python and the matrix over it, in the sandbox, that replace the column."""
    from rig.parent.runtime import PYTRITON_CORE

    wheels = set(PYTRITON_CORE.values())
    own = sorted({c.triton_version for c in cells if c.engine == "tritonserver" and c.own_bindings and
                  c.triton_version in wheels}, key=cf.version_key)
    if not own:
        return []
    return [
        f"for v in {' '.join(own)}; do rig runtime build $v --sources ../shared/triton-src "
        "--python ~/.pyenv/versions/3.12.1/bin/python3.12; done   # with its own bindings, for the sandbox",
        "bash tests/sandbox/official.sh --run rig matrix --scenarios all --runtimes "
        f"{','.join('built-' + v for v in own)} --engines tritonserver --cycles 3 --results R2",
        "python benchmarks/conformance_page.py --from R && python benchmarks/conformance_page.py --from R2 --add",
    ]


def page_path(g) -> str:
    """Where a grid's page is, under docs/: ``conformance/capi-unbatched.md``."""
    return f"{PAGES.name}/" + re.sub(r"[^a-z0-9]+", "-", f"{g.engine}-{g.shape}".lower()).strip("-") + ".md"


def nav_title(g) -> str:
    """A grid page's title in mkdocs.yml's nav: ``C API, unbatched``."""
    return f"{NAV_API.get(g.engine, g.engine)}, {g.shape}"


def _table(store, known_path):
    from rig.store import Store

    columns = [c for c in [*cf.COLUMNS, *cf.BINDINGS_COLUMNS] if c in kept_columns() or c == "triton_version"]
    kept = Store.open(store)
    cycles = kept.read("cycles", columns=[*columns, "date"])
    cf.VARIANTS_SAID.update(variants(sorted(set(cycles["triton_version"].astype(str)))))
    table = cf.build(cycles, known_path, windows=kept.read("windows", columns=["run_id", "cycle", "batch_sizes"]),
                     bisects=cfc.decided_bisects(kept.read("bisect")))
    if not table.cells:
        raise RigError(f"{store} holds no scenario cycles")
    return cycles, table


def variants(versions: list[str]) -> dict[str, str]:
    """What each variant among ``versions`` is: its manifest's words where it was built on this
    machine, else as ``VARIANTS`` keeps them (so that the pages read the same on a machine without
    the build: a fresh clone, CI)."""
    import json

    kept = json.loads(VARIANTS.read_text()) if VARIANTS.exists() else {}
    return {v: cf.variant_said(v) or kept.get(v, "") for v in versions if cf.is_variant(v)}


def _keep_variants(store: Path) -> None:
    """Write ``VARIANTS`` from the store's variant cores (where their words are known)."""
    import json

    from rig.store import Store

    versions = sorted(set(Store.open(store).read("cycles", columns=["triton_version"])["triton_version"].astype(str)))
    said = {v: t for v, t in variants(versions).items() if t}
    if said:
        VARIANTS.write_text(json.dumps(said, indent=1, sort_keys=True) + "\n")


def _counts(cells) -> dict[str, int]:
    health = Counter(cf.health(c) for c in cells)
    judged = Counter(c.judgement for c in cells)
    return {"cells": len(cells), **{h: health.get(h, 0) for h in cf.HEALTH},
            "findings": judged.get(cf.FINDING, 0), "unjudged": judged.get(cf.UNJUDGED, 0)}


def _pages_table(table) -> list[str]:
    """The index's list of pages, one per API and shape, with its cells counted."""
    sym = cft.SYMBOLS
    lines = ["| page | cells | " + " | ".join(f"{sym[h]} {h}" for h in cf.HEALTH) + " | ✗ findings | ? unjudged |",
             "|" + " --- |" * 7]
    for g in table.grids:
        n = _counts(list(g.cells.values()))
        lines.append(f"| [{md_cell(nav_title(g))}]({page_path(g)}) | "
                     + " | ".join(str(n[k]) for k in ("cells", *cf.HEALTH, "findings", "unjudged")) + " |")
    return lines


def _changes(table) -> list[str]:
    """Where verdicts changed, per API: each row with a non-empty changed in, the cores it changed
    in and in which shapes (each a link to its page)."""
    lines = []
    for engine in dict.fromkeys(g.engine for g in table.grids):
        rows: dict[tuple[str, bool], dict[tuple[str, ...], list]] = {}
        for g in (g for g in table.grids if g.engine == engine):
            for row, cores in g.changed.items():
                if cores:
                    rows.setdefault(row, {}).setdefault(tuple(cores), []).append(g)
        lines += [f"### {cf.API_NAMES.get(engine, engine)}", ""]
        if not rows:
            lines += ["The same verdicts on every core, in every shape.", ""]
            continue
        lines += ["| scenario | changed in: shapes |", "| --- | --- |"]
        for (name, control), by in sorted(rows.items(), key=lambda kv: (cfo.scenario_order(kv[0][0]), kv[0][1])):
            said = "; ".join(f"{', '.join(cores)}: " + ", ".join(f"[{g.shape}]({page_path(g)})" for g in gs)
                             for cores, gs in sorted(by.items(), key=lambda kv: [cf.version_key(v) for v in kv[0]]))
            lines.append(f"| {md_cell(row_label(name, control))} | {md_cell(said)} |")
        lines.append("")
    return lines


RUNNER = "--runner 'bash tests/sandbox/official.sh --run' --python ~/.pyenv/versions/3.12.1/bin/python3.12"


def _bisections(table) -> list[str]:
    """The decided bisections kept beside the store (its table ``bisect``): the cell each ran, its
    releases, the commits it named, and the command that runs it again (the official API's through
    the sandbox)."""
    found = sorted(cfc.bisections(table.bisects), key=lambda b: (cf.version_key(b.bad), b.cell))
    if not found:
        return []
    lines = ["### The bisections behind them", "",
             "Each names the commits of a change for its own cell and for every cell it moved alike between the "
             "same two cores (`rig bisect`, kept in the store's table `bisect`: `python benchmarks/conformance_page.py "
             "--bisects B`).", "", "| cell | releases | commits | command |", "| --- | --- | --- | --- |"]
    for b in found:
        command = (f"rig bisect --scenario {b.scenario}{' --control' if b.control else ''} --shape "
                   f"{b.shape.replace(',', '+')} --engine {b.engine} --good {b.good} --bad {b.bad} --sources "
                   "../shared/triton-src --results B" + (f" {RUNNER}" if b.engine == "tritonserver" else ""))
        lines.append(f"| {md_cell(b.cell)} | {b.good} → {b.bad} | {md_cell(cfc.commits_text(b.commits))} | "
                     f"`{command}` |")
    return [*lines, ""]


def index(cycles, table) -> str:
    """docs/conformance.md: what the grids show, the pages, where verdicts changed, the legend,
    how it was made and reproduced, where a shape moved a verdict."""
    versions = sorted({c.triton_version for c in table.cells}, key=cf.version_key)
    apis = list(dict.fromkeys(g.engine for g in table.grids))
    shapes = list(dict.fromkeys(g.shape for g in sorted(table.grids, key=lambda g: cfo.shape_order(g.shape))))
    dates = sorted(set(cycles["date"].astype(str)))
    runs = sorted({r for c in table.cells for r in c.run_ids})
    n = _counts(table.cells)
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    lines = [
        "# Conformance",
        "",
        "What each [lifecycle scenario](guide/scenarios.md) and its negative control did on each Triton core, "
        "through each API and in each model shape: one page per API and shape, each a grid (a row per scenario, "
        "a column per core in version order). A cell says what its cycles did, in words, and its colour whether "
        f"that was healthy: {cft.SYMBOLS[cf.HEALTHY]} a clean stop with every request answered and no growth, "
        f"{cft.SYMBOLS[cf.UNHEALTHY]} anything else (a scenario that reproduces a bug is unhealthy on the cores "
        f"where it does), {cft.SYMBOLS[cf.INTERMITTENT_HEALTH]} some cycles one, some the other. A second mark, "
        f"apart, says where the cell differs from the verdicts it is known to give ({cft.FINDING_MARK}, a finding) "
        f"or where nothing is known ({cft.UNJUDGED_MARK}); none where it gave them. Each cell links to its figures "
        "under the grid; *changed in* names the cores where a row's verdicts changed, or the span of releases "
        "a change came in where some were not run (2.68.0…2.70.0).",
        "",
        f"{n['cells']:,} cells: " + ", ".join(f"{n[h]:,} {h}" for h in cf.HEALTH)
        + f"; {n['findings']:,} finding(s), {n['unjudged']:,} unjudged.",
        "",
        "## Pages",
        "",
        *_pages_table(table),
        "",
        "## Where verdicts changed",
        "",
        "Each row whose verdicts (or readiness after a dead stub) differ from one core to the next, the cores "
        "where they did and in which shapes.",
        "",
        *_changes(table),
        *_bisections(table),
        "## Legend",
        "",
        *(line for text in cft.legend() for line in (text, "")),
        "## How it was made",
        "",
        f"Generated from the reference run kept in `docs/conformance/store/` ({len(cycles):,} scenario cycles "
        f"from {len(runs):,} run(s), {when}; Triton {', '.join(versions)}; {', '.join(f'`{a}`' for a in apis)}; "
        f"{', '.join(shapes)}), judged against `{cft.KNOWN_FILE}` (written by `rig scenarios --accept RESULTS` "
        "from a reviewed run), by `benchmarks/conformance_page.py`. To reproduce it, run the matrix and keep its "
        "scenario cycles as the store, which regenerates these pages:",
        "",
        "```sh",
        *build_lines(versions),
        MATRIX,
        *(own_bindings_lines(table.cells) or ["python benchmarks/conformance_page.py --from R"]),
        "```",
        "",
        "`rig report --conformance R` prints every grid for any results folder, with each cell's runs in its "
        "figures (`rig report --conformance docs/conformance/store`: these); the HTML page of `rig report R` "
        "shows them too where its scenarios ran on more than one core or shape.",
        "",
    ]
    text = "\n".join(lines)
    if len({c.shape for c in table.cells}) > 1:
        text += "\n" + cft.shape_moves_markdown(table.cells, level=2)
    return text.rstrip() + "\n"


def grid_page(g) -> str:
    """One API and shape's page: its title, what it holds, the grid, its rows' descriptions, its figures."""
    n = _counts(list(g.cells.values()))
    head = [
        f"# {cft.grid_title(g)}",
        "",
        f"[Conformance](../conformance.md) through {cf.API_NAMES.get(g.engine, g.engine)} in the {g.shape} shape: "
        f"{n['cells']:,} cells, " + ", ".join(f"{n[h]:,} {h}" for h in cf.HEALTH)
        + f"; {n['findings']:,} finding(s), {n['unjudged']:,} unjudged. The runs of each cell: "
        "`rig report --conformance docs/conformance/store`.",
        "",
    ]
    return "\n".join(head) + "\n" + cft.grid_page(g, "../conformance.md#legend")


def pages(store: str | Path = STORE, known_path: str | Path | None = None) -> dict[str, str]:
    """Every page's text by its path under docs/: the index (``conformance.md``), then one page
    per API and shape (``page_path``)."""
    cycles, table = _table(store, known_path)
    return {PAGE.name: index(cycles, table), **{page_path(g): grid_page(g) for g in table.grids}}


def page(store: str | Path = STORE, known_path: str | Path | None = None) -> str:
    """Every page's text (``pages``) as one string, the index first: what a test searches."""
    return "\n".join(pages(store, known_path).values())


def write_pages(texts: dict[str, str], docs: Path = DOCS) -> list[Path]:
    """Write ``texts`` (``pages``) under ``docs``, each atomically, and remove the grid pages no
    longer generated (a shape or API that left the store). Returns the paths written."""
    from rig.commands.report import write_atomically

    written = []
    for rel, text in texts.items():
        write_atomically(docs / rel, text)
        written.append(docs / rel)
    for old in sorted((docs / PAGES.name).glob("*.md")):
        if old not in written:
            old.unlink()
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", metavar="RESULTS",
                    help="keep this results folder's scenario cycles as the store first")
    ap.add_argument("--add", action="store_true",
                    help="with --from: add its cells (each cell it holds, a scenario or control in a shape on "
                         "a core and engine, replaces the store's) instead of replacing the store")
    ap.add_argument("--pool", action="store_true",
                    help="with --from: add its cells, a cell run again pooled with its kept cycles where they ran "
                         "the same bindings (more cycles of a race), else replacing them")
    ap.add_argument("--bisects", metavar="RESULTS",
                    help="add the bisections of this results folder (rig bisect's --results) to the store")
    ap.add_argument("--store", type=Path, default=STORE, help="the kept store (default docs/conformance/store)")
    ap.add_argument("--docs", type=Path, default=DOCS,
                    help="where the pages go: DOCS/conformance.md and DOCS/conformance/*.md (default docs)")
    args = ap.parse_args(argv)
    try:
        if args.source:
            n, size = keep_store(args.source, args.store, add=args.add or args.pool, pool=args.pool)
            print(f"kept {n:,} scenario cycle(s) in {args.store} ({size / 1024:,.0f} KiB)")
        if args.bisects:
            print(f"kept {keep_bisects(args.bisects, args.store)} bisection(s) in {args.store}")
        if args.store == STORE:
            _keep_variants(args.store)
        written = write_pages(pages(args.store), args.docs)
    except RigError as e:
        print(f"conformance_page: error: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(f"page: {path} ({path.stat().st_size / 1024:,.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
