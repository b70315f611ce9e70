"""Which ``tritonserver`` bindings an official-API cell ran, and whether a step between two cores
coincides with a change of them: then it is a change of bindings, never said to be Triton's.

The rig runs the official API over a core with the bindings its runtime gives: a core built here
(``rig runtime build``: r24.10, 2.51.0, on) carries its own (PyPI's wheel of that very version, or
compiled from the branch's ``core/python``); the cores the nvidia-pytriton wheels bundle (2.36.0 to
2.51.0) run the ``tritonserver`` package installed beside them, which PyPI has from 2.70.0 only
(the official engine's sandbox: 2.71.0). A cell says which where its cycles carry the bindings'
version (``Cell.bindings``, a run's ``tritonserver_version``) or whether they are the core's own
(``Cell.own_bindings``, the ``bindings_own`` column); where neither is recorded (the kept store
holds neither), the rule above stands, said as assumed. Pure.
"""

from __future__ import annotations

import dataclasses

from rig.analysis.conformance.cells import Cell
from rig.contract.ngc import PYTRITON_CORE
from rig.runtimes.from_source.identity import release_of

OFFICIAL = "tritonserver"
INSTALLED = "PyPI's"  # what bindings not recorded beside a wheel's core are said to be


@dataclasses.dataclass(frozen=True)
class Bindings:
    """The bindings an official-API cell ran: their version (None: not recorded), whether they are
    the core's own, and whether that was read off the runtimes' rule rather than recorded."""

    version: str | None
    own: bool
    assumed: bool = False

    def text(self, core: str) -> str:
        """``2.52.0 (own)``, ``2.71.0``, ``PyPI's``."""
        version = self.version or (release_of(core) if self.own else INSTALLED)
        return version + (" (own)" if self.own else "")

    def summary(self, core: str) -> dict:
        return {"version": self.version, "own": self.own, "assumed": self.assumed, "said": self.text(core)}


def bindings_of(c: Cell) -> Bindings | None:
    """The bindings an official-API cell ran (None: another API's cell)."""
    if c.engine != OFFICIAL:
        return None
    release = release_of(c.triton_version)
    if c.own_bindings is not None:
        return Bindings(c.bindings, bool(c.own_bindings))
    if c.bindings:
        return Bindings(c.bindings, release_of(c.bindings) == release)
    return Bindings(None, release not in set(PYTRITON_CORE.values()), assumed=True)


def bindings_change(a: Cell, b: Cell) -> tuple[Bindings, Bindings] | None:
    """The bindings of two cells of one row where they changed between them (their own build to
    another's, or one installed version to another); None where they did not (each core's own
    build is part of its release: no change of bindings) or the API has none."""
    x, y = bindings_of(a), bindings_of(b)
    if x is None or y is None:
        return None
    if x.own != y.own:
        return x, y
    if not x.own and x.version and y.version and x.version != y.version:
        return x, y
    return None


def change_text(a: Cell, b: Cell, change: tuple[Bindings, Bindings]) -> str:
    """``bindings PyPI's → 2.52.0 (own)`` (said assumed where neither side's was recorded)."""
    x, y = change
    text = f"bindings {x.text(a.triton_version)} → {y.text(b.triton_version)}"
    return text + (" (assumed: the cycles do not record them)" if x.assumed and y.assumed else "")


def join_runs(cycles, runs):
    """A cycles frame with each cycle's run's bindings (the runs table's ``tritonserver_version``,
    where the cycles lack it): what ``bindings_of`` reads. ``runs`` None or without the column: the
    cycles as they are."""
    if runs is None or "tritonserver_version" not in getattr(runs, "columns", ()) or "run_id" not in cycles:
        return cycles
    versions = runs[["run_id", "tritonserver_version"]].drop_duplicates("run_id")
    if "tritonserver_version" not in cycles.columns:
        return cycles.merge(versions, on="run_id", how="left")
    # cycles of schema 19 on carry their own; an older cycle's (null) is its run's
    by_run = dict(zip(versions["run_id"], versions["tritonserver_version"], strict=True))
    out = cycles.copy()
    missing = out["tritonserver_version"].isna()
    out.loc[missing, "tritonserver_version"] = out.loc[missing, "run_id"].map(by_run)
    return out
