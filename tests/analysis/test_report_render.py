"""`rig report`'s summary and page made from a results folder (rig.analysis.report.render), over the
small kept store of real soaks: kept by ``--where``, the cyclic collector on again afterwards, a
``--where`` that keeps nothing one error. (The command around it: tests/analysis/test_report.py.)"""

from __future__ import annotations

import gc

import pytest
from helpers import ROOT

from rig.analysis.report import render
from rig.common.errors import RigError

FIXTURE = ROOT / "tests" / "data" / "conformance" / "store"

pytestmark = pytest.mark.slow  # the report's imports and its renderer: seconds


def test_the_summary_and_the_page_of_the_cycles_kept():
    assert gc.isenabled()
    md, page = render.make(str(FIXTURE), ["triton_version=2.51.0"], None, 8, None)
    assert md.startswith(f"# rig report: {FIXTURE}\n")
    assert "Triton 2.51.0\n" in md and "2.48.0" not in md.split("\n\n")[1]
    assert page.lstrip().lower().startswith("<!doctype html") and "</html>" in page
    assert gc.isenabled()
    with pytest.raises(RigError, match="engine=tritonserver"):
        render.make(str(FIXTURE), ["engine=tritonserver"], None, 8, None)
    assert gc.isenabled()
