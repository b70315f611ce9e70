"""`rig report`: known differences named with their direction, none found between two runs of
one configuration, versions side by side with a nightly step flagged on its night, bad input in
one line (exit 2), and the HTML page in a real headless Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from stores import real_results  # noqa: F401  (the session's store, a fixture)

from rig.common import hdr
from rig.cli import main
from rig.store import Store
from rig.contract.rows import CycleRow, RunRow, WindowRow


def report(capsys, *args) -> tuple[int, str, str]:
    rc = main(["report", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


# --- a synthetic multi-version store written through rig.store.Store -------------------------

VERSIONS = ("2.49.0", "2.50.0", "2.51.0")
NIGHTS = [f"2026-11-{d:02d}" for d in range(1, 9)]
STEP_NIGHT = NIGHTS[5]  # 2.51.0's throughput drops by a third from this night on


def _hist(rng, median_us: float) -> str:
    h = hdr.new()
    for v in rng.lognormal(np.log(median_us), 0.3, 300):
        h.record_value(int(v))
    return hdr.encode(h)


def write_nightly(root: Path, nights=NIGHTS, versions=VERSIONS) -> Path:
    rng = np.random.default_rng(7)
    store = Store(root)
    for night in nights:
        for v in versions:
            run_id = f"n{night.replace('-', '')}-{v}"
            store.write("runs", [RunRow(run_id, f"{night}T01:00:00+00:00", "soak", "ci", "x86", None, "capi",
                                        "embedded", "numpy", "", "0.1.0", "3.11")], v, "run", date=night)
            base = {"2.49.0": 10_000, "2.50.0": 12_000, "2.51.0": 14_000}[v]
            if v == "2.51.0" and night >= STEP_NIGHT:
                base *= 0.66
            for c in range(1, 6):
                tp = base * rng.normal(1, 0.02)
                p99 = 1e6 / tp * 3
                ws = tuple(WindowRow(run_id, c, k, "capi", "numpy", "rig", float(k - 1), 1.0, "closed", 2, None,
                                     int(tp), 0, tp * rng.normal(1, 0.01), p99 / 3, p99 / 2, p99, p99 * 1.5,
                                     p99 * 2, p99 / 3, None, None, None, None, None, _hist(rng, p99 / 3))
                           for k in (1, 2))
                store.write("windows", list(ws), v, f"c{c:06d}", date=night)
                stop = 2.0 + rng.normal(0, 0.01) + (1.0 if v == "2.49.0" else 0.0)
                row = CycleRow(run_id, c, "capi", "numpy", "none", "clean", "fresh-process", "stop",
                               f"{night}T01:00:00+00:00", 0.15, stop, 1, 1, 0, 0, 0, 0, 0, int(tp * 2), 0, True,
                               tp, 2.0, 100, 9e7, 9, 40, 4e7, None, 4.5, 0.2, None, "ok", None)
                store.write("cycles", [row], v, f"c{c:06d}", date=night)
    return root


@pytest.fixture(scope="module")
def nightly(tmp_path_factory) -> Path:
    return write_nightly(tmp_path_factory.mktemp("nightly") / "results")


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return write_nightly(tmp_path_factory.mktemp("small") / "results", NIGHTS[:1], VERSIONS[:2])


@pytest.mark.parametrize("args, says", [
    (["{missing}"], "no results folder"),
    (["{empty}"], "is empty: no runs stored there yet"),
    (["{foreign}"], "is not a results folder"),
    (["{tables}"], "holds no cycles or windows"),
    (["{small}", "--baseline", "9.9.9"], "no Triton version 9.9.9"),
    (["{small}", "--where", "run_id=nope"], "matches no run"),
    (["{small}", "--where", "engine=cuda"], "matches nothing"),
    (["{small}", "--where", "colour=red"], "no such column"),
    (["{small}", "--where", "engine"], "write KEY=VALUE"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, small, args, says):
    (tmp_path / "empty").mkdir()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not results")
    (tmp_path / "tables" / "cycles").mkdir(parents=True)
    paths = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "foreign": tmp_path / "foreign",
             "tables": tmp_path / "tables", "small": small}
    rc, out, err = report(capsys, *[a.format(**paths) for a in args], "--out", tmp_path / "r.html")
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("rig: error: ") and says in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_versions_side_by_side_and_the_step_flagged_on_its_night(capsys, tmp_path, nightly):
    out_html = tmp_path / "r.html"
    rc, md, err = report(capsys, nightly, "--out", out_html)
    assert rc == 0, err
    assert "Compared by triton_version; baseline triton_version=2.49.0 (the oldest version)" in md
    life = md.split("## Lifecycle")[1].split("## Performance")[0]
    assert all(f"| {v} |" in life for v in VERSIONS)
    # 2.49.0 stops a second slower: both newer versions are named, lower
    assert "triton_version=2.50.0 vs 2.49.0: stop latency lower" in md
    assert "triton_version=2.51.0 vs 2.49.0: stop latency lower" in md
    trends = md.split("## Trends across nights")[1]
    steps = [line for line in trends.splitlines() if line.startswith("| 2.51.0 | infer/s |")]
    assert len(steps) == 1 and f"| {STEP_NIGHT} |" in steps[0], trends
    assert not any(line.startswith(("| 2.49.0 | infer/s", "| 2.50.0 | infer/s")) for line in trends.splitlines())
    page = out_html.read_text()
    assert page.count('<img src="data:image/png;base64,') >= 5 and "http" not in page.split("<style>")[0].lower()
    # a baseline asked for, and a filter
    rc, md, _ = report(capsys, nightly, "--baseline", "2.51.0", "--where", "triton_version=2.50.0,2.51.0",
                       "--out", out_html)
    assert rc == 0 and "baseline triton_version=2.51.0 (as asked)" in md and "| 2.49.0 |" not in md


def test_a_run_against_a_run_leaves_throughput_and_latency_unconfirmed(capsys, tmp_path):
    """One run a side (one night): the cycles of each run share its machine's state, so 2.51.0's
    40 % more throughput is named as unconfirmed, never significant, while its second less of stop
    latency is; two nights (two runs a side) make the same throughput change significant."""
    one = write_nightly(tmp_path / "one", NIGHTS[:1], ("2.49.0", "2.51.0"))
    rc, md, err = report(capsys, one, "--out", tmp_path / "r.html")
    assert rc == 0, err
    assert "triton_version=2.51.0 vs 2.49.0: stop latency lower" in md
    assert "triton_version=2.51.0 vs 2.49.0: throughput @ closed 2 higher" in md
    line = next(x for x in md.splitlines() if x.startswith("triton_version=2.51.0 vs 2.49.0: throughput"))
    assert line.endswith("unconfirmed, one run a side (its cycles share one machine state); run each side again to test it")
    diffs = md.split("## Differences from the baseline")[1]
    assert "| throughput @ closed 2 | 10," in diffs and "| unconfirmed |" in diffs
    assert "| stop latency |" in diffs and "| yes |" in diffs
    page = (tmp_path / "r.html").read_text()
    assert '<tr class="unconfirmed">' in page and '<tr class="flag">' in page
    two = write_nightly(tmp_path / "two", NIGHTS[:2], ("2.49.0", "2.51.0"))
    rc, md, err = report(capsys, two, "--out", tmp_path / "r2.html")
    assert rc == 0, err
    line = next(x for x in md.splitlines() if x.startswith("triton_version=2.51.0 vs 2.49.0: throughput"))
    assert "unconfirmed" not in line and "| unconfirmed |" not in md


# --- a real store: three soaks of the numpy template ------------------------------------------

@pytest.fixture(scope="module")
def real(real_results) -> tuple[Path, dict]:
    """The session's real store (tests/stores.py), shared with the gate's tests."""
    return real_results["root"], {k: real_results[k] for k in ("none_a", "none_b", "keep")}


@pytest.mark.slow
def test_retained_response_is_named_with_its_direction(capsys, tmp_path, real):
    results, runs = real
    rc, md, err = report(capsys, results, "--where", f"run_id={runs['none_a']},{runs['keep']}",
                         "--out", tmp_path / "r.html")
    assert rc == 0, err
    assert "Compared by retain; baseline retain=none (the rig's default)" in md
    assert "retain=last-response vs none: finalize success lower (100 % → 0 %" in md


@pytest.mark.slow
def test_two_runs_of_one_configuration_differ_in_nothing(capsys, tmp_path, real):
    results, runs = real
    out_html = tmp_path / "r.html"
    rc, md, err = report(capsys, results, "--where", f"run_id={runs['none_a']},{runs['none_b']}",
                         "--out", out_html)
    assert rc == 0, err
    assert f"Compared by run_id; baseline run_id={runs['none_a']} (the earliest run)" in md
    assert f"No significant difference from run_id={runs['none_a']}" in md
    diffs = md.split("## Differences from the baseline")[1]
    assert "| finalize success |" in diffs and "| stop latency |" in diffs and "| throughput @ closed 1 |" in diffs
    assert "| yes |" not in diffs  # throughput and latency of one run against one: "unconfirmed" at most


# --- the page in a real browser ----------------------------------------------------------------

def _browser():
    from helpers import browser

    return browser(2200)


@pytest.mark.slow
def test_the_page_renders_in_headless_chromium(capsys, tmp_path, nightly):
    page = tmp_path / "report.html"
    rc, _, err = report(capsys, nightly, "--out", page)
    assert rc == 0, err
    drv = _browser()
    try:
        drv.get(page.resolve().as_uri())
        assert drv.title == f"rig report: {nightly}"
        assert len(drv.find_elements("css selector", "table")) >= 4
        assert [h.text for h in drv.find_elements("css selector", "h2")][:2] == ["Lifecycle", "Performance"]
        images = drv.execute_script("return [...document.images].map(i => [i.complete, i.naturalWidth])")
        assert len(images) >= 5 and all(ok and w > 0 for ok, w in images), images
        errors = [e for e in drv.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
        if os.environ.get("RIG_REPORT_SCREENSHOT"):
            drv.set_window_size(1280, max(1200, drv.execute_script("return document.body.scrollHeight")))
            assert drv.save_screenshot(os.environ["RIG_REPORT_SCREENSHOT"])
    finally:
        drv.quit()


def test_a_store_of_soaks_without_windows_is_reported(capsys, tmp_path, small):
    """Soaks without a workload store cycles and no windows: the lifecycle is reported, with
    no performance section to fail on."""
    import shutil

    root = tmp_path / "results"
    shutil.copytree(small, root, ignore=shutil.ignore_patterns("windows"))
    rc, md, err = report(capsys, root, "--out", tmp_path / "r.html")
    assert rc == 0, err
    assert "clean" in md and (tmp_path / "r.html").exists()


def test_where_outcome_matches_an_older_cycles_upgraded_verdict(tmp_path):
    """A cycle stored before schema 6 had one verdict (``infer_error`` was the load's); it reads
    back upgraded (lifecycle ``clean``, load ``errors``), and ``--where`` filters what it reads as."""
    import dataclasses

    import pyarrow as pa
    import pyarrow.parquet as pq

    from rig.analysis.report import page as rp
    from rig.store import arrow_schema

    old = arrow_schema(CycleRow)
    old = old.remove(old.get_field_index("load_outcome"))
    rows = [{f.name: None for f in dataclasses.fields(CycleRow)} for _ in range(3)]
    for i, (r, outcome) in enumerate(zip(rows, ("infer_error", "exit_timeout", "clean")), 1):
        r.update(run_id="r1", cycle=i, engine="capi", model="numpy", retain="none", outcome=outcome, errors=3 * (i == 1),
                 requests=9, restart="fresh-process", stop_strategy="stop", started_at="2026-01-01T00:00:00+00:00",
                 finalize_expected=1, finalize_before_stop=1, schema_version=5,
                 stop_error="Exit timeout expired" if outcome == "exit_timeout" else None)
    d = tmp_path / "cycles" / "triton_version=2.51.0" / "date=2026-01-01"
    d.mkdir(parents=True)
    data = {f.name: [r[f.name] for r in rows] for f in old}
    pq.write_table(pa.Table.from_pydict(data, schema=old), d / "r1-c000001.parquet")
    data = rp.load(str(tmp_path), ["outcome", "load_outcome"])
    assert sorted(rp.select(data, ["outcome=clean"]).cycles.cycle) == [1, 3]
    assert list(rp.select(data, ["load_outcome=errors"]).cycles.cycle) == [1]
    with pytest.raises(Exception, match="matches nothing"):
        rp.select(data, ["outcome=infer_error"])


# --- the growth verdict: the "Growth and slowdown" section ---------------------------------


def write_growth(root: Path, memory: bool = True, cycles: int = 5) -> Path:
    """One run whose stub leaks 1 MB a request (every cycle ``leaking``), with 5 windows and 6
    memory samples a cycle (worker flat, stub growing) and throughput falling across its cycles."""
    import dataclasses
    import json

    from rig.contract.table_rows import MemoryRow

    from helpers import cycle_row

    store = Store(root)
    run_id = "grow1"
    store.write("runs", [RunRow(run_id, "2026-12-01T01:00:00+00:00", "soak", "ci", "x86", None, "capi", "embedded",
                                "numpy", "", "0.1.0", "3.11")], "2.51.0", "run", date="2026-12-01")
    for c in range(1, cycles + 1):
        tp = 1000.0 / c  # each cycle slower than the last
        ws = [WindowRow(run_id, c, k, "capi", "numpy", "rig", float(k - 1), 1.0, "closed", 2, None, int(tp), 0, tp,
                        100.0 * c, 100.0 * c, 200.0 * c, 250.0 * c, 300.0 * c, 100.0 * c, None, None, None, None, None,
                        None) for k in range(1, 6)]
        store.write("windows", ws, "2.51.0", f"c{c:06d}", date="2026-12-01")
        stub = 1e9 + (3 - abs(c - 3)) * 1e6  # bytes per 1,000 requests: the most in cycle 3
        row = cycle_row(c, run_id=run_id, started_at=f"2026-12-01T01:{c:02d}:00+00:00", load_outcome="ok",
                        requests=int(tp * 5), workload_s=5.0, throughput=tp, growth_outcome="leaking",
                        memory_samples=6, worker_growth_per_1k_b=1000.0, worker_growth_low_b=-500.0,
                        worker_growth_high_b=2500.0, stub_growth_per_1k_b=stub, stub_growth_low_b=stub - 1e6,
                        stub_growth_high_b=stub + 1e6, stub_growth_model="numpy", growth_requests=tp * 4,
                        growth_by_process=json.dumps({"stub numpy": [stub, stub - 1e6, stub + 1e6],
                                                      "worker": [1000.0, -500.0, 2500.0]}),
                        slowdown_pct=10.0 * c, slowdown_low_pct=5.0 * c)
        store.write("cycles", [dataclasses.replace(row, schema_version=11)], "2.51.0", f"c{c:06d}", date="2026-12-01")
        if memory:
            rows = [MemoryRow(run_id, c, s, s * 1.0, s * tp, "worker", None, None, 100, 3e7, None, "ci")
                    for s in range(6)]
            rows += [MemoryRow(run_id, c, s, s * 1.0, s * tp, "stub", "numpy", "numpy_0_0", 200, 2e7 + s * tp * 1e6,
                               None, "ci") for s in range(6)]
            store.write("memory", rows, "2.51.0", f"c{c:06d}", date="2026-12-01")
    return root


def test_growth_section_tables_the_verdicts_and_draws_memory_and_latency(capsys, tmp_path):
    root = write_growth(tmp_path / "results")
    page = tmp_path / "r.html"
    rc, md, err = report(capsys, root, "--out", page)
    assert rc == 0, err
    section = md.split("## Growth and slowdown")[1].split("\n## ")[0]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in section.splitlines()
            if ln.startswith("| ") and not ln.startswith(("| run |", "| ---"))]
    run, stub, worker = rows
    # the median stub growth: 1,002,000,000 B per 1,000 requests, in KB
    assert run[:6] == ["grow1", "5", "leaking 5", "1.000", "1,002,000", "numpy"]
    assert run[6] == "30.0"  # the median slowdown within a load
    thr, p50, slow = (float(v.replace(",", "")) for v in run[7:10])
    assert thr < -50 and p50 > 100 and slow > 100  # throughput fell and p50 rose across the cycles
    assert stub == ["grow1", "stub numpy", "5", "1,002,000", "1,001,000", "1,003,000"]
    assert worker == ["grow1", "worker", "5", "1.000", "-0.500", "2.500"]
    html = page.read_text()
    assert html.count('alt="Run grow1, cycle(s) 3, 5: each process') == 1  # five cycles: the largest and the last
    assert "Growth and slowdown</a>" in html  # in the page's navigation


def test_growth_section_picks_cycles_and_reads_each_process(tmp_path):
    from rig.analysis.report import growth as rg

    root = write_growth(tmp_path / "results", cycles=3)
    cycles = Store(root).read("cycles")
    assert rg.plotted(cycles) == [1, 2, 3]  # few cycles: all
    mem = rg.memory(str(root), "grow1", [2])
    assert sorted(set(mem["label"])) == ["stub numpy/numpy_0_0", "worker"] and set(mem["cycle"]) == {2}
    assert mem.loc[mem["label"] == "worker", "mib"].iloc[0] == pytest.approx(3e7 / 2**20)  # RSS
    lat = rg.latency(Store(root).read("windows"), "grow1", [2])
    assert list(lat["requests_done"]) == [500, 1000, 1500, 2000, 2500]
    png = rg.plots.png(rg.plots.growth_figure(mem, lat.iloc[:0], "t"))  # no windows: the panel says so
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # a row without growth_by_process reads the worker's and the largest stub's columns
    legacy = cycles.assign(growth_by_process=None, gpu_growth_per_1k_b=5.0)
    kinds = rg.by_process(legacy)
    assert sorted(set(kinds["process"])) == ["gpu", "stub numpy", "worker"]


def test_growth_section_without_memory_or_from_an_older_store_says_so(capsys, tmp_path, small):
    no_memory = write_growth(tmp_path / "nomem", memory=False)
    rc, md, err = report(capsys, no_memory, "--out", tmp_path / "a.html")
    assert rc == 0, err
    section = md.split("## Growth and slowdown")[1].split("\n## ")[0]
    assert "leaking 5" in section and "No memory samples stored for these runs" in section
    rc, md, err = report(capsys, small, "--out", tmp_path / "b.html")  # cycles before schema 11
    assert rc == 0, err
    assert "## Growth and slowdown\n\nNothing to show: no cycle here recorded a growth verdict" in md
