"""One name for a version everywhere (rig.contract.versions.resolve_version): the NGC tag, the Triton
version, the release branch and an nvidia-pytriton release all say the same canonical Triton
version; 25.07 is 2.59.1; anything else is one line that says the four ways and what is known."""

from __future__ import annotations

import pytest

from rig.common.errors import RigError
from rig.contract import ngc
from rig.contract.versions import UnknownVersion, is_version_name, known_versions, resolve_version


@pytest.mark.parametrize("name", ["26.03", "26.03-py3", "nvcr.io/nvidia/tritonserver:26.03-py3", "2.67.0", "2.67",
                                  "v2.67.0", "r26.03", " 2.67.0 "])
def test_every_name_of_2_67_0(name):
    assert resolve_version(name) == "2.67.0"


def test_a_wheel_names_its_core():
    assert resolve_version("0.5.10") == "2.48.0"
    assert resolve_version("0.7.0") == resolve_version("0.5.13") == "2.51.0"
    assert resolve_version("0.2.5") == "2.33.0"  # older than the NGC table: a wheel's core still
    assert resolve_version("2.33.0") == "2.33.0"


def test_25_07_is_a_patch_release():
    assert resolve_version("25.07") == resolve_version("r25.07") == resolve_version("2.59.1") == "2.59.1"
    assert resolve_version("2.59") == "2.59.0" and resolve_version("25.06") == "2.59.0"
    assert resolve_version("25.08") == "2.60.0"  # the month after: the next minor, not 2.60.1


def test_every_row_of_the_table_resolves_by_each_of_its_names():
    for r in ngc.RELEASES:
        assert resolve_version(r.ngc_tag) == resolve_version(r.branch) == resolve_version(r.triton_version)
        assert resolve_version(r.triton_version) == r.triton_version
        for wheel in r.pytriton:
            assert resolve_version(wheel) == r.triton_version
    assert known_versions()[0] == "2.33.0" and known_versions()[-1] == ngc.RELEASES[-1].triton_version


def test_a_variant_is_its_own_name():
    assert resolve_version("2.68.0-va606228022") == "2.68.0-va606228022"
    assert not is_version_name("2.99.0-va606228022")


@pytest.mark.parametrize("name", ["2.99.0", "2.67.1", "r23.01", "30.01", "latest", "0.9.9", "", "r26.3"])
def test_an_unknown_name_is_one_line_that_says_the_ways_and_the_range(name):
    with pytest.raises(UnknownVersion) as e:
        resolve_version(name)
    text = str(e.value)
    assert isinstance(e.value, RigError) and "\n" not in text
    assert text.startswith(f"unknown version {name!r}: say an NGC tag (26.03), a Triton version")
    assert "release branch (r26.03)" in text and "nvidia-pytriton release (0.5.10)" in text
    assert "Triton 2.33.0 to 2.73.0" in text and "NGC 23.07 to 26.09" in text
    assert not is_version_name(name)


def test_the_contract_layer_imports_nothing_above_it():
    import ast
    from pathlib import Path

    import rig.contract.versions as versions

    tree = ast.parse(Path(versions.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "rig.common.errors", "rig.contract.ngc"}
