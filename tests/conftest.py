"""Fixtures shared by the tests; plain helpers (``rig``, ``spawn``, ``cycles``) are in helpers.py.

Tiers: ``-m "not slow and not official"`` is the fast one (pure functions, the watchdog on fake
workers); ``slow`` tests start a real Triton core, a worker, Locust or a build; ``official`` ones
need the PyPI bindings (tests/sandbox/official.sh).
"""

from __future__ import annotations

import sys

import pytest

from helpers import ROOT

# The tests follow the layers (tests/<package>/, e2e/, house/). Every folder of tests goes on the
# module path, as pytest puts a test's own, so that a test may import another's helpers wherever
# it lies (test_inputs_parse reads test_inputs', test_official_soak test_official_engine's).
for _folder in sorted((ROOT / "tests").iterdir(), reverse=True):
    if _folder.is_dir() and any(_folder.glob("test_*.py")) and str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


@pytest.fixture(scope="session")
def repo_root():
    """The checkout's root folder (where ``python -m rig`` runs from)."""
    return ROOT


@pytest.fixture(scope="session")
def runtime():
    """The embedded default runtime (installed on first use, as the rig does)."""
    from rig.parent import runtime as rt

    return rt.resolve(None, log=print)
