"""Variants of the lifecycle scenarios' classes, written the way other teams write models
(``tests/corpus/variants/``: other names, inputs, shapes and ways of going wrong), each run as a
user would run their own repository, with the options its scenario's cells run with. Each must
land in the verdicts the conformance table (``rig/scenarios/known_verdicts.csv``) gives its class for the
core, API and model shape it ran in: the table is about a class of bug, not about the rig's own
models.
"""

from __future__ import annotations

import pytest

from helpers import ROOT, cycles, rig
from rig.scenarios import catalog as scenarios
from rig.scenarios import known
from rig.workflows.matrix_setup import SCENARIO_LOAD
from rig.worker.engines.official import loader

VARIANTS = ROOT / "tests" / "corpus" / "variants"
_OFFICIAL = loader.bindings_library() is not None
ENGINES = [pytest.param("capi", marks=pytest.mark.slow),
           pytest.param("tritonserver", marks=[pytest.mark.slow, pytest.mark.official, pytest.mark.skipif(
               not _OFFICIAL, reason="the tritonserver bindings are not installed here; run these tests in "
                                     "the sandbox: bash tests/sandbox/official.sh")])]

CASES = [  # (the variant, the scenario whose class it is, what its scenario's cells add)
    ("sigkill_batched", "stub-exits", ()),                       # SIGKILL, not os._exit; batched
    ("raises_two_instances", "execute-raises", SCENARIO_LOAD),   # RuntimeError per instance
    ("keeps_senders", "sender-kept", SCENARIO_LOAD),             # senders in a dict, one token each
    ("finalize_keyerror", "finalize-raises", ()),                # two instances
    ("finalize_joins_forever", "finalize-sleeps", ()),           # joins a thread that never ends
    ("initialize_missing_file", "load-fails", ()),               # np.load of a missing file
    ("retained_by_batcher", "retained-array", ("--retain", "last-array")),  # the client keeps it
]

def _built(version: str) -> bool:
    from rig.parent import runtime
    from rig.common.errors import RigError

    try:
        runtime.resolve(version, auto_install=False)
        return True
    except RigError:
        return False


# the embedded default, and server#8755's own version built from source (.ci/run builds it;
# elsewhere: rig runtime build 2.67.0 --sources DIR, with --python for the sandbox's 3.12)
RUNTIMES = [pytest.param(None, id="embedded"),
            pytest.param("2.67.0", id="built-2.67.0", marks=pytest.mark.skipif(
                not _built("2.67.0"), reason="Triton 2.67.0 is not built here for this Python: "
                                             "rig runtime build 2.67.0 --sources DIR"))]


@pytest.mark.parametrize("core", RUNTIMES)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("variant, scenario, extra", CASES, ids=[c[0] for c in CASES])
def test_a_variant_lands_in_the_tables_verdict_for_its_class(tmp_path, engine, variant, scenario, extra, core):
    res = tmp_path / "results"
    chosen = ("--runtime", core) if core else ()
    p = rig("soak", "--model-repository", str(VARIANTS / variant), "--engine", engine, "--cycles", "1",
            "--exit-timeout", "5", "--request-timeout", "5", *chosen, *extra, "--results", str(res), timeout=400)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    for row in cycles(res).to_dict("records"):
        shape, core = row["shape"], str(row["triton_version"])
        # held to the row nearest its shape (a queue delay reads as batched-delayed; where the scenario
        # has no such row, its batched one: rig.scenarios.shapes.nearest), as rig report holds it
        # and to the row of the bindings it ran: the embedded 2.51.0 runs PyPI's 2.71.0, not its own
        k = known.expected(scenarios.get(scenario), False, shape, engine, core, bindings=known.bindings_label(row))
        assert k is not None, f"the table knows nothing of {scenario} [{shape}] on {core}"
        got = (row["outcome"], row["load_outcome"] or "not_measured")
        # an intermittent cell (exit_timeout|clean, rig.scenarios.known) admits either: through the official
        # bindings on 2.51.0 execute-raises in two instances is one (docs/measurements/conformance.md)
        assert known.holds(got, k.verdicts), \
            f"{variant} gave {got}; the table gives {scenario} [{shape}] {k.verdicts}: {row['detail']}"
