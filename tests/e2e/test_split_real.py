"""Issue 54, item 5, on the real core (2.51.0, capi, real stubs): where Triton's statistics cannot
cover a request's life, no line calls the client's time beyond Triton's the rig's own. A decoupled
model answering from a thread of its own (tests/data/split/decoupled), a model that is not
decoupled but answers from a thread after ``execute`` returned None (tests/data/split/after-return:
only the evidence hook's marker tells), and the template as the control, whose difference is the
rig's own."""

from __future__ import annotations

import pytest

from helpers import ROOT, rig
from rig.contract import server_stats
from rig.store import Store

LOAD = ("--workload", "steady", "--users", "4", "--in-flight", "1", "--workload-seconds", "3",
        "--window-seconds", "1", "--cycles", "1")
SPLIT = ROOT / "tests" / "data" / "split"


def _soak(results, *args):
    p = rig("soak", *LOAD, *args, "--results", str(results), timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    print(p.stdout[-2000:])
    return p.stdout, Store(results).read("windows")


@pytest.mark.slow
def test_a_decoupled_model_answering_from_its_own_thread_is_not_split(tmp_path, runtime):
    out, w = _soak(tmp_path / "r", "--model-repository", str(SPLIT / "decoupled"))
    assert (w[server_stats.UNCOVERED] == "stream_thread is decoupled").all(), w[server_stats.UNCOVERED].tolist()
    assert "the rig's own" not in out
    line = next(x for x in out.splitlines() if "client - Triton" in x)
    assert "not split (stream_thread is decoupled: Triton's statistics of a request end when execute" in line
    report = rig("report", str(tmp_path / "r"), "--out", str(tmp_path / "r.html"), timeout=300)
    assert report.returncode == 0, report.stdout[-2000:] + report.stderr[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert "not split (stream_thread is decoupled" in page


@pytest.mark.slow
def test_a_model_answering_after_execute_returns_is_not_split_and_the_template_is(tmp_path, runtime):
    out, w = _soak(tmp_path / "after", "--model-repository", str(SPLIT / "after-return"))
    assert w[server_stats.UNCOVERED].notna().any(), "the hook's marker never reached a window"
    assert "the rig's own" not in out
    assert "not split (score_thread answers after execute returns" in out
    control, w = _soak(tmp_path / "template")
    assert w[server_stats.UNCOVERED].isna().all()
    assert "the rig's own: client - Triton = " in control and "not split" not in control


@pytest.mark.slow
def test_the_bench_table_marks_the_own_column_not_split(tmp_path, runtime):
    p = rig("bench", "--model-repository", str(SPLIT / "decoupled"), "--concurrency", "2", "--windows", "2",
            "--window-seconds", "1", "--repeats", "1", "--cpu-idle", "os", "--results", str(tmp_path / "b"),
            timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    lines = p.stdout.splitlines()
    rig_line = next(x for x in lines if x.split()[2:3] == ["rig"])
    assert rig_line.split()[10] == "n/s", rig_line
    assert any(x.startswith("n/s: not split") for x in lines)
