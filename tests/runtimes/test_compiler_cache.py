"""The compiler cache of `rig runtime build`: the core's version reaches server.cc alone, so the
core's other files compile to the same commands in every release, and ccache serves a neighbour."""

from __future__ import annotations

import textwrap

from rig.runtimes.from_source import recipe

CORE = textwrap.dedent('''
    add_library(triton-core SHARED server.cc tritonserver.cc)
    target_compile_definitions(
      triton-core
      PRIVATE TRITON_VERSION="${TRITON_VERSION}"
    )
    if(${TRITON_ENABLE_NVTX})
    endif()
''')


def test_the_version_is_defined_on_server_cc_only():
    patched = recipe.core_version_patch(CORE)
    assert 'PRIVATE TRITON_VERSION' not in patched
    assert 'set_property(SOURCE server.cc APPEND PROPERTY COMPILE_DEFINITIONS TRITON_VERSION="${TRITON_VERSION}")' \
        in patched
    assert recipe.core_version_patch(patched) == patched  # idempotent: a resumed build patches again
    assert "if(${TRITON_ENABLE_NVTX})" in patched


def test_a_cmakelists_without_that_definition_is_left_alone():
    other = CORE.replace('PRIVATE TRITON_VERSION="${TRITON_VERSION}"', "PRIVATE OTHER=1")
    assert recipe.core_version_patch(other) == other


def test_launchers_only_with_ccache():
    assert recipe.ccache_flags(None) == []
    assert recipe.ccache_flags("/usr/bin/ccache") == ["-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/ccache",
                                                     "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/ccache"]
