"""A cycle's reference answers (``rig.worker.cycle``): each model's input entries, checked
against the metadata the server reports, one request per entry before the load, and the check
every response under load is then held to; the reference requests' failures counted into the
cycle's totals."""

from __future__ import annotations

import json

from rig.common.errors import RigError
from rig.common.text import top_messages
from rig.contract import inputs as inputs_mod
from rig.contract.rows import CycleDraft
from rig.contract.spec import CycleSpec
from rig.worker.engines.base import Engine
from rig.worker.outputs import merge_checks, reference_output


class InputsRefused(RigError):
    """The run's inputs do not fit a model's metadata, found only once the server reported it
    (a model without a config.pbtxt the parent could read): the worker says so and the parent
    refuses the run in one line, as it does before a run where it can."""


def references(engine: Engine, spec: CycleSpec, row: CycleDraft) -> tuple[dict, dict, dict]:
    """Each model's entries, the check every response under load is held to (its metadata and first
    answer(s)), and the reference requests' own counts: ``(inputs, checks, reference)``."""
    metas = {m: engine.model_metadata(m) for m in spec.models}
    inputs = _entries(spec, metas)
    checks: dict = {}
    reference: dict = {"requests": 0, "errors": 0, "timeouts": 0, "messages": {}}
    for m in spec.models:
        ok, notes, checks[m], failed = _reference(engine, spec, m, inputs[m], metas[m], reference)
        if m == spec.models[0]:
            row["outputs_ok"] = None if failed else ok
        for note in notes:
            row.note(note)
    return inputs, checks, reference


def _entries(spec: CycleSpec, metas: dict) -> dict[str, list[dict]]:
    """Each model's entries (``rig.contract.inputs``), checked against the metadata the server reports.
    The parent checked them already where every model has a config.pbtxt it could read; here
    the check is the server's word, and a refusal ends the run (``InputsRefused``)."""
    try:  # the file is read again here: it may have changed since the parent read it
        data = None if spec.input_data in inputs_mod.GENERATED else inputs_mod.read_data(spec.input_data)
        return inputs_mod.build(metas, spec.input_data, spec.shapes, data, spec.optional_inputs)
    except RigError as e:
        raise InputsRefused(str(e)) from None


def _reference(engine: Engine, spec: CycleSpec, model: str, entries: list[dict], meta, reference: dict) -> tuple:
    """The reference answers of one model before the load, one request per entry (up to
    ``MAX_REFERENCE_ENTRIES``), each held to the metadata (the template's also to INPUT @ W);
    ``(ok, notes, check, failed)``. With one entry the check is its answer's (exact bytes for
    the template); with several, what they share: responses under load are held to the
    metadata's promise, since a lane's responses are not matched to the entry they answer."""
    oks, notes, found = [], [], []
    failed: dict = {}
    size = spec.check if model == spec.models[0] else 0
    for entry in entries[: inputs_mod.MAX_REFERENCE_ENTRIES]:
        ok, note, check = reference_output(
            engine, model, entry, size, spec.request_timeout, meta=meta, failed=failed, exact=spec.check_exact
        )
        reference["requests"] += 1
        if failed:  # the reference request is a request of the cycle's load: counted as such
            reference["errors"] += 1
            reference["timeouts"] += failed["code"] == "TIMEOUT"
            reference["messages"][failed["message"]] = reference["messages"].get(failed["message"], 0) + 1
            notes.append(note)
            break  # a model that fails one answer is not asked again before the load
        oks.append(ok)
        found.append(check)
        if note and note not in notes:
            notes.append(note)
    ok = False if False in oks else (True if oks and all(oks) else None)
    if len(entries) > 1:
        asked = min(len(entries), inputs_mod.MAX_REFERENCE_ENTRIES)
        notes.append(
            f"{model}: {len(entries)} input entries: responses checked against the metadata, not exact "
            f"bytes" + (f" (the first {asked} answered before the load)" if asked < len(entries) else "")
        )
    return ok, notes, merge_checks(found), failed


def add_reference(row: CycleDraft, reference: dict) -> None:
    """Count the reference requests' failures into the cycle's totals and messages (they come
    before the windows, so no window holds them)."""
    if not reference["errors"]:
        return
    row["requests"] = (row.get("requests") or 0) + reference["errors"]
    row["errors"] = (row.get("errors") or 0) + reference["errors"]
    row["timeouts"] = (row.get("timeouts") or 0) + reference["timeouts"]
    messages = json.loads(row["error_messages"]) if row.get("error_messages") else {}
    row["error_messages"] = top_messages([messages, reference["messages"]])
