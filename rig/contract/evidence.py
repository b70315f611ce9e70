"""What a cycle reads back after the fact: the finalize markers that the evidence hook
(``rig/worker/hook/evidence.py``) wrote from inside the backend stubs, the crash markers of the crash
recorder it arms there (``rig/worker/hook/crash.c``), and Triton's own log."""

from __future__ import annotations

import json
import os
from pathlib import Path

# The crash recorder's library, named to the stubs by the worker (rig.worker.hook.crashlib.arm_env) and
# read by the evidence hook in them
CRASH_LIB_ENV = "RIG_CRASH_LIB"
# The marker phase an instance leaves the first time its ``execute`` returns None: it answers through
# the response sender, maybe after ``execute`` returned (rig.contract.server_stats.UNCOVERED)
ANSWERS_AFTER_RETURN = "answers_after_return"


def read_markers(evidence_dir: Path) -> list[dict]:
    out: list[dict] = []
    if not evidence_dir.is_dir():
        return out
    for f in evidence_dir.glob("*.json"):
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            pass
    return out


def answering_after_return(evidence_dir: str | Path | None) -> set[str]:
    """The models of which an instance's ``execute`` returned None in this cycle (their
    ``answers_after_return`` markers, one per instance at most): nothing where no folder."""
    if not evidence_dir:
        return set()
    out = set()
    for f in Path(evidence_dir).glob(f"*-{ANSWERS_AFTER_RETURN}.json"):
        try:
            out.add(str(json.loads(f.read_text())["model"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return out


def summarize_markers(markers: list[dict], t_stop_returned: float | None, crash_recorder: bool | None = None) -> dict:
    """Finalize counts of one cycle. A finalize counts only from a stub process (pid) and
    instance that initialized in this cycle, so ``finalize_before_stop`` can never exceed
    ``finalize_expected``, whatever else writes into the folder. ``stub_crashes``: the stubs
    (pids) that left a crash marker, or None where no recorder was armed (``crash_recorder``;
    by default whether this process names one to its stubs in ``RIG_CRASH_LIB``)."""
    if crash_recorder is None:
        crash_recorder = bool(os.environ.get(CRASH_LIB_ENV))
    inits = {(m["pid"], m["instance"]) for m in markers if m.get("phase") == "init"}
    ends = [m for m in markers if m.get("phase") == "finalize_end" and (m["pid"], m["instance"]) in inits]
    before = after = 0
    for m in ends:
        if t_stop_returned is not None and m["t_mono"] <= t_stop_returned:
            before += 1
        else:
            after += 1
    crashed = {m.get("pid") for m in markers if m.get("phase") == "crash"}
    return {
        "finalize_expected": len(inits),
        "finalize_before_stop": before,
        "finalize_after_stop": after,
        "finalize_errors": sum(1 for m in ends if m.get("error")),
        "stub_crashes": len(crashed) if crash_recorder else None,
        "stub_exit_aborts": len(aborted_at_exit(markers, inits)) if crash_recorder else None,
        "input_copies": input_copies(markers, inits),
    }


def aborted_at_exit(markers: list[dict], inits: set | None = None) -> set:
    """The crashed stubs (pids) that died only once every instance they served had finished its
    finalize: an abort at the interpreter's exit (2.68.0 on: "Fatal Python error: PyThreadState_Get
    ... finalizing"), after a stop that may have been clean, apart from a stub that crashed before
    or during the stop (its finalize unfinished, or its death before it)."""
    if inits is None:
        inits = {(m["pid"], m["instance"]) for m in markers if m.get("phase") == "init"}
    died: dict = {}
    for m in markers:
        if m.get("phase") == "crash" and m.get("t_mono") is not None:
            died[m.get("pid")] = min(died.get(m.get("pid"), m["t_mono"]), m["t_mono"])
    ended: dict = {}
    for m in markers:
        if m.get("phase") == "finalize_end" and (m["pid"], m["instance"]) in inits:
            ended.setdefault(m["pid"], {})[m["instance"]] = m["t_mono"]
    out = set()
    for pid, t_death in died.items():
        served = {inst for p, inst in inits if p == pid}
        done = ended.get(pid, {})
        if served and served <= set(done) and t_death >= max(done.values()):
            out.add(pid)
    return out


def input_copies(markers: list[dict], inits: set | None = None) -> int | None:
    """CPU inputs that this cycle's model instances copied to their device, as they counted them
    (the CuPy model's ``memory`` markers, one per instance, replaced as it goes); None where no
    instance of this cycle counts."""
    if inits is None:
        inits = {(m["pid"], m["instance"]) for m in markers if m.get("phase") == "init"}
    counts = [
        m.get("input_copies")
        for m in markers
        if m.get("phase") == "memory" and (m.get("pid"), m.get("instance")) in inits
    ]
    counts = [int(c) for c in counts if isinstance(c, (int, float))]
    return sum(counts) if counts else None


def never_finalized(markers: list[dict]) -> int:
    """The instances of this cycle whose ``finalize`` was never called (an ``init`` marker and no
    ``finalize_start``): their stubs were gone, or taken for dead, before the finalize message."""
    inits = {(m["pid"], m["instance"]) for m in markers if m.get("phase") == "init"}
    return len(inits - {(m["pid"], m["instance"]) for m in markers if m.get("phase") == "finalize_start"})


_NOISE = (
    "CudaDriverHelper has not been initialized",
    "Unable to find",
    "GPU metrics",
    "failed to get CUDA device count",
    "No CUDA",
)


def triton_error(log_file: str | None) -> str | None:
    """The reason Triton's own log gives for a failed load: a model's exception from its
    ``initialize``, the Python backend's word on a small /dev/shm, ... (its first error line
    that is not a CPU-only machine's noise), in one line."""
    if not log_file or not os.path.exists(log_file):
        return None
    found = []
    with open(log_file, errors="replace") as f:
        for line in f:
            if not line.startswith("E") or any(n in line for n in _NOISE):
                continue
            text = line.split("] ", 1)[-1].strip().strip('"')
            text = text.split("\\n")[0].strip()  # the log escapes a message's newlines
            if text:
                found.append(text)
    if not found:
        return None
    # the model's own failure ("failed to load 'x' ...: <exception>") says the most
    best = next((t for t in found if "failed to load" in t), found[0])
    return best[:500]
