"""`rig report`'s scenario tables (rig.analysis.report.scenarios) over hand-built cycles: a row
per scenario, control, Triton version and engine; slopes per cycle in the order the cycles ran;
every cell a figure or a mark that says why not, with its footnote; both renderings."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import cycle_row

from rig.analysis.report import html as report_html, scenarios as rs

MiB = 1 << 20


def _frame(rows, version="2.51.0") -> pd.DataFrame:
    return pd.DataFrame([r.__dict__ for r in rows]).assign(triton_version=version)  # a partition column


def _cycles(name, n, run_id="r1", control=False, start=0, **figures):
    """``n`` cycles of ``name``; a figure given as a function of the cycle's position is called."""
    out = []
    for i in range(n):
        kw = {k: (v(i) if callable(v) else v) for k, v in figures.items()}
        kw.setdefault("outcome", "clean")
        kw.setdefault("load_outcome", "ok")
        out.append(cycle_row(i + 1, run_id=run_id, scenario=name, control=control,
                             started_at=f"2026-01-01T00:{start + i:02d}:00+00:00", **kw))
    return out


def test_slopes_per_cycle_least_squares():
    assert rs.slope([1000 + i * MiB for i in range(5)]) == pytest.approx(MiB)
    assert rs.slope([7e8] * 4) == pytest.approx(0, abs=1e-6)
    assert rs.slope([1.0, 2.0]) == rs.FEW == "n<3"
    assert rs.slope([None, None, None]) == rs.NOT_RECORDED
    # a cycle without the figure keeps its place: 0, -, 2 MiB, 3 MiB is 1 MiB a cycle
    assert rs.slope([0, None, 2 * MiB, 3 * MiB]) == pytest.approx(MiB)


def test_a_row_per_scenario_control_version_and_engine_with_its_slopes():
    leak = _cycles("reload", 4, shm_bytes=lambda i: 4096 + i * MiB, worker_rss_bytes=5e8,
                   stub_rss_bytes=lambda i: 3e7 + 1000 * i, stubs_killed=0, shm_regions_leaked=0,
                   stop_latency_s=2.0, finalize_expected=1, finalize_before_stop=1)
    leak = [leak[2], leak[0], leak[3], leak[1]]  # stored out of order: the slope follows started_at
    control = _cycles("reload", 2, run_id="r2", control=True, start=10, shm_bytes=4096, stop_latency_s=2.0)
    t = rs.rows(_frame(leak + control))
    assert list(t.columns) == [*rs.VERDICTS, *rs.LEFT[len(rs.ROW):]]
    assert list(t["scenario"]) == ["reload", "reload (control)"]
    row, ctl = t.iloc[0], t.iloc[1]
    assert row["/dev/shm B/cycle"] == pytest.approx(MiB, rel=1e-9)
    assert row["worker RSS B/cycle"] == pytest.approx(0, abs=1e-6)
    assert row["stub RSS B/cycle"] == pytest.approx(1000)
    assert ctl["/dev/shm B/cycle"] == "n<3" and ctl["worker RSS B/cycle"] == "—"
    assert row["as expected"] == "4/4" and row["expected"] == "clean / ok / ok" and row["upstream"] == "server#6223"
    assert row["finalize before stop"] == "4/4" and row["stubs killed"] == 0 and row["shm left"] == 0
    for col in ("stub crashes", "refused", "in flight (answered/failed/lost)", "RSS B/1k req"):
        assert row[col] == "—", col  # not recorded by this scenario's cycles
    assert ctl["finalize before stop"] == "—"


def test_client_figures_leaks_crashes_and_per_1k_medians():
    rows = _cycles("stop-in-flight", 3, in_flight=8, in_flight_answered=lambda i: 8 - i, in_flight_failed=lambda i: i,
                   in_flight_lost=0, stub_crashes=lambda i: i % 2, stubs_killed=1, shm_regions_leaked=2)
    rows += _cycles("memory", 3, run_id="r2", rss_per_1k_requests_b=lambda i: [300.0, 100.0, 200.0][i],
                    traced_per_1k_requests_b=lambda i: [10.0, None, 30.0][i])
    rows += _cycles("refused-request", 2, run_id="r3", refused=lambda i: 16, outcome="exit_timeout")
    t = rs.rows(_frame(rows)).set_index("scenario")
    flight = t.loc["stop-in-flight"]
    assert flight["in flight (answered/failed/lost)"] == "21/3/0 of 24"
    assert flight["stub crashes"] == 1 and flight["stubs killed"] == 3 and flight["shm left"] == 6
    assert t.loc["memory", "RSS B/1k req"] == 200.0 and t.loc["memory", "traced B/1k req"] == 20.0
    assert "memory (control)" not in t.index
    refused = t.loc["refused-request"]
    assert refused["refused"] == 32 and refused["as expected"] == "0/2" and refused["outcomes"] == "exit_timeout 2"


