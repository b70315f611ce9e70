"""rig.repro.cell: the scenarios `rig repro` covers and those it refuses, and what the script knows of
its cell (``CELL``: plain values, the sequences of the rig's own client); the helpers the other tests
of rig.repro take (a cell's config, a made-up runtime)."""

from __future__ import annotations

import ast
import re
import sys

from rig.contract.runtime import EmbeddedRuntime
from rig.repro import build as repro_build
from rig.repro import cell as repro_cell

NO_RIG_IMPORT = re.compile(r"^\s*(import\s+rig\b|from\s+rig\b)", re.M)


def config_of(scenario="retained-response", shape=None, control=False):
    """The run config the rig gives a cell (on 0.7.0, exit timeout 5)."""
    return repro_cell.cell_config(repro_cell.scenario_of(scenario), control, shape, 5, "0.7.0")


def embedded_runtime(stub_site="/site/numpy1") -> EmbeddedRuntime:
    """An embedded runtime of Triton 2.51.0 whose paths are made up."""
    return EmbeddedRuntime(name="embedded-0.7.0", triton_version="2.51.0", server_dir="/rt/py3.11",
                           core_library="/rt/py3.11/lib/libtritonserver.so", backend_dir="/rt/py3.11/backends",
                           library_path=("/py/lib", "/rt/wheel/libs", "/rt/py3.11/lib"), stub_site=stub_site)


def test_what_it_covers_and_what_it_refuses():
    names = repro_cell.covered_names()
    for name in ("retained-response", "retained-array", "finalize-raises", "stub-exits", "execute-raises", "baseline",
                 "sender-kept", "bls-in-flight", "metrics", "missing-model-py",
                 "ready-stub-dead", "stop-in-flight", "stop-while-loading", "refused-request", "ensemble-in-flight",
                 "sequence-at-stop"):
        assert name in names
    for name in ("reload", "worker-killed", "memory", "leaks-memory", "slows-down", "metrics-reload",
                 "shm-after-forced-stop", "sender-after-return"):
        assert name not in names


def test_the_script_holds_the_cell_and_imports_no_rig():
    s = repro_cell.scenario_of("retained-array")
    cfg = config_of("retained-array", shape="decoupled")
    cell = repro_cell.cell_of(s, cfg, embedded_runtime(), False, ["numpy"])
    assert cell["retain"] == "last-array" and cell["shape"] == "decoupled" and cell["upstream"] == ["server#8755"]
    assert cell["expected"]["lifecycle"] and cell["meanings"]["exit_timeout"]
    text = repro_build.script_text(cell)
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "rig" not in imported and not NO_RIG_IMPORT.search(text)
    assert imported <= set(sys.stdlib_module_names) | {"numpy", "__future__"}
    ns: dict = {"__name__": "repro"}
    exec(compile(text, "repro.py", "exec"), ns)
    assert ns["CELL"] == cell


def test_the_sequences_are_the_rigs_clients():
    """The sequences the script opens are those of the rig's sequence-at-stop client (which rig.repro does not
    import)."""
    from rig.worker.clients import sequences

    assert repro_cell.SEQUENCES == {"n": sequences.SEQUENCES, "first": sequences.FIRST_SEQUENCE,
                                     "idle_s": sequences.IDLE_WAIT_S}
    cell = repro_cell.cell_of(repro_cell.scenario_of("sequence-at-stop"), config_of("sequence-at-stop"),
                              embedded_runtime(), False, ["sequence_sum"])
    assert cell["client"] == "sequence-at-stop" and cell["sequences"] == repro_cell.SEQUENCES
    control = config_of("ensemble-in-flight", control=True)
    assert control.client == "none"  # its client is its fault
    cell = repro_cell.cell_of(repro_cell.scenario_of("ensemble-in-flight"), control, embedded_runtime(), True,
                              ["ensemble_pipeline"])
    assert cell["sequences"] is None and "no client around stop()" in cell["what"]
