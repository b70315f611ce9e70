"""The tests follow the layers (docs/dev/architecture.md): every test file is in a folder named after
a package of rig/, in e2e/ (the rig run end to end) or in house/ (the project's own checks)."""

from __future__ import annotations

from helpers import ROOT

TESTS = ROOT / "tests"
PACKAGES = {"common", "contract", "worker", "runtimes", "parent", "scenarios", "store", "analysis", "repro", "commands"}
FOLDERS = PACKAGES | {"e2e", "house"}


def test_every_test_file_is_in_one_of_the_folders():
    stray = sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")
                   if p.parent.parent != TESTS or p.parent.name not in FOLDERS)
    assert not stray, f"test files outside tests/<{'|'.join(sorted(FOLDERS))}>/: {stray}"


def test_each_folder_named_after_a_package_is_one_of_rig():
    gone = sorted(p for p in PACKAGES if not (ROOT / "rig" / p / "__init__.py").is_file())
    assert not gone, f"tests/ has folders for packages rig/ does not have: {gone}"