def test_what_is_not_known_says_so():
    rows = _cycles("retained-response", 1, outcome="exit_timeout")
    t = rs.rows(_frame(rows, version="2.30.0"))
    assert t.iloc[0]["expected"] == "not known on this core in shape unbatched" and t.iloc[0]["as expected"] == "not judged"
    t = rs.rows(_frame(_cycles("no-such-scenario", 1)))
    assert t.iloc[0]["expected"].startswith("unknown scenario") and t.iloc[0]["upstream"] == "—"
    # its control's verdicts are known wherever it runs
    t = rs.rows(_frame(_cycles("retained-response", 1, control=True), version="2.41.0"))
    assert t.iloc[0]["expected"] == "clean / ok / ok" and t.iloc[0]["as expected"] == "1/1"


def test_rows_in_registry_order_versions_ascending():
    rows = _cycles("finalize-raises", 1, outcome="finalize_error")
    rows += _cycles("retained-response", 1, run_id="r2", control=True)
    rows += _cycles("retained-response", 1, run_id="r3", outcome="exit_timeout")
    df = _frame(rows)
    df.loc[df.run_id == "r3", "triton_version"] = "2.48.0"
    df = pd.concat([df, df[df.run_id == "r3"].assign(run_id="r4", triton_version="2.51.0")])
    t = rs.rows(df)
    assert list(zip(t["scenario"], t["Triton"])) == [("retained-response", "2.48.0"), ("retained-response", "2.51.0"),
                                                    ("retained-response (control)", "2.51.0"),
                                                    ("finalize-raises", "2.51.0")]


def test_the_section_two_tables_and_their_footnotes_in_both_renderings():
    rows = _cycles("finalize-raises", 2, outcome="finalize_error", stop_latency_s=2.0, shm_bytes=0)
    rows += _cycles("finalize-raises", 2, run_id="r2", control=True, stop_latency_s=2.0)
    sec = rs.scenarios_section(_frame(rows))
    tables = [b for b in sec.blocks if isinstance(b, report_html.Table)]
    assert [list(t.frame.columns) for t in tables] == [rs.VERDICTS, rs.LEFT]
    md = report_html.markdown("r", [], [sec])
    assert "| finalize-raises (control) | 2.51.0 | capi | 2 | clean 2 | ok 2 | - 2 | clean / ok / ok | 2/2 | 2.000 | - |" \
        not in md
    assert "| finalize-raises (control) | 2.51.0 | capi | 2 | clean 2 | ok 2 | - 2 | clean / ok / ok | 2/2 | 2.000 | — | " \
           "the rig's own control |" in md
    assert rs.NOTES[rs.NOT_RECORDED] in md and rs.NOTES[rs.FEW] in md and rs.NOTES["not measured"] not in md
    page = report_html.page("r", [], [sec])
    assert page.count("<table>") == 2 and "n&lt;3" in page and "finalize-raises (control)" in page
    # a store of baseline cycles alone, or one before schema 9, has no section
    assert rs.scenarios_section(_frame(_cycles("baseline", 2))) is None
    assert rs.scenarios_section(_frame(rows).drop(columns=["scenario"])) is None


def test_ready_after_load_counts_the_cycles_whose_server_still_said_ready():
    rows = _cycles("stub-exits", 3, outcome="exit_timeout", load_outcome="errors", ready_after_load=True)
    rows += _cycles("stub-exits", 1, run_id="r2", start=3, outcome="exit_timeout", load_outcome="errors",
                    ready_after_load=False)
    rows += _cycles("metrics", 2, run_id="r3")  # an older cycle: not asked
    t = rs.rows(_frame(rows)).set_index("scenario")
    assert t.loc["stub-exits", "ready after load"] == "3/4"
    assert t.loc["metrics", "ready after load"] == rs.NOT_RECORDED


def test_growth_verdicts_counted_and_held_to_the_scenarios():
    """The third verdict: counted per row, expected as the scenario gives it (its control's and
    the baseline's ok); a cycle without one (an older store) or not_measured is not held against it."""
    leak = _cycles("leaks-memory", 3, growth_outcome=lambda i: ("leaking", "leaking", "not_measured")[i])
    control = _cycles("leaks-memory", 2, run_id="r2", control=True, start=10,
                      growth_outcome=lambda i: ("ok", "leaking")[i])
    slow = _cycles("slows-down", 2, run_id="r3", start=20, growth_outcome="ok")
    older = _cycles("baseline", 2, run_id="r4", start=30)  # no growth verdict stored
    t = rs.rows(_frame(leak + control + slow + older)).set_index("scenario")
    assert t.loc["leaks-memory", "growth"] == "leaking 2, not_measured 1"
    assert t.loc["leaks-memory", "expected"] == "clean / ok / leaking" and t.loc["leaks-memory", "as expected"] == "3/3"
    ctl = t.loc["leaks-memory (control)"]
    assert ctl["expected"] == "clean / ok / ok" and ctl["as expected"] == "1/2" and ctl["growth"] == "ok 1, leaking 1"
    assert t.loc["slows-down", "expected"] == "clean / ok / slowing" and t.loc["slows-down", "as expected"] == "0/2"
    assert t.loc["baseline", "growth"] == "- 2" and t.loc["baseline", "as expected"] == "2/2"
    md = report_html.markdown("r", [], [rs.scenarios_section(_frame(leak + control))])
    assert "| growth | expected |" in md and "| leaking 2, not_measured 1 | clean / ok / leaking | 3/3 |" in md
