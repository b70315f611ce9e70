"""JUnit XML for CI (``--junit FILE`` of ``rig soak``, ``rig cycle``, ``rig gate`` and ``rig matrix``):
the checks a command judged, as test cases Jenkins, GitLab and GitHub Actions show.

One ``<testsuites>`` per file, one ``<testsuite>`` per command run, one ``<testcase>`` per check:
a threshold of a soak (``SOAK_CHECKS``) and each of its cycles (``cycle_checks``), a regression
check of the gate (``GATE_CHECKS``), a cell of the matrix (``matrix_suite``). A check that fails has a ``<failure>``,
one not judged a ``<skipped>``, one that could not run (a cell that crashed, timed out, refused its
input or lost its machine) an ``<error>``; each with the reason as its ``message``. The XML itself
is junitparser's; files follow the Jenkins xUnit schema (junit-10.xsd: tests/data/junit/).

The soak's and the gate's verdicts stay where they are made (``rig.analysis.verdict``): a case
fails when a reason the verdict gave starts with its prefix (``SOAK_CHECKS``, ``GATE_CHECKS``),
and a reason no prefix claims is a failing case of its own, so a file never passes a run that
failed. The path is checked before a run starts (``check_path``) and written atomically
(``write``): a night never runs for hours to then fail to write its file, nor leaves half of one.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from rig.common.outfile import check_writable

STATUSES = ("pass", "fail", "skipped", "error")

# The soak's thresholds (``rig.analysis.verdict.soak``), each by the start of the reason it gives.
SOAK_CHECKS = (
    ("lifecycle outcomes", "outcomes not allowed: "),
    ("load outcomes", "load outcomes not allowed: "),
    ("growth outcomes", "growth outcomes not allowed: "),
    ("stop latency", "max stop latency "),
    ("finalize success", "finalize success "),
    ("leaks", "leaks: "),
    ("slowdown across the run", "slowing across the run: "),
)
# The gate's checks (``rig.analysis.verdict.gate``), likewise.
GATE_CHECKS = (
    ("new lifecycle outcomes", "new outcome(s): "),
    ("new load outcomes", "new load outcome(s): "),
    ("new growth outcomes", "new growth outcome(s): "),
    ("finalize success", "finalize success "),
    ("stop latency p95", "stop p95 "),
    ("throughput", "throughput at "),
    ("first response p99", "first response p99 at "),
    ("conformance", "conformance: "),
)
OTHER = "other reasons"  # the case of reasons no prefix claims

# Matrix statuses (``rig.analysis.matrix.STATUSES``, and ``finding``: verdicts other than the
# known ones) as a case's status; ``unjudged`` passes with a note.
MATRIX_STATUS = {
    "pass": "pass",
    "unjudged": "pass",
    "fail": "fail",
    "finding": "fail",
    "skipped": "skipped",
    "error": "error",
    "crashed": "error",
    "timeout": "error",
    "machine": "error",
}

# Characters XML 1.0 cannot hold (a stub's stderr tail may carry them): dropped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclasses.dataclass(frozen=True)
class Check:
    """One test case: ``status`` one of ``STATUSES``; ``message`` why it did not pass (the
    ``message`` of its failure, skipped or error element); ``output`` what was judged (its
    ``system-out``); ``kind`` the ``type`` of its failure or error (``finding``, ``crashed``, ...)."""

    classname: str
    name: str
    status: str = "pass"
    message: str = ""
    time: float | None = None
    output: str = ""
    kind: str = ""


def _text(value) -> str:
    return _NOT_XML.sub("", str(value))


def _seconds(value) -> float | None:
    """A time as the schema takes it (digits, at most 3 decimals), None where there is none."""
    if value is None:
        return None
    value = float(value)
    return round(value, 3) if math.isfinite(value) and value >= 0 else None


def check_path(path: str) -> None:
    """RigError (one line) unless ``path`` can be written as a local file (``rig.common.outfile``)."""
    check_writable(path, "--junit", "rig-junit.xml", "CI collects it from the job's workspace")


def suite(
    name: str,
    checks: Iterable[Check],
    *,
    time: float | None = None,
    timestamp: str | None = None,
    hostname: str | None = None,
    properties: dict | None = None,
):
    """A ``junitparser.TestSuite`` of ``checks``: its counts from them, its ``time`` the given
    one (the command's wall time) or the sum of theirs; ``properties`` with a value None are left out."""
    from junitparser import Error, Failure, Skipped, TestCase, TestSuite

    s = TestSuite(_text(name))
    for key, value in (properties or {}).items():
        if value is not None:
            s.add_property(_text(key), _text(value))
    cases = []
    for c in checks:
        if c.status not in STATUSES:
            raise ValueError(f"status {c.status!r} is not one of {STATUSES}")
        case = TestCase(_text(c.name), _text(c.classname), _seconds(c.time))
        result = {"fail": Failure, "error": Error, "skipped": Skipped}.get(c.status)
        if result is not None:
            kind = _text(c.kind) if c.kind and c.status != "skipped" else None
            case.result = [result(_text(c.message or c.status), kind)]
        if c.output:
            case.system_out = _text(c.output)
        cases.append(case)
    s.add_testcases(cases)  # and counts them: tests, failures, errors, skipped, time
    if _seconds(time) is not None:
        s.time = _seconds(time)
    if timestamp:
        s.timestamp = timestamp
    if hostname:
        s.hostname = _text(hostname)
    return s


def now() -> str:
    """A suite's ``timestamp``: now, UTC, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def write(path: str, suites) -> None:
    """Write ``suites`` (``junitparser.TestSuite``s, from ``suite`` or ``matrix_suite``) to
    ``path`` as one ``<testsuites>``: to a temporary file beside it, then renamed over it."""
    from junitparser import JUnitXml

    xml = JUnitXml()
    tests = failures = errors = 0
    total = 0.0
    for s in suites:
        xml.add_testsuite(s)
        tests, failures, errors = tests + (s.tests or 0), failures + (s.failures or 0), errors + (s.errors or 0)
        total += s.time or 0.0
    # junit-10.xsd has no `skipped` on <testsuites>: the counts junitparser would set, less that one
    xml.tests, xml.failures, xml.errors, xml.time = tests, failures, errors, round(total, 3)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.absolute().parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            xml.write(f, pretty=True)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep a CI agent of another user out
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def claim(reasons: Iterable[str], table: tuple[tuple[str, str], ...]) -> tuple[dict[str, list[str]], list[str]]:
    """The reasons each check of ``table`` (name, prefix) gave, and those no prefix claims."""
    claimed: dict[str, list[str]] = {name: [] for name, _ in table}
    rest = []
    for reason in reasons:
        name = next((n for n, prefix in table if reason.startswith(prefix)), None)
        (claimed[name] if name else rest).append(reason)
    return claimed, rest


def judged(
    reasons: Iterable[str],
    table: tuple[tuple[str, str], ...],
    classname: str,
    not_judged: dict[str, str] | None = None,
    figures: dict[str, str] | None = None,
) -> list[Check]:
    """One check per entry of ``table``: failed with the reasons it claims; else skipped where
    ``not_judged`` says why it was not judged; else passed. ``figures``: what each judged (its
    output). Reasons no entry claims fail a check of their own (``OTHER``)."""
    claimed, rest = claim(reasons, table)
    not_judged, figures = not_judged or {}, figures or {}
    out = []
    for name, _ in table:
        if claimed[name]:
            out.append(Check(classname, name, "fail", "; ".join(claimed[name]), output=figures.get(name, "")))
        elif name in not_judged:
            out.append(
                Check(classname, name, "skipped", f"not judged: {not_judged[name]}", output=figures.get(name, ""))
            )
        else:
            out.append(Check(classname, name, "pass", output=figures.get(name, "")))
    if rest:
        out.append(Check(classname, OTHER, "fail", "; ".join(rest)))
    return out


def _get(row, key: str):
    return row.get(key) if isinstance(row, dict) else getattr(row, key, None)


def cycle_checks(rows, allowed: Iterable[str], classname: str, line: Callable | None = None) -> list[Check]:
    """One check per cycle (``cycle N``): failed where one of its three verdicts is not
    ``allowed``, as ``rig.analysis.verdict.soak`` reads them (a load or growth not measured, and a
    growth ``ok``, are never held against it). ``line``: a cycle's row as one line (its output)."""
    from rig.contract.verdicts import NOT_MEASURED

    allowed = set(allowed)
    out = []
    for r in sorted(rows, key=lambda r: _get(r, "cycle") or 0):
        bad = []
        for key, label, skip in (
            ("outcome", "lifecycle", ()),
            ("load_outcome", "load", (None, NOT_MEASURED)),
            ("growth_outcome", "growth", (None, NOT_MEASURED, "ok")),
        ):
            v = _get(r, key)
            if v not in skip and v not in allowed:
                bad.append(f"{label} {v} not allowed")
        detail = _get(r, "stop_error") or _get(r, "detail")
        message = "; ".join(bad) + (f" ({detail[:300]})" if bad and detail else "")
        out.append(
            Check(
                classname,
                f"cycle {_get(r, 'cycle')}",
                "fail" if bad else "pass",
                message,
                time=_get(r, "cycle_wall_s"),
                output=line(r) if line else "",
                kind=_get(r, "outcome") if bad else "",
            )
        )
    return out


def _counts(counts: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted((counts or {}).items())) or "-"


def matrix_case(row: dict) -> Check:
    """A matrix row (``rig.analysis.matrix``) as a test case: class ``matrix.<engine>.<shape or
    retain>``, name ``<scenario>[ (control)] @ Triton <version>`` (a retention cell: ``retain
    <policy> @ Triton <version>``; a bench cell: ``bench @ Triton <version>``)."""
    engine = row.get("engine") or "-"
    version = row.get("triton_version") or "?"
    retain = row.get("retain") if row.get("retain") not in (None, "", "-") else None
    if "points" in row:
        group, name = "bench", f"bench @ Triton {version}"
    elif row.get("scenario"):
        group = row.get("shape") or retain or "scenarios"
        name = f"{row['scenario']}{' (control)' if row.get('control') else ''} @ Triton {version}"
    else:
        group, name = row.get("shape") or retain or "-", f"retain {retain or '-'} @ Triton {version}"
    status = row.get("status")
    reason = row.get("reason") or ""
    notes = [f"runtime {row.get('runtime') or '-'}, engine {engine}, status {status}"]
    if row.get("cycles"):
        notes.append(
            f"cycles {row['cycles']}: outcomes {_counts(row.get('outcomes'))}; "
            f"load {_counts(row.get('load_outcomes'))}; growth {_counts(row.get('growth_outcomes'))}"
        )
    if row.get("scenario") and status != "skipped":
        want = row.get("expected")
        notes.append("expected " + (" / ".join((*want, row.get("growth") or "ok")) if want else "nothing known"))
    if row.get("run_id"):
        notes.append(f"run_id {row['run_id']}")
    if status == "unjudged":
        notes.insert(0, "nothing known here" + (f": {reason}" if reason else ""))
    elif reason and MATRIX_STATUS.get(status) == "pass":
        notes.append(reason)
    case_status = MATRIX_STATUS.get(status, "error")  # a status this module does not know: never a pass
    if status not in MATRIX_STATUS:
        message = f"unknown status {status!r}" + (f": {reason}" if reason else "")
    else:
        message = "" if case_status == "pass" else reason or str(status)
    return Check(
        f"matrix.{engine}.{group}",
        name,
        case_status,
        message,
        time=row.get("wall_s"),
        output="\n".join(notes),
        kind=str(status) if case_status in ("fail", "error") else "",
    )


def matrix_suite(rows: list[dict], name: str = "rig matrix", **kw):
    """The matrix as a suite: one test case per row (``matrix_case``); ``kw`` as for ``suite``."""
    return suite(name, [matrix_case(r) for r in rows], **kw)
