"""How one Triton release is configured and built for CPU on this machine.

The flags follow the release's ``build.py`` (``core_cmake_args``, ``backend_cmake_args``) for a
CPU-only core with metrics, CPU metrics, statistics, logging and ensembles on. The adaptations
that Debian 12 needs are in ``shims()`` and ``python_backend_patch()``; ``DIFFERS_FROM_NGC`` lists
every way the result differs from the NGC image's core, and goes into the runtime's manifest.
"""

from __future__ import annotations

import re
from pathlib import Path

CORE_FLAGS = {
    "TRITON_ENABLE_LOGGING": "ON",
    "TRITON_ENABLE_STATS": "ON",
    "TRITON_ENABLE_METRICS": "ON",
    "TRITON_ENABLE_METRICS_CPU": "ON",
    "TRITON_ENABLE_ENSEMBLE": "ON",
    "TRITON_ENABLE_GPU": "OFF",
    "TRITON_ENABLE_METRICS_GPU": "OFF",
    "TRITON_ENABLE_MALI_GPU": "OFF",
    "TRITON_ENABLE_TRACING": "OFF",
    "TRITON_ENABLE_NVTX": "OFF",
    "TRITON_ENABLE_TENSORRT": "OFF",
    "TRITON_ENABLE_GCS": "OFF",
    "TRITON_ENABLE_S3": "OFF",
    "TRITON_ENABLE_AZURE_STORAGE": "OFF",
    "TRITON_ENABLE_GRPC": "OFF",
    "TRITON_ENABLE_HTTP": "OFF",
    "TRITON_ENABLE_SAGEMAKER": "OFF",
    "TRITON_ENABLE_VERTEX_AI": "OFF",
}
BACKEND_FLAGS = {"TRITON_ENABLE_GPU": "OFF", "TRITON_ENABLE_STATS": "ON", "TRITON_ENABLE_NVTX": "OFF"}

DIFFERS_FROM_NGC = (
    (
        "CPU only: TRITON_ENABLE_GPU, TRITON_ENABLE_METRICS_GPU and the Python backend's GPU support are "
        "off (no CUDA memory, no CUDA shared memory between stub and core, no DLPack on GPU)"
    ),
    "no tracing (TRITON_ENABLE_TRACING off: OpenTelemetry is not packaged here) and no NVTX",
    "no cloud model repositories (GCS, S3, Azure Storage off)",
    "no TensorRT, and no backends but python (the image ships onnxruntime, pytorch, tensorrt, ...)",
    (
        "the libraries are Debian 12's (protobuf 3.21, re2 2022-12, Boost 1.81 headers, prometheus-cpp "
        "1.0, RapidJSON), not the versions the image builds from third_party"
    ),
    "compiled by Debian 12's GCC 12 against glibc 2.36 (the image: its Ubuntu's GCC and glibc)",
    "the backend stub is built for the Python that ran the build, not the image's Python 3.12",
    (
        "the in-process Python bindings (the tritonserver package): PyPI's wheel where it has this version "
        "for this Python (2.70.0 and later, CPython 3.12), else compiled here from core/python of the same "
        "branch with g++ directly (the image's wheel is built by its CMake)"
    ),
)

# Debian 12 ships no CMake config files for protobuf or re2, which the CMakeLists find in CONFIG
# mode: these wrap CMake's own FindProtobuf and import the installed libre2.so.
PROTOBUF_CONFIG = """\
# rig: Debian 12's protobuf through CMake's FindProtobuf, as a CONFIG package
set(_rig_mod_path "${CMAKE_MODULE_PATH}")
find_package(Protobuf MODULE REQUIRED)
set(CMAKE_MODULE_PATH "${_rig_mod_path}")
set(Protobuf_FOUND TRUE)
set(protobuf_FOUND TRUE)
if(NOT TARGET protobuf::protoc)
  add_executable(protobuf::protoc IMPORTED)
  set_target_properties(protobuf::protoc PROPERTIES IMPORTED_LOCATION "${Protobuf_PROTOC_EXECUTABLE}")
endif()
"""
RE2_CONFIG = """\
# rig: Debian 12's libre2 as the re2::re2 target
find_library(_RIG_RE2 NAMES re2 REQUIRED)
find_path(_RIG_RE2_INC re2/re2.h REQUIRED)
if(NOT TARGET re2::re2)
  add_library(re2::re2 SHARED IMPORTED)
  set_target_properties(re2::re2 PROPERTIES IMPORTED_LOCATION "${_RIG_RE2}"
                        INTERFACE_INCLUDE_DIRECTORIES "${_RIG_RE2_INC}")
endif()
set(re2_FOUND TRUE)
"""


