"""A conformance cell and its verdicts: the types the table (``rig.analysis.conformance.table``)
builds and the changes between cores (``rig.analysis.conformance.changes``) compare, in a module of
their own so that both import them and neither imports the other's."""

from __future__ import annotations

import dataclasses
import re

Verdicts = tuple[str, str, str]  # lifecycle, load, growth


@dataclasses.dataclass(frozen=True)
class Cell:
    """One scenario (or its control) on one core, through one API, in one model shape."""

    engine: str
    shape: str
    scenario: str
    control: bool
    triton_version: str
    cycles: int
    lifecycle: dict  # verdict -> cycles
    load: dict
    growth: dict  # cycles that recorded a growth verdict only
    verdicts: Verdicts  # the verdicts most cycles gave (load none: not_measured; growth none: ok)
    agreeing: int  # cycles that gave ``verdicts``
    known: Verdicts | None  # the verdicts known for the cell (None: nothing known)
    judgement: str  # AS_KNOWN | FINDING | UNJUDGED
    differing: int  # cycles whose verdicts differ from the known ones
    stop_p50: float | None
    finalize_before: int
    finalize_expected: int
    finalize_after: int
    run_ids: tuple[str, ...]
    got: dict = dataclasses.field(default_factory=dict)  # "lifecycle / load / growth" -> cycles
    # the batch sizes Triton formed over its cycles' windows ({size: executions}); None: not measured
    batches: dict | None = None
    # what the server and the model answered to "ready?" once a stub was dead (ready-stub-dead), as
    # most of its cycles answered: "server ready, model ready"; None: not asked
    probed: str | None = None
    # cycles in which a backend stub aborted at exit (``stub_exit_aborts`` > 0; null in older files):
    # every aborted_at_exit cycle, and one that kept another verdict (exit_timeout, finalize_error)
    exit_aborts: int = 0
    # the official API's bindings (engine tritonserver), as most cycles ran them: their version (the
    # ``tritonserver_version`` column, where the cycles carry it) and whether they are the core's own
    # build (the ``bindings_own`` column); None: not recorded (``rig.analysis.conformance.bindings``)
    bindings: str | None = None
    own_bindings: bool | None = None

    @property
    def key(self) -> tuple[str, str, str, bool, str]:
        return self.engine, self.shape, self.scenario, self.control, self.triton_version

    @property
    def anchor(self) -> str:
        """The id of the cell's row in its figures table (the grid's link points to it)."""
        return anchor(*self.key)

    @property
    def label(self) -> str:
        return row_label(self.scenario, self.control)


def row_label(scenario: str, control: bool) -> str:
    return scenario + (" (control)" if control else "")


def anchor(engine: str, shape: str, scenario: str, control: bool, version: str) -> str:
    text = f"cf-{engine}-{shape}-{scenario}{'-control' if control else ''}-{version}"
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
