"""The README is the front door: every link in it resolves (a file of this repository, and where it
names a heading, that heading), its two commands are the ones CI runs, and it stays short."""

import re
import unicodedata
from pathlib import Path

from helpers import ROOT

README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """Python-Markdown's toc slug (what MkDocs anchors a heading with)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m.group(1).replace("`", "")) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M)}


def test_every_link_resolves_to_a_file_and_heading():
    text = README.read_text()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        page = README if not path else (ROOT / path)
        if not page.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and anchor not in anchors(page):
            broken.append(f"{target}: no heading #{anchor} in {path or 'README.md'}")
    assert broken == []
    assert len(LINK.findall(text)) >= 20  # the commands table links each command to its page


def test_first_screen_and_the_two_commands():
    text = README.read_text()
    first = "\n".join(text.splitlines()[:25])  # a screen
    assert "in-process" in first and "server#8755" in first  # what it is, and why
    assert ".venv/bin/rig soak" in first  # and how to run it
    assert "pip install -q -e . && .venv/bin/rig soak" in text  # the main job, one command
    assert "bash .ci/run" in text and (ROOT / ".ci" / "run").exists()  # the tests, one command
    assert len(text.splitlines()) <= 200


def test_every_command_has_a_row_with_an_example():
    from rig.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    rows = re.findall(r"^\| \[`rig (\w+)`\]\([^)]+\) \| [^|]+ \| `([^`]+)` \|$", README.read_text(), re.M)
    documented = {name for name, example in rows if example.startswith(("rig ", ".venv/bin/python -m rig"))}
    assert set(sub.choices) - documented == set()