def shims(folder: Path) -> Path:
    """Write the CMake config shims; returns the folder for CMAKE_PREFIX_PATH."""
    for name, text in (("protobuf", PROTOBUF_CONFIG), ("re2", RE2_CONFIG)):
        d = folder / "lib" / "cmake" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}-config.cmake").write_text(text)
    boost = folder / "boost-src"
    boost.mkdir(parents=True, exist_ok=True)
    link = boost / "boost"
    if not link.exists():
        link.symlink_to("/usr/include/boost")
    return folder


def pinned(cmakelists: str, name: str) -> str | None:
    """The GIT_TAG a FetchContent_Declare(name ...) block pins, or None."""
    m = re.search(r"FetchContent_Declare\(\s*" + re.escape(name) + r"\b(.*?)\)", cmakelists, re.DOTALL)
    if not m:
        return None
    tag = re.search(r'GIT_TAG\s+"?([^"\s)]+)"?', m.group(1))
    return tag.group(1) if tag else None


BOOST_MARK = "# rig: the system's Boost headers (TRITON_BOOST_URL), no download"


def python_backend_patch(cmakelists: str) -> str:
    """The Python backend downloads Boost by URL with a pinned SHA256 (r25.08 and older: a
    fixed URL): point it at ${TRITON_BOOST_URL}, the system's headers. Idempotent."""
    m = re.search(r"ExternalProject_Add\(\s*boostorg\b(.*?)\n\)", cmakelists, re.DOTALL)
    if not m or BOOST_MARK in cmakelists:
        return cmakelists
    block = re.sub(r"^\s*URL_HASH\s+SHA256=\w+\s*$\n?", "", m.group(1), flags=re.MULTILINE)
    block = re.sub(
        r"^(\s*)URL\s+\S+", lambda u: f"{u.group(1)}URL ${{TRITON_BOOST_URL}}", block, count=1, flags=re.MULTILINE
    )
    return cmakelists[: m.start(1)] + block + "\n)\n" + BOOST_MARK + cmakelists[m.end() :]


VERSION_MARK = "# rig: TRITON_VERSION defined for server.cc only, its one user (a compiler cache then serves the rest)"


def core_version_patch(cmakelists: str) -> str:
    """The core defines ``TRITON_VERSION`` on every file of ``triton-core``, though ``server.cc`` alone
    reads it: each release's compile commands then differ in every file, and a compiler cache
    (ccache) serves a neighbouring release nothing. Defined on ``server.cc`` alone, the same
    value there; the other files' commands are the same from one release to the next. Idempotent;
    a CMakeLists without that definition is left as it is."""
    if VERSION_MARK in cmakelists:
        return cmakelists
    pattern = re.compile(
        r'target_compile_definitions\(\s*triton-core\s+PRIVATE\s+TRITON_VERSION="\$\{TRITON_VERSION\}"\s*\)'
    )
    if not pattern.search(cmakelists):
        return cmakelists
    return pattern.sub(
        lambda m: (
            "set_property(SOURCE server.cc APPEND PROPERTY COMPILE_DEFINITIONS "
            'TRITON_VERSION="${TRITON_VERSION}")\n' + VERSION_MARK
        ),
        cmakelists,
        count=1,
    )


def ccache_flags(ccache: str | None) -> list[str]:
    """CMake's compiler launchers for ccache (none without it)."""
    return [f"-DCMAKE_C_COMPILER_LAUNCHER={ccache}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={ccache}"] if ccache else []


