"""`rig runtime build`'s plan, before anything compiles: versions and branches, the machine's
packages, the sources a folder of git bundles has, the recipe's edits, and the matrix's names for
built runtimes. The build itself: tests/runtimes/test_built_runtime.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import ROOT, rig

from rig.common.errors import RigError
from rig.parent.runtime import PYTRITON_CORE
from rig.runtimes.from_source import preflight, recipe, releases
from rig.runtimes.from_source.sources import Sources
from rig.workflows.matrix_plan import parse_runtimes

BUNDLES = Path(os.environ.get("RIG_TRITON_SOURCES") or ROOT.parent / "shared" / "triton-src")


def test_versions_and_branches():
    # the fixed points are the branches' own TRITON_VERSION files (shared/triton-src/server)
    assert releases.parse("2.51.0") == ("2.51.0", "r24.10")
    assert releases.parse("2.55.0") == ("2.55.0", "r25.02")
    assert releases.parse("r26.03") == ("2.67.0", "r26.03")
    assert releases.parse("2.67") == ("2.67.0", "r26.03")
    assert releases.parse("2.70.0") == ("2.70.0", "r26.06")
    assert releases.parse("2.71.0") == ("2.71.0", "r26.07")
    # 25.07 shipped 2.59.1, so 2.60.0 is 25.08
    assert releases.parse("r25.07") == ("2.59.1", "r25.07")
    assert releases.parse("2.60.0") == ("2.60.0", "r25.08")
    assert len(set(releases.RELEASES.values())) == len(releases.RELEASES)


def test_every_name_of_a_release_builds_it():
    # one resolver (rig.contract.versions): the NGC tag, the branch, the version, a wheel's core
    assert releases.parse("26.03") == ("2.67.0", "r26.03")
    assert releases.parse("25.07") == releases.parse("2.59.1") == ("2.59.1", "r25.07")
    assert releases.parse("2.59") == ("2.59.0", "r25.06")
    assert releases.parse("0.7.0") == ("2.51.0", "r24.10")  # nvidia-pytriton 0.7.0 bundles 2.51.0


@pytest.mark.parametrize("spec", ["2.99.0", "r23.01", "latest", "2.67.1", "30.01"])
def test_unknown_versions_say_what_is_known(spec):
    with pytest.raises(RigError, match=r"unknown version .*a source build knows 2\.51\.0 to 2\.73\.0"):
        releases.parse(spec)


@pytest.mark.parametrize("spec", ["2.36.0", "23.07", "0.5.10"])
def test_a_release_only_a_wheel_bundles_is_refused_with_the_install(spec):
    with pytest.raises(RigError, match=r"Triton 2\.\d+\.0.* is not built from source here: .*2\.51\.0 to 2\.73\.0.*"
                                       r"rig runtime install 2\.\d+\.0"):
        releases.parse(spec)


def test_refs():
    assert releases.parse_refs(["core=main", "backend=r26.02"]) == {"core": "main", "backend": "r26.02"}
    with pytest.raises(RigError, match="COMPONENT=REF"):
        releases.parse_refs(["server=main"])


def test_missing_packages_are_named_in_order():
    have = {"/usr/include/re2/re2.h", "/usr/include/numa.h"}
    missing = preflight.missing_packages(exists=have.__contains__, which=lambda c: None)
    assert missing[:3] == ["g++", "git", "protobuf-compiler"]
    assert "libre2-dev" not in missing and "libnuma-dev" not in missing and "libprotobuf-dev" in missing
    assert preflight.missing_packages(exists=lambda p: True, which=lambda c: "/usr/bin/" + c) == []


def test_recipe_reads_pins_and_drops_the_boost_hash():
    text = ('FetchContent_Declare(\n  pybind11\n  GIT_REPOSITORY "https://github.com/pybind/pybind11"\n'
            '  GIT_TAG "3e9dfa2866941655c56877882565e7577de6fc7b"\n  GIT_SHALLOW ON\n)\n'
            'FetchContent_Declare(\n  dlpack\n  GIT_TAG "v0.8"\n)\n'
            'ExternalProject_Add(\n  boostorg\n  URL ${TRITON_BOOST_URL}\n'
            '  URL_HASH SHA256=4b2136f98bdd1f5857f1c3dea9ac2018effe65286cf251534b6ae20cc45e1847\n)\n')
    assert recipe.pinned(text, "pybind11") == "3e9dfa2866941655c56877882565e7577de6fc7b"
    assert recipe.pinned(text, "dlpack") == "v0.8"
    assert recipe.pinned(text, "googletest") is None
    out = recipe.python_backend_patch(text)
    assert "URL_HASH" not in out and "URL ${TRITON_BOOST_URL}" in out
    assert recipe.python_backend_patch(out) == out  # a resumed build patches nothing twice
    # r25.08 and older fix the URL itself
    old = text.replace("URL ${TRITON_BOOST_URL}", "URL https://archives.boost.io/release/1.79.0/source/boost_1_79_0.tar.gz")
    out = recipe.python_backend_patch(old)
    assert "archives.boost.io" not in out and "URL ${TRITON_BOOST_URL}" in out
    assert out.count("ExternalProject_Add(") == 1 and "boostorg" in out


def test_flags_are_cpu_with_metrics_stats_logging_ensembles():
    f = recipe.CORE_FLAGS
    assert f["TRITON_ENABLE_GPU"] == "OFF" and f["TRITON_ENABLE_METRICS_GPU"] == "OFF"
    for on in ("METRICS", "METRICS_CPU", "STATS", "LOGGING", "ENSEMBLE"):
        assert f[f"TRITON_ENABLE_{on}"] == "ON"


def test_shims_are_cmake_config_packages(tmp_path):
    shim = recipe.shims(tmp_path)
    assert (shim / "lib/cmake/protobuf/protobuf-config.cmake").read_text().count("protobuf::protoc")
    assert "re2::re2" in (shim / "lib/cmake/re2/re2-config.cmake").read_text()
    assert (shim / "boost-src" / "boost").is_symlink()


@pytest.mark.skipif(not (BUNDLES / "core.bundle").exists(), reason=f"no git bundles at {BUNDLES}")
def test_bundles_branches():
    s = Sources(str(BUNDLES))
    assert s.pick("core", "r26.03") == ("r26.03", "release branch")
    ref, why = s.pick("backend", "r26.03")  # the backend helpers stopped branching after r26.02
    assert ref == "main" and "upstream" in why
    # core's bundle stops at r26.06: alone, 2.71.0's branch is refused, naming the way round;
    # where the release is there in the other repositories, core's main is taken and said so
    with pytest.raises(RigError, match=r"no r26\.07 branch of core .*--ref core=BRANCH"):
        s.pick("core", "r26.07")
    ref, why = s.pick("core", "r26.07", nearest=True)
    assert ref == "main" and "not exactly the release's core" in why
    assert s.has_release("r26.07", ("core", "python_backend")) and not s.has_release("r26.09", ("core", "common"))
    assert s.pick("core", "r26.07", override="main")[0] == "main"
    with pytest.raises(RigError, match="no such branch"):
        s.pick("core", "r26.07", override="r99.99")


def test_sources_folder_missing(tmp_path):
    with pytest.raises(RigError, match="no such folder"):
        Sources(str(tmp_path / "nope"))


def test_matrix_names_built_runtimes():
    installed = ["0.7.0", "built-2.67.0", "built-2.51.0", "built-2.55.0"]
    out = parse_runtimes("all", installed, PYTRITON_CORE)
    # every embedded core, then the built cores no embedded one bundles (2.51.0 is embedded)
    assert out[-2:] == ["built-2.55.0", "built-2.67.0"] and "built-2.51.0" not in out
    assert parse_runtimes("2.67.0,built-2.51.0", installed, PYTRITON_CORE) == ["built-2.67.0", "built-2.51.0"]
    with pytest.raises(RigError, match=r"rig runtime build 2\.60\.0"):
        parse_runtimes("2.60.0", installed, PYTRITON_CORE)


@pytest.mark.slow
def test_cli_refusals_are_one_line(tmp_path):
    env = {"RIG_HOME": str(tmp_path)}
    for args, needle in ((["2.99.0"], "unknown version '2.99.0'"),
                         (["2.73.0", "--sources", str(BUNDLES)],
                          "Triton 2.73.0 is not there (its newest release: 2.71.0"),
                         (["2.67.0", "--sources", str(tmp_path / "none")], "no such folder")):
        if "--sources" in args and "2.73.0" in args and not (BUNDLES / "core.bundle").exists():
            continue
        p = rig("runtime", "build", *args, env=env, timeout=120)
        assert p.returncode == 2, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr
    # a machine without the compiler and tools: named, with the command that installs them
    import sys

    bare = {**env, "PATH": str(Path(sys.executable).parent)}
    p = rig("runtime", "build", "2.67.0", env=bare, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "needs g++, git, protobuf-compiler" in lines[0] and "apt-get install -y" in lines[0]
    p = rig("soak", "--runtime", "2.60.0", "--cycles", "1", env=env, timeout=120)
    assert p.returncode == 2 and "rig runtime build 2.60.0" in p.stderr


def test_common_logging_of_r25_09_and_older_gets_its_own_json_class():
    cc = ('#define TRITONJSON_STATUSTYPE uint8_t\n#define TRITONJSON_STATUSRETURN(M)\n'
          '#include "triton/common/logging.h"\n#include "triton/common/triton_json.h"\n')
    out = recipe.common_logging_patch(cc, "class TritonJson {")
    assert out.index("#define TritonJson TritonJsonOfLoggingOnly") < out.index('#include "triton/common/triton_json.h"')
    assert recipe.common_logging_patch(out, "class TritonJson {") == out  # once only
    # r25.10 and later made TritonJson a template over its status type: left as it is
    assert recipe.common_logging_patch(cc, "template <typename StatusType>\nclass TritonJsonImpl {") == cc
