"""The published conformance page, docs/conformance.md, generated from the reference run's store
kept in the repository (docs/conformance/store/: the scenario cycles only, the columns the grid
reads, and the batch sizes of the batched cells' windows; one Parquet file per table, core and date).

    python benchmarks/conformance_page.py                 # regenerate the page from the kept store
    python benchmarks/conformance_page.py --from RESULTS  # keep RESULTS' scenario cycles as the store, then regenerate
    python benchmarks/conformance_page.py --from RESULTS --add   # add RESULTS' cells to it (replacing those run again)

RESULTS is the --results of a reviewed `rig matrix --scenarios all ...` run. The page is a pure
function of the kept store and rig/known_verdicts.csv: tests/test_conformance.py regenerates it
and compares it with the page byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rig.analysis import conformance as cf  # noqa: E402
from rig.analysis import conformance_text as cft  # noqa: E402
from rig.common.errors import RigError  # noqa: E402

STORE = ROOT / "docs" / "conformance" / "store"
PAGE = ROOT / "docs" / "conformance.md"
MATRIX = "rig matrix --scenarios all --runtimes all --engines capi,tritonserver --cycles 3 --results R"
# What the kept store holds of each cycle: the grid's columns, those every stored cycle must have
# (the store reads a file without them as foreign), and those an older row's verdicts are re-read from.
VERDICT_INPUTS = ("stop_error", "finalize_errors", "requests", "errors")


def kept_columns() -> list[str]:
    from rig.contract.rows import CycleRow
    from rig.store import arrow_schema

    schema = arrow_schema(CycleRow)
    required = [f.name for f in schema if not f.nullable]
    return [c for c in dict.fromkeys([*required, *cf.COLUMNS, *VERDICT_INPUTS]) if c in schema.names]


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


def keep_store(results: str | Path, store: Path = STORE, add: bool = False) -> tuple[int, int]:
    """Replace ``store`` with the scenario cycles of ``results`` (``kept_columns`` only), and the
    windows of its batched cells that recorded batch sizes (``kept_window_columns``), one merged
    file per table, core and date. With ``add``, the store keeps its cycles (and their windows) of
    every cell (scenario or control, shape, engine and core) that ``results`` does not hold: a cell
    run again replaces the cell, the others stay. Returns (cycles kept, bytes written)."""
    import pandas as pd

    from rig.contract.rows import CycleRow, WindowRow
    from rig.store import Store

    columns = kept_columns()
    cycles = Store.open(results).read("cycles", columns=[*columns, "triton_version", "date"])
    cycles = cycles[cycles["scenario"].notna() & (cycles["scenario"] != "baseline")]
    if cycles.empty:
        raise RigError(f"{results} holds no scenario cycles: give the --results of rig matrix --scenarios all")
    windows = [_batch_windows(Store.open(results), cycles)]
    if add and store.exists():
        kept = Store.open(store).read("cycles", columns=[*columns, "triton_version", "date"])
        new = set(_cell_keys(cycles))
        kept = kept[[k not in new for k in _cell_keys(kept)]]
        windows.append(_batch_windows(Store.open(store), kept))
        cycles = pd.concat([kept, cycles], ignore_index=True)
    if store.exists():
        foreign = [p.name for p in store.iterdir() if p.name not in ("cycles", "windows")]
        if foreign:
            raise RigError(f"{store} holds more than a kept store ({', '.join(sorted(foreign))}): remove it by hand")
        shutil.rmtree(store)
    out = Store(store)
    _put(out, "cycles", cycles, columns, CycleRow, ["run_id", "cycle"])
    windows = [w for w in windows if w is not None]
    if windows:
        _put(out, "windows", pd.concat(windows, ignore_index=True), kept_window_columns(), WindowRow,
             ["run_id", "cycle", "window"])
    return len(cycles), sum(p.stat().st_size for p in store.rglob("*.parquet"))


def build_lines(versions: list[str]) -> list[str]:
    """The builds a reproduction needs first: every core no PyPI wheel bundles (rig runtime build)."""
    from rig.parent.runtime import PYTRITON_CORE

    built = [v for v in versions if v not in PYTRITON_CORE.values()]
    if not built:
        return []
    return [f"for v in {' '.join(built)}; do rig runtime build $v --sources ../shared/triton-src; done"]


def page(store: str | Path = STORE, known_path: str | Path | None = None) -> str:
    """The page's text: a title, what the grid shows and how it was made, the legend, the grids."""
    from rig.store import Store

    columns = [c for c in cf.COLUMNS if c in kept_columns() or c == "triton_version"]
    kept = Store.open(store)
    cycles = kept.read("cycles", columns=[*columns, "date"])
    table = cf.build(cycles, known_path, windows=kept.read("windows", columns=["run_id", "cycle", "batch_sizes"]))
    if not table.cells:
        raise RigError(f"{store} holds no scenario cycles")
    versions = sorted({c.triton_version for c in table.cells}, key=cf.version_key)
    apis = list(dict.fromkeys(g.engine for g in table.grids))
    shapes = list(dict.fromkeys(g.shape for g in sorted(table.grids, key=lambda g: cf.shape_order(g.shape))))
    dates = sorted(set(cycles["date"].astype(str)))
    runs = sorted({r for c in table.cells for r in c.run_ids})
    counts = ", ".join(f"{n} {j}" for j, n in table.counts.items())
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    intro = [
        "# Conformance",
        "",
        "What each [lifecycle scenario](guide/scenarios.md) and its negative control gave on each Triton core, "
        "through each API and in each model shape, judged against the verdicts it is known to give "
        "(`rig/known_verdicts.csv`, written by `rig scenarios --accept RESULTS` from a reviewed run). One grid per "
        "API and shape: a row per scenario, a column per core in version order, each cell the verdicts its "
        "cycles gave, linked to its figures (cycles, the three verdicts counted, in a batched shape the batch "
        "sizes Triton formed, stop p50, finalize, the runs) in the table under the grid; *changed in* names the "
        "cores where a scenario's verdicts changed.",
        "",
        f"This page is generated from the reference run kept in `docs/conformance/store/` ({len(cycles):,} "
        f"scenario cycles from {len(runs):,} run(s), {when}; Triton {', '.join(versions)}; "
        f"{', '.join(f'`{a}`' for a in apis)}; {', '.join(shapes)}): {counts}. To reproduce it, run the matrix "
        "and keep its scenario cycles as the store, which regenerates the page:",
        "",
        "```sh",
        *build_lines(versions),
        MATRIX,
        "python benchmarks/conformance_page.py --from R",
        "```",
        "",
        "`rig report --conformance R` prints the same grids for any results folder (the HTML page of "
        "`rig report R` shows them too where its scenarios ran on more than one core or shape).",
        "",
    ]
    return "\n".join(intro) + "\n" + cft.to_markdown(table, level=2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", metavar="RESULTS",
                    help="keep this results folder's scenario cycles as the store first")
    ap.add_argument("--add", action="store_true",
                    help="with --from: add its cells (each cell it holds, a scenario or control in a shape on "
                         "a core and engine, replaces the store's) instead of replacing the store")
    ap.add_argument("--store", type=Path, default=STORE, help="the kept store (default docs/conformance/store)")
    ap.add_argument("--output", type=Path, default=PAGE, help="the page (default docs/conformance.md)")
    args = ap.parse_args(argv)
    try:
        if args.source:
            n, size = keep_store(args.source, args.store, add=args.add)
            print(f"kept {n:,} scenario cycle(s) in {args.store} ({size / 1024:,.0f} KiB)")
        text = page(args.store)
        from rig.commands.report import write_atomically

        write_atomically(args.output, text)
    except RigError as e:
        print(f"conformance_page: error: {e}", file=sys.stderr)
        return 2
    print(f"page: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