JSON_MARK = "// rig: TritonJson renamed in this file (the ABI clash upstream fixed in common r25.10)"


def common_logging_patch(logging_cc: str, triton_json_h: str) -> str:
    """common r25.09 and older: logging.cc includes TritonJson with its own status type (uint8_t)
    while the core's files use triton::core::Status. The class's inline functions then share a
    name and differ in their return type: the linker keeps one for all, and here (GCC 12) it kept
    logging's, so every JSON message of the core came back empty (measured on 2.60.0:
    TRITONSERVER_ServerMetadata serialized to 0 bytes). Upstream fixed it in r25.10 (common
    da18f28: TritonJson became a template over its status type); this renames the class in that one
    file instead. Idempotent; later branches are left as they are."""
    if JSON_MARK in logging_cc or "TritonJsonImpl" in triton_json_h:
        return logging_cc
    anchor = '#include "triton/common/triton_json.h"'
    if "#define TRITONJSON_STATUSTYPE uint8_t" not in logging_cc or anchor not in logging_cc:
        return logging_cc
    return logging_cc.replace(anchor, f"{JSON_MARK}\n#define TritonJson TritonJsonOfLoggingOnly\n{anchor}", 1)


def _defs(flags: dict[str, str]) -> list[str]:
    return [f"-D{k}={v}" for k, v in flags.items()]


def core_configure(
    cmake: str, ninja: str, src: Path, build: Path, shim: Path, version: str, refs: dict[str, str]
) -> list[str]:
    return [
        cmake,
        "-G",
        "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={ninja}",
        "-S",
        str(src / "core" / "src"),
        "-B",
        str(build),
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DTRITON_VERSION={version}",
        f"-DTRITON_COMMON_REPO_TAG={refs['common']}",
        f"-DTRITON_CORE_REPO_TAG={refs['core']}",
        f"-DTRITON_BACKEND_REPO_TAG={refs['backend']}",
        "-DTRITON_REPO_ORGANIZATION=https://github.com/triton-inference-server",
        *_defs(CORE_FLAGS),
        *_offline(src, ("common",)),
        f"-DCMAKE_PREFIX_PATH={shim}",
        "-DCMAKE_POLICY_VERSION_MINIMUM=3.5",
    ]


def backend_configure(
    cmake: str, ninja: str, src: Path, build: Path, shim: Path, version: str, refs: dict[str, str], py: str
) -> list[str]:
    return [
        cmake,
        "-G",
        "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={ninja}",
        "-S",
        str(src / "python_backend"),
        "-B",
        str(build),
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DTRITON_VERSION={version}",
        f"-DTRITON_COMMON_REPO_TAG={refs['common']}",
        f"-DTRITON_CORE_REPO_TAG={refs['core']}",
        f"-DTRITON_BACKEND_REPO_TAG={refs['backend']}",
        "-DTRITON_REPO_ORGANIZATION=https://github.com/triton-inference-server",
        *_defs(BACKEND_FLAGS),
        *_offline(src, ("common", "core", "backend", "pybind11", "dlpack")),
        f"-DTRITON_BOOST_URL={shim / 'boost-src'}",
        f"-DCMAKE_PREFIX_PATH={shim}",
        "-DCMAKE_POLICY_VERSION_MINIMUM=3.5",
        f"-DPYTHON_EXECUTABLE={py}",
        f"-DPython3_EXECUTABLE={py}",
        f"-DPython_EXECUTABLE={py}",
    ]


def _offline(src: Path, names: tuple[str, ...]) -> list[str]:
    """FetchContent from the checked-out sources only: nothing is downloaded while building."""
    out = ["-DFETCHCONTENT_FULLY_DISCONNECTED=ON", "-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST=/usr/src/googletest"]
    for name in names:
        key = f"REPO-{name.upper()}" if name in ("common", "core", "backend") else name.upper()
        out.append(f"-DFETCHCONTENT_SOURCE_DIR_{key}={src / name}")
    return out
