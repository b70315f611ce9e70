"""The batch sizes Triton formed, cell by cell: the matrix reads them back from each cell's stored
windows and shows them in its tables; the conformance page shows them for every batched cell
(``never above 1`` where no execute ran more than one request, ``not measured`` where its cycles
stored no window that holds them), from `rig report --conformance` and from the kept store of
benchmarks/conformance_page.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from helpers import ROOT, cycle_row
from rig.analysis.conformance import table as cf
from rig.analysis.conformance import html as cfh
from rig.analysis.conformance import text as cft
from rig.analysis import matrix as M
from rig.cli import main
from rig.contract import server_stats as ss
from rig.contract.rows import window_row
from rig.store import Store

sys.path.insert(0, str(ROOT / "benchmarks"))

import conformance_page  # noqa: E402

KNOWN_HEAD = "scenario,control,shape,engine,triton_version,lifecycle,load,growth,cycles,run_id\n"


def _sizes(batches: dict | None) -> str | None:
    return None if batches is None else json.dumps({str(s): n for s, n in batches.items()})


# --- the arithmetic -------------------------------------------------------------------------------

def test_batch_sizes_summed_over_windows_with_their_mean():
    assert ss.summed_batches(['{"1": 40, "8": 1000}', None, float("nan"), '{"1": 5, "8": 221}', ""]) == \
        {1: 45, 8: 1221}
    assert ss.summed_batches([None, float("nan")]) is None and ss.summed_batches([]) is None  # none recorded
    assert ss.summed_batches(["{}"]) == {}  # read, and nothing executed
    assert ss.mean_batch({1: 45, 8: 1221}) == (45 + 8 * 1221) / 1266 and ss.mean_batch({}) is None
    assert ss.batch_compact({1: 45, 8: 1221}) == "1x45 8x1221 (mean 7.8)"
    assert ss.batch_compact(None) == "-" and ss.batch_compact({}) == "none formed"
    assert ss.batch_compact({s: 10 + s for s in range(1, 11)}, most=3) == "8x18 9x19 10x20 +7 sizes (mean 6.0)"


# --- the matrix -----------------------------------------------------------------------------------

def test_a_matrix_cell_reads_its_batch_sizes_from_its_windows_and_the_tables_show_them():
    windows = [{"batch_sizes": '{"1": 40, "8": 1000}'}, {"batch_sizes": '{"1": 5, "8": 221}'}, {"batch_sizes": None}]
    figs = M.batch_figures(windows)
    assert figs["batches"] == {1: 45, 8: 1221} and round(figs["mean_batch"], 2) == 7.75
    assert M.batch_figures(pd.DataFrame(windows)) == figs  # a frame, as the store reads it
    assert M.batch_figures([]) == {"batches": None, "mean_batch": None}  # a fixed count: no windows
    assert M.batch_figures(pd.DataFrame({"batch_sizes": [None, None]}))["batches"] is None  # statistics off
    cell = {"runtime": "0.7.0", "engine": "capi", "retain": "none", "status": "pass", "reason": "",
            **M.cell_figures([{"outcome": "clean", "load_outcome": "ok", "triton_version": "2.51.0"}]), **figs}
    table = M.format_table([cell, {**cell, "batches": None}]).splitlines()
    assert "| batches |" in table[0] and "| 1x45 8x1221 (mean 7.8) |" in table[2]
    assert table[3].split(" | ")[7] == "-"
    scen = M.format_scenarios([{**cell, "scenario": "execute-raises", "shape": "batched", "expected": None}])
    head, _, row = scen.splitlines()
    assert head.split(" | ")[8] == "batches" and row.split(" | ")[8] == "1x45 8x1221 (mean 7.8)"


def _cell_store(root: Path, run_id: str, batches: list[dict | None] | None, version: str = "2.51.0", **kw) -> None:
    """A cell's run in a store: two cycles, and (``batches`` not None) each cycle's windows, one per entry."""
    store = Store(root)
    for c in (1, 2):
        if batches is not None:
            ws = [window_row(run_id, "capi", "numpy", {"cycle": c, "window": i + 1, "requests": 10,
                                                     "batch_sizes": _sizes(b)}) for i, b in enumerate(batches)]
            store.write("windows", ws, version, f"c{c:06d}")
        store.write("cycles", [cycle_row(c, run_id, load_outcome="ok", **kw)], version, f"c{c:06d}")


def test_the_matrix_reads_each_cells_batch_sizes_back_from_the_store(tmp_path):
    from rig.workflows import matrix_run

    _cell_store(tmp_path, "batched", [{1: 3, 8: 50}, {8: 60}])
    _cell_store(tmp_path, "fixed", None)  # a fixed count of requests: no windows
    rows = {}
    for run_id in ("batched", "fixed"):
        rows[run_id] = {"run_id": run_id, "status": "pass", "reason": ""}
        matrix_run._figures(rows[run_id], str(tmp_path), "cycles", "-")
    assert rows["batched"]["batches"] == {1: 6, 8: 220} and rows["batched"]["cycles"] == 2
    assert rows["fixed"]["batches"] is None and rows["fixed"]["cycles"] == 2 and rows["fixed"]["reason"] == ""
    assert "| 1x6 8x220 (mean 7.8) |" in M.format_table([{**rows["batched"], "runtime": "0.7.0"}])
    # a fixed count of requests stores no window: its cycles' own batch sizes (schema 15) say
    _cell_store(tmp_path, "counted", None, batch_sizes='{"1": 2, "4": 25}')
    row = {"run_id": "counted", "status": "pass", "reason": ""}
    matrix_run._figures(row, str(tmp_path), "cycles", "-")
    assert row["batches"] == {1: 4, 4: 50} and row["reason"] == ""


# --- the conformance page -------------------------------------------------------------------------

def _cycles(scenario: str, shape: str | None, run_id: str, n: int = 2, version: str = "2.51.0") -> list[dict]:
    return [{"run_id": run_id, "cycle": i + 1, "scenario": scenario, "control": False, "shape": shape,
             "engine": "capi", "triton_version": version, "outcome": "clean", "load_outcome": "ok",
             "growth_outcome": "ok", "stop_latency_s": 2.0, "finalize_expected": 1, "finalize_before_stop": 1,
             "finalize_after_stop": 0} for i in range(n)]


def _windows(run_id: str, cycle: int, *batches: dict | None) -> list[dict]:
    return [{"run_id": run_id, "cycle": cycle, "window": i + 1, "batch_sizes": _sizes(b)} for i, b in enumerate(batches)]


def _table(tmp_path: Path):
    known = tmp_path / "known.csv"
    known.write_text(KNOWN_HEAD + "".join(f"execute-raises,0,\"{sh}\",capi,2.51.0,clean,ok,ok,2,m\n"
                                          for sh in ("batched", "max-batch", "unbatched", "decoupled,batched")))
    frame = pd.DataFrame(_cycles("execute-raises", "batched", "rb") + _cycles("execute-raises", "max-batch", "rm")
                         + _cycles("execute-raises", None, "ru") + _cycles("execute-raises", "decoupled,batched", "rf"))
    windows = pd.DataFrame(_windows("rb", 1, {1: 4, 8: 100}, {8: 120}) + _windows("rb", 2, {2: 1, 8: 90}, None)
                           + _windows("rm", 1, {1: 30}) + _windows("rm", 2, {1: 25})
                           + _windows("ru", 1, {1: 50})   # an unbatched cell: not shown
                           + _windows("rx", 1, {8: 999}))  # another run's: not counted
    return cf.build(frame, known, windows=windows)


def test_every_batched_cell_shows_the_batch_sizes_it_formed(tmp_path):
    table = _table(tmp_path)
    by = {c.shape: c for c in table.cells}
    assert by["batched"].batches == {1: 4, 2: 1, 8: 310} and by["max-batch"].batches == {1: 55}
    assert by["decoupled,batched"].batches is None  # its cycles stored no window with them
    assert by["unbatched"].batches == {1: 50}
    assert cft.batches_text(by["batched"]) == "1x4 2x1 8x310 (mean 7.9)"
    assert cft.batches_text(by["max-batch"]) == "never above 1 (1x55)"
    assert cft.batches_text(by["decoupled,batched"]) == "not measured"
    assert cf.is_batched("decoupled,batched") and cf.is_batched("max-batch") and not cf.is_batched("instances-2")
    md = cft.to_markdown(table)
    sections = {s.split("\n", 1)[0]: s for s in md.split("\n## ")[1:]}
    batched = sections["C API (`capi`), batched"]
    assert "| cell | cycles | lifecycle | load | growth | batches formed | known |" in batched
    assert "| ok 2 | 1x4 2x1 8x310 (mean 7.9) | clean / ok / ok |" in batched and cft.BATCH_NOTE in batched
    assert "| never above 1 (1x55) |" in sections["C API (`capi`), max-batch"]
    assert "| not measured |" in sections["C API (`capi`), decoupled,batched"]
    unbatched = sections["C API (`capi`), unbatched"]
    assert "batches formed" not in unbatched and "1x50" not in unbatched  # no batch to speak of
    page = cfh.to_html(table)
    assert "<th>batches formed</th>" in page and "<td>never above 1 (1x55)</td>" in page
    assert page.count("batches formed: the batch sizes") == 3  # the note under each batched grid's figures


def test_without_windows_a_batched_cell_is_not_measured(tmp_path):
    known = tmp_path / "known.csv"
    known.write_text(KNOWN_HEAD)
    (cell,) = cf.cells(pd.DataFrame(_cycles("execute-raises", "batched", "rb")), known)
    assert cell.batches is None and cft.batches_text(cell) == "not measured"
    assert cf.cycle_batches(None) == {} and cf.cycle_batches(pd.DataFrame(columns=["batch_sizes"])) == {}
    assert cf.batched_runs(pd.DataFrame(_cycles("execute-raises", "batched", "rb") + _cycles("x", None, "ru")
                                        + _cycles("baseline", "batched", "rz"))) == ["rb"]


def _scenario_store(root: Path) -> None:
    _cell_store(root, "rb", [{1: 2, 8: 40}], scenario="execute-raises", shape="batched")
    _cell_store(root, "rm", [{1: 20}], scenario="execute-raises", shape="max-batch")
    _cell_store(root, "rf", None, scenario="execute-raises", shape="decoupled,batched")


def test_rig_report_conformance_shows_the_batch_sizes_from_the_store(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RIG_KNOWN_VERDICTS", str(tmp_path / "known.csv"))
    (tmp_path / "known.csv").write_text(KNOWN_HEAD)
    _scenario_store(tmp_path / "r")
    assert main(["report", "--conformance", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "| 1x4 8x80 (mean 7.7) |" in out.split("## C API (`capi`), batched")[1].split("##")[0]
    assert "| never above 1 (1x40) |" in out and "| not measured |" in out


def test_the_kept_store_keeps_the_batched_cells_windows_and_the_page_shows_them(tmp_path):
    _scenario_store(tmp_path / "r")
    Store(tmp_path / "r").write("windows", [window_row("other", "capi", "numpy", {"cycle": 1, "window": 1,
                                                                                  "batch_sizes": '{"8": 9}'})],
                                "2.51.0", "c000001")  # a run with no scenario cycle: not kept
    kept = tmp_path / "kept"
    n, _ = conformance_page.keep_store(tmp_path / "r", kept)
    assert n == 6 and sorted(p.name for p in kept.iterdir()) == ["cycles", "windows"]
    windows = Store.open(kept).read("windows")
    assert sorted(set(windows["run_id"])) == ["rb", "rm"] and len(windows) == 4
    page = conformance_page.page(kept, tmp_path / "none.csv")
    assert "| 1x4 8x80 (mean 7.7) |" in page and "| never above 1 (1x40) |" in page and "| not measured |" in page
    # a store kept again (with --add) keeps the windows of the cycles it keeps
    assert conformance_page.keep_store(tmp_path / "r", kept, add=True)[0] == 6
    assert len(Store.open(kept).read("windows")) == 4



def test_a_cell_added_again_replaces_only_that_cell(tmp_path):
    """--add keeps every other cell of the same core and engine: a rerun of the batched cells
    leaves the others on the page, and the rerun cell holds only the new run's cycles."""
    _scenario_store(tmp_path / "r")
    kept = tmp_path / "kept"
    assert conformance_page.keep_store(tmp_path / "r", kept)[0] == 6
    _cell_store(tmp_path / "again", "again", [{4: 10}], scenario="execute-raises", shape="batched")
    assert conformance_page.keep_store(tmp_path / "again", kept, add=True)[0] == 6
    after = Store.open(kept).read("cycles")
    assert sorted(set(after["run_id"])) == ["again", "rf", "rm"]
    assert set(after[after["shape"] == "batched"]["run_id"]) == {"again"}
    windows = Store.open(kept).read("windows")
    assert set(windows["run_id"]) == {"again", "rm"}
