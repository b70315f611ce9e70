"""`rig report --from A --to B --summary-json FILE`: the upgrade question's answer as JSON, the same
causes, in the same order and words, as the Markdown prints; versions named any way a user names
them (the NGC tag here); one line and exit 2 without --from/--to."""

from __future__ import annotations

import json

from helpers import ROOT

from rig import cli

STORE = str(ROOT / "docs" / "conformance" / "store")


def test_the_json_says_the_causes_the_markdown_opens_with(tmp_path, capsys):
    out = tmp_path / "upgrade.json"
    code = cli.main(["report", STORE, "--conformance", "--from", "26.03", "--to", "26.06", "--summary-json", str(out)])
    assert code == 0
    md = capsys.readouterr().out
    got = json.loads(out.read_text())
    assert (got["from"], got["to"]) == ("2.67.0", "2.70.0")
    assert got["causes"], "the kept store's 2.67.0 -> 2.70.0 has causes"
    listed = [line[3:] for line in md.splitlines() if line[:1].isdigit() and line[1:3] == ". "]
    assert [c["line"] for c in got["causes"]] == listed[: len(got["causes"])]
    assert sum(c["cells"] for c in got["causes"]) >= got["differing"]
    # the cause the bisection named says its commit, in both
    first = got["causes"][0]["line"]
    assert "python_backend 47f9e03 (#433)" in first and first in md


def test_without_the_upgrade_question_it_is_one_line(tmp_path, capsys):
    code = cli.main(["report", STORE, "--conformance", "--summary-json", str(tmp_path / "x.json")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--from and --to" in err[0]
    assert not (tmp_path / "x.json").exists()
