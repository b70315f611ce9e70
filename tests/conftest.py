"""Fixtures shared by the tests; plain helpers (``rig``, ``spawn``, ``cycles``) are in helpers.py.

Tiers: ``-m "not slow and not official"`` is the fast one (pure functions, the watchdog on fake
workers); ``slow`` tests start a real Triton core, a worker, Locust or a build; ``official`` ones
need the PyPI bindings (tests/sandbox/official.sh).
"""

from __future__ import annotations

import pytest

from helpers import ROOT


@pytest.fixture(scope="session")
def repo_root():
    """The checkout's root folder (where ``python -m rig`` runs from)."""
    return ROOT


@pytest.fixture(scope="session")
def runtime():
    """The embedded default runtime (installed on first use, as the rig does)."""
    from rig.parent import runtime as rt

    return rt.resolve(None, log=print)
