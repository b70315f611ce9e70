"""``--junit FILE``: JUnit XML for CI. The builders (rig/parent/junit.py) on rows as the store keeps them,
every file validated against the Jenkins xUnit schema kept in tests/data/junit/junit-10.xsd (its
header says where it comes from); a bad path refused in one line before anything runs; then a
real soak, a soak interrupted as a nightly job's timeout interrupts it, and a real gate, each
with its file validated."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import time

import pandas as pd
import pytest
from helpers import ROOT, cycle_row, rig, spawn
from stores import real_results  # noqa: F401  (the session's store, a fixture)

from rig.parent import junit

XSD = ROOT / "tests" / "data" / "junit" / "junit-10.xsd"


@pytest.fixture(scope="module")
def schema():
    xmlschema = pytest.importorskip("xmlschema", reason="xmlschema is in the test extra")
    return xmlschema.XMLSchema(str(XSD))


def read(schema, path) -> dict[str, list[tuple[str, str, str, str, str]]]:
    """The file at ``path`` validated against the schema, read back: {suite name: [(classname,
    case name, status, message, system-out), ...]}."""
    from junitparser import Error, Failure, JUnitXml, Skipped

    schema.validate(str(path))
    out = {}
    for suite in JUnitXml.fromfile(str(path)):
        cases = []
        for case in suite:
            result = case.result[0] if case.result else None
            status = {Failure: "fail", Error: "error", Skipped: "skipped"}.get(type(result), "pass")
            cases.append((case.classname, case.name, status, result.message if result is not None else "",
                          case.system_out or ""))
        out[suite.name] = cases
    return out


def valid(schema, path) -> dict[str, dict[str, tuple[str, str, str]]]:
    """``read``, each suite's cases by name: (status, message, system-out)."""
    return {name: {c[1]: c[2:] for c in cases} for name, cases in read(schema, path).items()}


def statuses(cases: dict) -> dict[str, str]:
    return {name: c[0] for name, c in cases.items()}


