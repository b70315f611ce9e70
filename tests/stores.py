"""A real results store for the tests over stored results (gate, report, ...): three short soaks
of the numpy template on the embedded Triton, run as users run them (subprocesses).

- ``none_a``, ``none_b``: ``--retain none`` twice (one configuration, two runs: clean cycles,
  finalize 1/1 before stop);
- ``keep``: ``--retain last-response`` (every cycle ``exit_timeout``, finalize 0/1 before stop).

Each soak is 5 cycles of a 1-second steady workload (1 user, 0.5 s windows): about 20-30 s here. Use the session fixture ``real_results`` (import it into the test module:
``from stores import real_results``); every module that imports it shares one store per session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import rig

SOAK = ("soak", "--cycles", "5", "--workload", "steady", "--users", "1", "--workload-seconds", "1",
        "--window-seconds", "0.5")
# Five cycles a side: with three, no test of 3 against 3 reaches p < 0.05 (Fisher's and
# Mann-Whitney's smallest p is 0.1 there). ``keep`` waits out a 1 s exit_timeout.
RUNS = {"none_a": ("--retain", "none"), "none_b": ("--retain", "none"),
        "keep": ("--retain", "last-response", "--exit-timeout", "1")}


def _run_ids(root: Path) -> set[str]:
    from rig.store import Store

    runs = Store(root).read("runs")
    return set(runs["run_id"]) if len(runs) else set()


def real_store(root: Path) -> dict:
    """Build the store under ``root`` (once: a store already built there is reused) and return
    ``{"root": root, "none_a": run_id, "none_b": run_id, "keep": run_id}``."""
    root = Path(root)
    done = root / "run_ids.json"
    if done.exists():
        return {**json.loads(done.read_text()), "root": root}
    ids: dict[str, str] = {}
    for name, extra in RUNS.items():
        before = _run_ids(root)
        p = rig(*SOAK, *extra, "--results", str(root), timeout=240)
        new = _run_ids(root) - before
        # the soak's own exit status is 1 for ``keep`` (exit_timeout is not an allowed outcome)
        assert p.returncode in (0, 1) and len(new) == 1, f"soak {name} failed:\n{p.stdout}\n{p.stderr}"
        ids[name] = new.pop()
    done.write_text(json.dumps(ids))
    return {**ids, "root": root}


@pytest.fixture(scope="session")
def real_results(tmp_path_factory) -> dict:
    """The session's real store (see the module's docstring): ``{"root": Path, name: run_id}``.
    Built once per session, however many modules import this fixture."""
    return real_store(tmp_path_factory.getbasetemp() / "real_store")
