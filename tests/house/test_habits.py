"""The baselines of lint and type findings only shrink: ruff's are the `# noqa` marks in rig/, mypy's
the lines of mypy-baseline.txt (.ci/run runs both tools; docs/dev/architecture.md, "Lint, format and
types"). A fix lowers the count here; a new mark or listed finding fails until it is fixed instead."""

from __future__ import annotations

import re

from helpers import ROOT

NOQA_MARKS = 69  # ruff's findings left in rig/ (# noqa marks), at most
MYPY_FINDINGS = 172  # mypy's, at most (mypy-baseline.txt's lines; notes included)


def test_the_noqa_marks_do_not_grow():
    marks = [
        (f"{p.relative_to(ROOT)}:{i}", line)
        for p in sorted((ROOT / "rig").rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"#\s*noqa\b", line)
    ]
    assert len(marks) <= NOQA_MARKS, f"{len(marks)} # noqa marks in rig/, the baseline is {NOQA_MARKS}: fix the finding"
    bare = [where for where, line in marks if not re.search(r"#\s*noqa: [A-Z]+\d+", line)]
    assert not bare, f"a bare # noqa hides every rule: name the rule at {bare}"


def test_the_mypy_baseline_does_not_grow():
    lines = [line for line in (ROOT / "mypy-baseline.txt").read_text().splitlines() if line.strip()]
    assert len(lines) <= MYPY_FINDINGS, f"mypy-baseline.txt lists {len(lines)}, the baseline is {MYPY_FINDINGS}"


def test_ruff_and_mypy_are_configured_for_rig():
    text = (ROOT / "pyproject.toml").read_text()
    assert "[tool.ruff]" in text and "line-length = 120" in text and "[tool.mypy]" in text
    ci = (ROOT / ".ci" / "run").read_text()
    for step in ("ruff check rig", "ruff format --check rig", "mypy-baseline filter"):
        assert step in ci, f".ci/run no longer runs {step}"