@pytest.fixture(autouse=True)
def _keep_sigterm():
    """``rig soak`` in this process sets a SIGTERM handler (as a nightly job's timeout needs)."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


# ---------------------------------------------------------------- the builders

def _tally(rows):
    from rig.workflows import soak

    tally = soak.Tally()
    for r in rows:
        tally.add(r)
    return tally


def test_the_schema_check_is_real(schema):
    """Positive control: a case without its required name, and a count that is no number, fail."""
    assert not schema.is_valid("<testsuites><testsuite name='s' tests='1' failures='0' errors='0'>"
                               "<testcase classname='c'/></testsuite></testsuites>")
    assert not schema.is_valid("<testsuites><testsuite name='s' tests='1' failures='0' errors='0' time='1.5e3'>"
                               "</testsuite></testsuites>")


def test_a_soak_is_a_case_per_threshold_and_per_cycle_failed_with_the_verdicts_reasons(schema, tmp_path):
    from rig.workflows import soak, soak_junit
    from rig.parent.config import RunConfig

    cfg = RunConfig()
    cfg = dataclasses.replace(cfg, thresholds=dataclasses.replace(cfg.thresholds, max_stop_latency_s=2.0))
    rows = [cycle_row(1, load_outcome="ok", growth_outcome="ok", stop_latency_s=0.4, cycle_wall_s=3.25,
                      finalize_expected=1, finalize_before_stop=1),
            # a stop that waited out exit_timeout; the stub the rig then killed is a leak
            cycle_row(2, outcome="exit_timeout", load_outcome="ok", growth_outcome="ok", stop_latency_s=3.0,
                      cycle_wall_s=6.5, finalize_expected=1, finalize_before_stop=0, stubs_killed=1,
                      stop_error="stop() returned after exit_timeout\x1b[0m"),
            cycle_row(3, load_outcome="errors", growth_outcome="leaking", stop_latency_s=0.5, cycle_wall_s=3.0,
                      finalize_expected=1, finalize_before_stop=1)]
    tally = _tally(rows)
    allowed = soak.allowed_outcomes(cfg, soak.DEFAULT_ALLOWED)
    reasons = soak.judge(tally, cfg, allowed)
    suite = soak_junit.junit_suite(tally, cfg, allowed, reasons, "soak", {"run_id": "r1", "engine": "capi", "host": "n1"},
                             time_s=12.3456, timestamp=junit.now())
    path = tmp_path / "soak.xml"
    junit.write(str(path), [suite])
    (cases,) = valid(schema, path).values()
    assert statuses(cases) == {
        "lifecycle outcomes": "fail", "load outcomes": "fail", "growth outcomes": "fail", "stop latency": "fail",
        "finalize success": "skipped", "leaks": "fail", "slowdown across the run": "skipped",
        "cycle 1": "pass", "cycle 2": "fail", "cycle 3": "fail"}
    # each failure's message is the verdict's reason, as the FAIL: line prints it
    assert sorted(c[1] for name, c in cases.items() if c[0] == "fail" and not name.startswith("cycle")) \
        == sorted(reasons)
    assert cases["stop latency"][2] == "max 3.000 s (threshold 2.0 s)"
    assert cases["finalize success"][1] == "not judged: no --min-finalize-success given"
    assert cases["cycle 2"][1].startswith("lifecycle exit_timeout not allowed (stop() returned after exit_timeout")
    assert "\x1b" not in path.read_text()  # what XML cannot hold is dropped
    assert cases["cycle 3"][1] == "load errors not allowed; growth leaking not allowed"
    assert cases["cycle 1"][2].startswith("cycle 1: clean | load ok | growth ok")
    text = path.read_text()
    assert '<testsuite name="rig soak r1" tests="10" errors="0" failures="7" skipped="2" time="12.346"' in text
    assert 'classname="soak.capi.none.thresholds"' in text and 'classname="soak.capi.none.cycles"' in text
    assert '<testcase name="cycle 2" classname="soak.capi.none.cycles" time="6.5">' in text


def test_every_reason_the_soak_verdict_gives_is_claimed_by_its_own_check():
    """A soak that crosses every threshold: each reason lands in the case of its threshold, none
    in ``OTHER`` (were verdict.soak's words to change, this fails first)."""
    from rig.analysis import verdict

    rows = [cycle_row(1, outcome="exit_timeout", load_outcome="errors", growth_outcome="leaking",
                      stop_latency_s=9.0, finalize_expected=1, finalize_before_stop=0, stubs_killed=1)]
    reasons = verdict.soak(rows, ("clean", "ok"), max_stop_latency_s=1.0, min_finalize_success=0.9,
                           run_trend={"slowdown_pct": 80.0, "slowdown_low_pct": 70.0}, max_slowdown=50.0)
    claimed, rest = junit.claim(reasons, junit.SOAK_CHECKS)
    assert rest == [] and all(len(v) == 1 for v in claimed.values()), (claimed, rest)


def _gate_sides():
    base = pd.DataFrame([{"run_id": f"a{i % 2}", "cycle": i, "outcome": "clean", "load_outcome": "ok",
                          "growth_outcome": "ok", "finalize_expected": 1, "finalize_before_stop": 1,
                          "stop_latency_s": 1.0 + i / 100} for i in range(1, 9)])
    cand = pd.DataFrame([{"run_id": f"b{i % 2}", "cycle": i, "outcome": "exit_timeout", "load_outcome": "errors",
                          "growth_outcome": "leaking", "finalize_expected": 1, "finalize_before_stop": 0,
                          "stop_latency_s": 30.0 + i / 100} for i in range(1, 9)])

    def windows(cycles, level):
        return pd.DataFrame([{"run_id": r.run_id, "cycle": r.cycle, "window": w, "tool": "rig", "mode": "closed",
                              "concurrency": 1.0, "rate": None, "stable": None,
                              "throughput": level + r.cycle + w} for r in cycles.itertuples() for w in range(2)])

    first = pd.DataFrame([{"point": "concurrency 1", "tool": "rig", "first_p99_us": 90_000.0, "first_from": "hdr"}])
    return base, windows(base, 1000.0), cand, windows(cand, 100.0), first


def test_every_reason_the_gate_gives_is_claimed_by_its_own_check(schema, tmp_path):
    from rig.analysis import verdict
    from rig.workflows import gate

    base, wa, cand, wb, first = _gate_sides()
    reasons = verdict.gate(base, wa, cand, wb, max_first_response_p99_us=10_000.0, candidate_streaming=first)
    reasons += gate.conformance_reasons(cand)  # none: no scenario ran; the gate adds them as these
    reasons.append("conformance: stub-exits, unbatched, capi, Triton 2.51.0: 1/1 cycle(s) differ from the known "
                   "exit_timeout / timeouts / ok (got 1x exit_timeout / errors / ok)")
    claimed, rest = junit.claim(reasons, junit.GATE_CHECKS)
    assert rest == [] and all(len(v) == 1 for v in claimed.values()), (claimed, rest)
    args = argparse.Namespace(max_first_response_p99_us=10_000.0, max_finalize_drop=0.05, max_stop_regression=1.5,
                              max_throughput_drop=0.1)
    checks = gate.junit_checks(reasons, base, wa, cand, wb, args, first)
    path = tmp_path / "gate.xml"
    junit.write(str(path), [junit.suite("rig gate a -> b", checks)])
    (cases,) = valid(schema, path).values()
    assert set(statuses(cases).values()) == {"fail"} and len(cases) == len(junit.GATE_CHECKS)
    # the same sides, the candidate's regressions gone: every check passes, the bound unset is skipped
    args.max_first_response_p99_us = None
    checks = gate.junit_checks([], base, wa, base.assign(run_id="b"), wa, args, None)
    assert {c.name: c.status for c in checks if c.status != "pass"} == {"first response p99": "skipped",
                                                                      "conformance": "skipped"}  # no scenario ran


def test_a_reason_no_check_claims_still_fails_the_file():
    checks = junit.judged(["outcomes not allowed: hung=1", "something new went wrong"], junit.SOAK_CHECKS, "soak.x")
    failed = {c.name: c.message for c in checks if c.status == "fail"}
    assert failed == {"lifecycle outcomes": "outcomes not allowed: hung=1", junit.OTHER: "something new went wrong"}


def _matrix_rows() -> list[dict]:
    cell = {"runtime": "0.7.0", "triton_version": "2.51.0", "engine": "capi", "retain": "-", "run_id": "r9",
            "cycles": 3, "outcomes": {"exit_timeout": 3}, "load_outcomes": {"ok": 3}, "growth_outcomes": {"ok": 3}}
    return [
        {**cell, "retain": "none", "status": "pass", "reason": "", "outcomes": {"clean": 3}},
        {**cell, "scenario": "retained-response", "control": False, "shape": "batched", "status": "pass",
         "reason": "", "expected": ("exit_timeout", "ok")},
        {**cell, "scenario": "retained-response", "control": True, "status": "finding",
         "reason": "verdicts exit_timeout / ok 3; expected clean / ok", "expected": ("clean", "ok")},
        {**cell, "scenario": "stub-exits", "control": False, "triton_version": "2.48.0", "runtime": "0.5.10",
         "status": "unjudged", "reason": "nothing known for Triton 2.48.0 through capi", "expected": None},
        {**cell, "retain": "last-response", "status": "fail", "reason": "outcomes not allowed: hung=1"},
        {**cell, "retain": "none", "engine": "tritonserver", "status": "crashed", "reason": "died of SIGSEGV"},
        {**cell, "retain": "none", "engine": "tritonserver", "runtime": "0.5.10", "triton_version": "2.48.0",
         "status": "timeout", "reason": "killed after 600 s (--cell-timeout 600)"},
        {**cell, "retain": "none", "engine": "capi", "runtime": "0.5.10", "triton_version": "2.48.0",
         "status": "error", "reason": "--input-data x.json: no such file"},
        {**cell, "retain": "none", "runtime": "container", "triton_version": "2.54.0", "status": "machine",
         "reason": "No space left on device"},
        {"runtime": "0.2.5", "triton_version": "2.33.0", "engine": "capi,tritonserver", "retain": "none",
         "status": "skipped", "reason": "no backend stub for this Python"},
    ]


def test_a_matrix_is_a_case_per_row(schema, tmp_path):
    rows = _matrix_rows()
    path = tmp_path / "matrix.xml"
    junit.write(str(path), [junit.matrix_suite(rows)])
    assert [c[:3] for c in read(schema, path)["rig matrix"]] == [
        ("matrix.capi.none", "retain none @ Triton 2.51.0", "pass"),
        ("matrix.capi.batched", "retained-response @ Triton 2.51.0", "pass"),
        ("matrix.capi.scenarios", "retained-response (control) @ Triton 2.51.0", "fail"),
        ("matrix.capi.scenarios", "stub-exits @ Triton 2.48.0", "pass"),
        ("matrix.capi.last-response", "retain last-response @ Triton 2.51.0", "fail"),
        ("matrix.tritonserver.none", "retain none @ Triton 2.51.0", "error"),
        ("matrix.tritonserver.none", "retain none @ Triton 2.48.0", "error"),
        ("matrix.capi.none", "retain none @ Triton 2.48.0", "error"),
        ("matrix.capi.none", "retain none @ Triton 2.54.0", "error"),
        ("matrix.capi,tritonserver.none", "retain none @ Triton 2.33.0", "skipped")]
    checks = [junit.matrix_case(r) for r in rows]
    assert [c.kind for c in checks] == ["", "", "finding", "", "fail", "crashed", "timeout", "error", "machine", ""]
    assert checks[3].output.startswith("nothing known here: nothing known for Triton 2.48.0 through capi")
    assert checks[2].message == "verdicts exit_timeout / ok 3; expected clean / ok"
    assert "expected clean / ok / ok" in checks[2].output and "run_id r9" in checks[2].output
    text = path.read_text()
    assert '<testsuite name="rig matrix" tests="10" errors="4" failures="2" skipped="1"' in text
    assert '<testsuites tests="10" failures="2" errors="4"' in text


def test_every_matrix_status_has_its_case_and_an_unknown_one_never_passes():
    from rig.analysis import matrix

    assert set(matrix.STATUSES) <= set(junit.MATRIX_STATUS)
    case = junit.matrix_case({"status": "exploded", "reason": "?", "engine": "capi", "retain": "none"})
    assert (case.status, case.message) == ("error", "unknown status 'exploded': ?")


# ---------------------------------------------------------------- the path and the file

@pytest.mark.parametrize("case, says", [
    ("missing folder", "does not exist"),
    ("a folder", "is a folder: give a file name"),
    ("a file as folder", "is not a folder"),
    ("uri", "a local file"),
    ("empty", "needs a file name"),
])
def test_a_path_that_cannot_be_written_is_one_line(tmp_path, case, says):
    from rig.common.errors import RigError

    (tmp_path / "file").write_text("x")
    path = {"missing folder": "/nonexistent/dir/x.xml", "a folder": str(tmp_path),
            "a file as folder": str(tmp_path / "file" / "x.xml"), "uri": "s3://bucket/x.xml", "empty": " "}[case]
    with pytest.raises(RigError) as e:
        junit.check_path(path)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_file_is_written_whole_or_not_at_all(schema, tmp_path, monkeypatch):
    path = tmp_path / "j.xml"
    junit.check_path(str(path))
    assert list(tmp_path.iterdir()) == []  # the check leaves nothing behind
    junit.write(str(path), [junit.suite("one", [junit.Check("c", "a", time=float("nan"))], time=1 / 3)])
    assert valid(schema, path) == {"one": {"a": ("pass", "", "")}}  # a time that is no number is left out
    assert 'name="one"' in path.read_text() and oct(path.stat().st_mode & 0o777) == "0o644"

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        junit.write(str(path), [junit.suite("two", [junit.Check("c", "b")])])
    assert [p.name for p in tmp_path.iterdir()] == ["j.xml"] and 'name="one"' in path.read_text()


@pytest.mark.parametrize("command", ["soak", "cycle", "gate"])
def test_a_bad_junit_path_is_refused_in_one_line_before_anything_runs(tmp_path, capsys, command):
    from rig.cli import main

    results = tmp_path / "R"
    argv = [command, "--results", str(results)] if command != "gate" else [
        "gate", str(results), "--baseline", "2.48.0", "--candidate", "2.51.0"]
    code = main([*argv, "--junit", "/nonexistent/dir/x.xml"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.startswith("rig: error: --junit /nonexistent/dir/x.xml: the folder /nonexistent/dir does not "
                              "exist") and len(out.err.splitlines()) == 1, out.err
    assert not results.exists(), "nothing may run, nor be read"


def test_a_matrix_keeps_its_junit_to_itself():
    """Its cells are soaks: --junit is the matrix's own option, never passed down to a cell."""
    from rig.workflows import matrix_plan

    assert "junit" in matrix_plan._OWN


# ---------------------------------------------------------------- end to end

@pytest.mark.slow
def test_a_real_soak_writes_its_file(schema, tmp_path, runtime):
    res, path = tmp_path / "r", tmp_path / "ci" / "soak.xml"
    path.parent.mkdir()
    p = rig("soak", "--cycles", "2", "--requests", "20", "--max-stop-latency", "0.001", "--results", str(res),
            "--junit", str(path), timeout=600)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]  # no stop takes under a millisecond
    assert f"JUnit XML: {path}" in p.stdout
    (name, cases), = valid(schema, path).items()
    run_id = pd.read_parquet(res / "runs").run_id[0]
    assert name == f"rig soak {run_id}"
    assert statuses(cases) == {
        "lifecycle outcomes": "pass", "load outcomes": "pass", "growth outcomes": "skipped",
        "stop latency": "fail", "finalize success": "skipped", "leaks": "pass",
        "slowdown across the run": "skipped", "cycle 1": "pass", "cycle 2": "pass"}, cases
    fails = [line[len("FAIL: "):] for line in p.stdout.splitlines() if line.startswith("FAIL: ")]
    assert [cases["stop latency"][1]] == fails and fails[0].startswith("max stop latency ")
    assert cases["cycle 2"][2].startswith("cycle 2: clean | load ok")
    assert [f.name for f in path.parent.iterdir()] == ["soak.xml"]  # no temporary file left


@pytest.mark.slow
def test_an_interrupted_soak_writes_what_it_stored_and_an_error(schema, tmp_path, runtime):
    """SIGTERM, as a nightly job's timeout sends it: the cycles stored so far, and the run an error."""
    res, path = tmp_path / "r", tmp_path / "soak.xml"
    proc = spawn("soak", "--cycles", "50", "--requests", "5", "--results", str(res), "--junit", str(path))
    deadline = time.monotonic() + 300
    while not ((res / "cycles").exists() and any((res / "cycles").rglob("*.parquet"))):
        assert time.monotonic() < deadline and proc.poll() is None, "no cycle stored"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 130
    (cases,) = valid(schema, path).values()
    assert cases["run"][0] == "error" and cases["run"][1].startswith("interrupted after ")
    assert "continue with: rig soak --resume " in cases["run"][1]
    assert cases["cycle 1"][0] == "pass" and "cycle 50" not in cases


@pytest.mark.slow
def test_a_real_gate_writes_its_file(schema, real_results, tmp_path):
    root, a, b, keep = (str(real_results["root"]), real_results["none_a"], real_results["none_b"],
                        real_results["keep"])
    path = tmp_path / "gate.xml"
    p = rig("gate", root, "--baseline", a, "--candidate", keep, "--junit", str(path), timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    (name, cases), = valid(schema, path).items()
    assert name == f"rig gate {a} -> {keep}"
    fails = sorted(line[len("FAIL: "):] for line in p.stdout.splitlines() if line.startswith("FAIL: "))
    assert sorted(c[1] for c in cases.values() if c[0] == "fail") == fails
    assert cases["new lifecycle outcomes"][0] == "fail" and "exit_timeout" in cases["new lifecycle outcomes"][1]
    assert cases["finalize success"][0] == "fail"
    assert cases["first response p99"][:2] == ("skipped", "not judged: no --max-first-response-p99-us given")
    # two runs of one configuration: the same file, nothing failed
    p = rig("gate", root, "--baseline", a, "--candidate", b, "--junit", str(path), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    (cases,) = valid(schema, path).values()
    assert "fail" not in statuses(cases).values() and cases["throughput"][0] == "pass"
