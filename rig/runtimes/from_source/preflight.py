"""What a source build needs from the machine, checked before anything is fetched.

Each need is a file that its Debian package installs, so the check is a stat, and the answer names
the packages and the one command that installs them. cmake (3.31+, which Triton's CMakeLists ask
for; Debian 12 has 3.25) and ninja come from PyPI into the rig's cache instead.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from rig.common.errors import RigError


@dataclasses.dataclass(frozen=True)
class Need:
    package: str  # the Debian package that provides it
    what: str  # what the build uses it for
    paths: tuple[str, ...] = ()  # any of these existing satisfies it
    command: str | None = None  # or this command on PATH


NEEDS = (
    Need("g++", "the C++ compiler", command="g++"),
    Need("git", "fetching sources", command="git"),
    Need("protobuf-compiler", "protoc", command="protoc"),
    Need("libprotobuf-dev", "model config messages", ("/usr/include/google/protobuf/message.h",)),
    Need("libre2-dev", "regular expressions", ("/usr/include/re2/re2.h",)),
    Need("rapidjson-dev", "JSON", ("/usr/include/rapidjson/rapidjson.h",)),
    Need("libboost1.81-dev", "Boost 1.78+ headers", ("/usr/include/boost/version.hpp",)),
    Need("prometheus-cpp-dev", "metrics", ("/usr/include/prometheus/registry.h",)),
    Need("libnuma-dev", "NUMA", ("/usr/include/numa.h",)),
    Need("libarchive-dev", "the Python backend's environments", ("/usr/include/archive.h",)),
    Need("libb64-dev", "base64", ("/usr/include/b64/encode.h",)),
    Need("zlib1g-dev", "zlib", ("/usr/include/zlib.h",)),
    Need("binutils", "readelf, to carry the libraries the build links", command="readelf"),
    Need("googletest", "common's test framework sources", ("/usr/src/googletest/CMakeLists.txt",)),
    # the core's own tests (src/test, always configured off Windows) find_package(GTest): the
    # sources above do not satisfy it, Debian's built library does
    Need(
        "libgtest-dev",
        "the core's test framework (find_package(GTest))",
        (
            "/usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake",
            "/usr/lib/aarch64-linux-gnu/cmake/GTest/GTestConfig.cmake",
        ),
    ),
)

BOOST_MIN = 107800


def _boost_ok() -> bool:
    header = Path("/usr/include/boost/version.hpp")
    if not header.exists():
        return True  # reported as missing by its own need
    m = re.search(r"#define BOOST_VERSION (\d+)", header.read_text(errors="replace"))
    return bool(m) and int(m.group(1)) >= BOOST_MIN


def missing_packages(exists=os.path.exists, which=shutil.which) -> list[str]:
    """The Debian packages whose files are absent (in NEEDS order)."""
    out = []
    for need in NEEDS:
        ok = (need.command is not None and which(need.command) is not None) or any(exists(p) for p in need.paths)
        if not ok:
            out.append(need.package)
    return out


def python_headers_missing(python: str = sys.executable) -> str | None:
    """The interpreter's Python.h, which the backend stub embeds, or what provides it."""
    code = (
        "import sys, sysconfig; print(sysconfig.get_paths()['include']); "
        "print(f'{sys.version_info[0]}.{sys.version_info[1]}'); print(sys.base_prefix)"
    )
    try:
        inc, v, prefix = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
        ).stdout.split("\n")[:3]
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return f"a Python interpreter at {python}"
    if os.path.exists(os.path.join(inc, "Python.h")):
        return None
    return f"python{v}-dev" if prefix in ("/usr", "/usr/local") else f"the headers of the Python at {prefix}"


def check(python: str = sys.executable) -> None:
    """Refuse, in one line, a machine that lacks a package; the line installs them."""
    missing = missing_packages()
    if not _boost_ok():
        missing.append("libboost1.81-dev")
    headers = python_headers_missing(python)
    if headers and headers.startswith("python"):
        missing.append(headers)
        headers = None
    if missing:
        raise RigError(
            f"a source build needs {', '.join(missing)}: "
            f"apt-get update && apt-get install -y --no-install-recommends {' '.join(missing)}"
        )
    if headers:
        raise RigError(
            f"a source build needs {headers} (Python.h); install them, or run the rig with an interpreter that has them"
        )


def tools(cache: Path, log) -> tuple[str, str]:
    """cmake and ninja from PyPI, installed once into the cache; returns their paths."""
    target = cache / "build-tools"

    def found():
        cmake = target / "cmake" / "data" / "bin" / "cmake"
        # ninja's wheels moved its binary from ninja/data/bin to the scripts folder (1.11 -> 1.13)
        ninja = next(
            (p for p in (target / "ninja" / "data" / "bin" / "ninja", target / "bin" / "ninja") if p.is_file()), None
        )
        if cmake.is_file() and ninja is not None and (target / ".complete").exists():
            return str(cmake), str(ninja)
        return None

    if found():
        return found()
    log("installing cmake and ninja from PyPI into " + str(target))
    from rig.common.wheels import pip_install_into

    pip_install_into(
        target,
        ["cmake>=3.31.8,<5", "ninja"],
        "cmake and ninja from PyPI",
        "a source build needs them (pip install 'cmake>=3.31.8' ninja)",
    )
    if not found():
        raise RigError(
            f"cmake and ninja installed from PyPI into {target}, but their binaries are not "
            "where expected; remove that folder and try again"
        )
    return found()
