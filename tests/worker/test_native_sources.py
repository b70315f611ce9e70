"""The rig's C sources compile wherever a C compiler is found.

The native lane and the crash recorder fall back (to the Python lane, to no crash record) where
they cannot be built, and the tests of the lane skip then: a compile error in the source would
read as a skip on every machine. Here it fails, with the compiler's message.
"""

from __future__ import annotations

import pytest

from rig.common.errors import RigError
from rig.worker import native
from rig.worker.engines.capi import lane
from rig.worker.hook import crashlib

CC = native.compiler()


@pytest.mark.skipif(CC is None, reason="no C compiler here (cc, gcc or clang): nothing to compile")
@pytest.mark.parametrize("build", [lane.build, crashlib.build], ids=["native-lane", "crash-recorder"])
def test_the_c_sources_compile(build):
    try:
        path = build()
    except RigError as e:
        pytest.fail(f"a C source of the rig does not compile with {CC}: {e}")
    assert path and path.endswith(".so"), path
