"""A cycle's two verdicts, judged apart: the lifecycle's (``outcome``) and the load's
(``load_outcome``), from the figures of its row; and the notes that explain a verdict. Pure:
the worker judges a cycle with it, the store reads older cycles' single verdict as two."""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping, MutableMapping
from typing import Any

from rig.common.errors import RigError

# Two verdicts per cycle, judged apart: the lifecycle's (``outcome``: did the server start, stop
# in time and run every finalize?) and the load's (``load_outcome``: were the requests answered,
# and rightly?). A model that fails its requests can still stop cleanly, or not: one verdict must
# never hide the other.
OUTCOMES = {
    "clean": "stop returned in time, every finalize ran before it returned",
    "requests_lost": "requests in flight at stop() got neither an answer nor an error",
    "exit_timeout": "stop waited out exit_timeout (a model stayed loaded)",
    "stop_error": "stop returned another error",
    "load_failed": "the server or a model did not become ready",
    "stub_crashed": (
        "a backend stub died of a signal of its own (SIGSEGV, SIGABRT, ...) before or during the stop, "
        "though stop said nothing"
    ),
    "aborted_at_exit": (
        "stop returned in time and every finalize ran, then a backend stub died of a signal as it exited "
        "(2.68.0 on: Fatal Python error ... finalizing)"
    ),
    "finalize_error": "a model's finalize raised",
    "finalize_missing": "stop returned cleanly but some finalize had not run",
    "hung": "a phase ran past its deadline; the worker was killed",
    "crashed": "the worker died (signal or exit) in the middle of a cycle",
}
Outcome = typing.Literal[tuple(OUTCOMES)]  # the names above, once
LOAD_OUTCOMES = {
    "ok": "every request answered, every checked output right",
    "timeouts": "some requests got no final response within --request-timeout (see timeouts)",
    "errors": "some requests failed (see errors and error_messages)",
    "wrong_outputs": "requests answered, but some outputs were wrong (see bad_outputs)",
    "nothing_completed": "the load completed no request (and none failed: nothing was measured)",
    "not_measured": (
        "no load was measured: the server or a model never became ready, or the worker hung or crashed first"
    ),
}
LoadOutcome = typing.Literal[tuple(LOAD_OUTCOMES)]
# The third verdict, judged apart from both: what sustained load did to the processes where the
# models live (rig.common.trends). Apart, not folded into the load's: a leaking model answers every
# request right, and a model that fails its requests may leak too; one must never hide the other.
GROWTH_OUTCOMES = {
    "ok": "no process grew, nor the load slowed, past its threshold",
    "leaking": "a process's memory grew past --max-memory-growth bytes per 1,000 requests (the whole interval)",
    "slowing": "the load's end was slower than its start by more than --max-slowdown % (the whole interval)",
    "not_measured": "too short a load (or none) to read a trend from: under 4 samples or windows after the warm-up",
}
GrowthOutcome = typing.Literal[tuple(GROWTH_OUTCOMES)]
# The defaults, set from clean runs' noise (docs/guide/growth.md): a process that keeps over
# 256 KiB per 1,000 requests (262 B a request), a load whose end is over 50 % slower than its start.
MAX_MEMORY_GROWTH_B = 262_144
MAX_SLOWDOWN_PCT = 50.0
# The worker also runs the load: its own allocations (Locust, the windows, the samples) grow it by
# up to ~60 KB a second of load whatever the model does (measured). Its growth is judged only past
# this floor too, or a slow model (few requests a second) would read as a worker that leaks.
WORKER_FLOOR_B_PER_S = 262_144
# Nor is a process leaking that grew less than this over the whole load read (the warm-up left
# out): a stub's first hundred requests touch ~400 KB of fresh pages, which per 1,000 requests of
# a short load reads as a leak.
MIN_GROWTH_B = 4 << 20
# The slowdown's floor: the load's p50 must rise by 5 ms or more over it (its fit's slope times its
# requests). A fixed count of 100 requests lasts 0.1-0.2 s: one stall of a few ms in its last
# chunks read as 134 % slower (refused-request, 2.51.0, official bindings, a matrix cell:
# docs/measurements/conformance.md); the slows-down control rises by 10 ms over the same count.
MIN_SLOWDOWN_US = 5_000
# The verdicts a run passes with unless told otherwise (--allow-outcomes), one of each kind; the
# lifecycle's outcomes that come from the stop itself; the load's verdict where nothing was measured.
GOOD = ("clean", "ok")
STOP_FAILED = ("exit_timeout", "stop_error")
NOT_MEASURED = "not_measured"
# Schema versions 1-5 stored one verdict: these two outcomes were the load's.
LEGACY_LOAD = {"infer_error": "errors", "wrong_output": "wrong_outputs"}


def classify(row: Mapping[str, Any]) -> Outcome:
    """The lifecycle's verdict of a cycle the worker finished (hung/crashed are the parent's):
    the stop and the finalize evidence alone, whatever the requests did (``classify_load``)."""
    if row.get("outcome") == "load_failed":
        return "load_failed"
    if row.get("in_flight_lost"):
        return "requests_lost"
    err = row.get("stop_error")
    if err:
        return "exit_timeout" if "exit timeout" in err.lower() else "stop_error"
    crashes = int(row.get("stub_crashes") or 0)
    if crashes > exit_aborts(row):
        return "stub_crashed"
    if row.get("finalize_errors"):
        return "finalize_error"
    if (row.get("finalize_expected") or 0) > (row.get("finalize_before_stop") or 0):
        return "finalize_missing"
    return "aborted_at_exit" if crashes else "clean"


def judge(row: MutableMapping[str, Any], max_memory_growth: float | None, max_slowdown: float | None) -> None:
    """A cycle's three verdicts, set on its row: the lifecycle's (``classify``), the load's
    (``classify_load``) and the growth's (``classify_growth``, with the run's thresholds)."""
    row["outcome"] = classify(row)
    row["load_outcome"] = classify_load(row)
    row["growth_outcome"] = classify_growth(row, max_memory_growth, max_slowdown)


def allowed(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """The verdicts that do not fail a run, of every kind, from ``text`` (a config's
    ``allow_outcomes``: the option, or the key in [thresholds]; comma-separated), else ``default``.
    The vocabularies are apart (``OUTCOMES``, the lifecycle's; ``LOAD_OUTCOMES``, the load's;
    ``GROWTH_OUTCOMES``, the growth's), so one list names them all; a kind the list does not name
    keeps its default (clean; ok; ok: the growth's ``leaking`` and ``slowing`` fail). The names of
    schema 5 and before still work: ``infer_error`` allows every failed load, ``wrong_output``
    wrong outputs."""
    if text is None:
        return default
    named = [x.strip() for x in text.split(",") if x.strip()]
    legacy = {"infer_error": ("errors", "timeouts", "nothing_completed"), "wrong_output": ("wrong_outputs",)}
    growth = GROWTH_OUTCOMES
    unknown = [x for x in named if x not in OUTCOMES and x not in LOAD_OUTCOMES and x not in growth and x not in legacy]
    if unknown:
        raise RigError(
            f"unknown outcome(s) {', '.join(unknown)}: choose from the lifecycle's "
            f"{', '.join(OUTCOMES)}, the load's {', '.join(LOAD_OUTCOMES)} and the growth's "
            f"{', '.join(growth)}"
        )
    allowed = [y for x in named for y in legacy.get(x, (x,))]
    if not any(x in OUTCOMES for x in allowed):
        allowed += [x for x in default if x in OUTCOMES]
    if not any(x in LOAD_OUTCOMES for x in allowed):
        allowed += [x for x in default if x in LOAD_OUTCOMES]
    return tuple(dict.fromkeys(allowed))


def explain(reasons: list[str]) -> list[str]:
    """What each lifecycle verdict a run failed on means, a line each (``aborted_at_exit: stop returned
    in time and ...``), from the ``outcomes not allowed: NAME=N, ...`` reasons of ``rig.analysis.verdict.soak``."""
    out = []
    for reason in reasons:
        head, _, listed = reason.partition(": ")
        if head != "outcomes not allowed":
            continue
        for item in listed.split(", "):
            name = item.partition("=")[0]
            if name in OUTCOMES and name not in GOOD:
                out.append(f"{name}: {OUTCOMES[name]}")
    return out


def exit_aborts(row: Mapping[str, Any]) -> int:
    """Of a cycle's stub crashes, those that were aborts at exit: stubs that died only after every
    finalize they owed (``stub_exit_aborts``, from the markers' times). A row stored before that
    count (schema 16) is read from its finalize figures: where every instance's finalize ran before
    stop returned, no stub died before its finalize, so each crash came after it (a stub that died
    under load or in the stop leaves an instance unfinalized: its own, or the one a restarted stub
    initialized again). A cycle whose stop failed keeps that verdict first either way."""
    crashes = int(row.get("stub_crashes") or 0)
    if not crashes:
        return 0
    told = row.get("stub_exit_aborts")
    if told is not None:
        return min(int(told), crashes)
    expected, before = int(row.get("finalize_expected") or 0), int(row.get("finalize_before_stop") or 0)
    return crashes if expected and before >= expected else 0


def reread(rec: dict) -> dict:
    """A stored cycle's lifecycle verdict under today's rule (2026-12-06): a ``stub_crashed`` whose
    every crash was an abort at exit (``exit_aborts``) reads as what the stop and the finalizes did
    (``aborted_at_exit`` after a clean stop, ``finalize_error`` where a finalize raised), and its
    ``stub_exit_aborts`` is set; a row without ``stub_crashes`` (a kept store's few columns) that
    says ``stub_crashed`` is read as one crash. Every other verdict stays as stored."""
    if rec.get("outcome") != "stub_crashed" or rec.get("stop_error"):
        return rec
    row = {k: v for k, v in rec.items() if k != "outcome"}
    if not row.get("stub_crashes"):
        row["stub_crashes"] = 1
    aborts = exit_aborts(row)
    if aborts >= int(row["stub_crashes"]):
        row["stub_exit_aborts"] = aborts
        rec["outcome"], rec["stub_exit_aborts"] = classify(row), aborts
    return rec


def growth_reasons(
    row: Mapping[str, Any],
    max_memory_growth_b: float | None = MAX_MEMORY_GROWTH_B,
    max_slowdown_pct: float | None = MAX_SLOWDOWN_PCT,
    grown: str | None = None,
) -> list[str]:
    """What passed a growth threshold, in a person's units, each headed by the verdict it gives
    (``leaking: ...``, ``slowing: ...``); empty where nothing did. A process kind leaks where its
    growth per 1,000 requests is above ``max_memory_growth_b`` over its whole interval (the lower
    bound) and it grew by more than ``MIN_GROWTH_B`` over the requests read (the worker: and by
    more than ``WORKER_FLOOR_B_PER_S`` a second); the load slows where its slowdown's lower bound
    is above ``max_slowdown_pct`` and its p50 rose by ``MIN_SLOWDOWN_US`` or more over the load
    (read off its fit). A threshold given as None is not judged. ``grown``: which part of a
    request's time grew over the load (``server_stats.growth_text``), said after a slowing."""
    out = []
    over = row.get("growth_requests") or 0
    for who, key in (("worker", "worker_growth"), (f"stub {row.get('stub_growth_model')}", "stub_growth")):
        v, lo, hi = row.get(f"{key}_per_1k_b"), row.get(f"{key}_low_b"), row.get(f"{key}_high_b")
        if max_memory_growth_b is None or lo is None or lo <= max_memory_growth_b or lo * over / 1000 <= MIN_GROWTH_B:
            continue
        v, hi = lo if v is None else v, lo if hi is None else hi
        if key == "worker_growth" and (row.get("worker_growth_per_s_b") or 0) <= WORKER_FLOOR_B_PER_S:
            continue  # under the rig's own floor
        out.append(f"leaking: {who} +{v / 1000:,.1f} KB per 1,000 requests ({lo / 1000:,.1f}-{hi / 1000:,.1f})")
    s, lo = row.get("slowdown_pct"), row.get("slowdown_low_pct")
    rise = None if row.get("p50_us_per_1k") is None else row["p50_us_per_1k"] * (row.get("requests") or 0) / 1000
    if (
        max_slowdown_pct is not None
        and lo is not None
        and lo > max_slowdown_pct
        and (rise is None or rise >= MIN_SLOWDOWN_US)
    ):
        s = lo if s is None else s
        out.append(
            f"slowing: {s:,.0f} % slower at the load's end than its start (at least {lo:,.0f} %, p50 "
            f"{row.get('p50_change_pct') or 0:+,.0f} %, throughput "
            f"{max(row.get('throughput_change_pct') or 0, -100):+,.0f} %)" + (f" ({grown})" if grown else "")
        )
    return out


def classify_growth(
    row: Mapping[str, Any],
    max_memory_growth_b: float | None = MAX_MEMORY_GROWTH_B,
    max_slowdown_pct: float | None = MAX_SLOWDOWN_PCT,
) -> GrowthOutcome:
    """The growth verdict (``growth_reasons``): ``leaking`` first (memory runs a node out; the
    detail names both), then ``slowing``; ``ok`` where something was measured and nothing passed
    a threshold, ``not_measured`` where neither memory nor a trend could be read."""
    if row.get("outcome") == "load_failed" or row.get("requests") is None:
        return "not_measured"
    reasons = growth_reasons(row, max_memory_growth_b, max_slowdown_pct)
    for verdict in ("leaking", "slowing"):
        if any(r.startswith(verdict + ":") for r in reasons):
            return verdict
    # ok says that no process grew and the load did not slow: memory must have been read for it
    measured = any(row.get(k) is not None for k in ("worker_growth_low_b", "stub_growth_low_b"))
    return "ok" if measured else "not_measured"


def classify_load(row: Mapping[str, Any]) -> LoadOutcome:
    """The load's verdict: what the cycle's requests (the reference request, the workload or the
    fixed count, the retention request) came to. Unanswered requests first (they also hold the
    model inside the server), then failed ones, then a load that measured nothing, then wrong
    answers."""
    if row.get("outcome") == "load_failed" or row.get("requests") is None:
        return "not_measured"
    if row.get("timeouts"):
        return "timeouts"
    if row.get("errors"):
        return "errors"
    if row.get("outputs_ok") is False and not row.get("bad_outputs"):
        return "wrong_outputs"  # the reference answer itself was wrong
    if row.get("requests") == 0:
        return "nothing_completed"
    if row.get("bad_outputs") or row.get("outputs_ok") is False:
        return "wrong_outputs"
    return "ok"


def upgrade_legacy(rec: dict) -> dict:
    """A cycle stored before schema 6 (one verdict) as two: ``infer_error`` and ``wrong_output``
    were the load's verdict; the lifecycle's is then read from the stop and finalize columns the
    row kept."""
    if rec.get("load_outcome") is not None or rec.get("outcome") is None:
        return rec
    old = rec["outcome"]
    if old in LEGACY_LOAD:
        rec["load_outcome"] = LEGACY_LOAD[old]
        rec["outcome"] = classify({k: v for k, v in rec.items() if k != "outcome"})
    elif old in ("load_failed",) or rec.get("requests") is None:
        rec["load_outcome"] = "not_measured"
    else:
        rec["load_outcome"] = "errors" if rec.get("errors") else "ok"
    return rec


# The Python backend's words for a request whose execute raised (its own error responses read
# otherwise: the model's message alone).
RAISED_IN_EXECUTE = "Failed to process the request(s)"
RAISED_AND_HELD = (
    "the model raised in execute and the stop then waited out exit_timeout: Triton's Python backend "
    "can keep a model loaded after a raising execute (the server#7481 class). It is a race with the "
    "next request: on core 2.51.0, with no rig code (benchmarks/plain_api_faults.py), one request at a "
    "time showed it in 2 of 3 runs through the C API when each was sent as soon as the last was "
    "released, in 0 of 3 with a 50 us pause between them, and in 3 of 3 through the official API's "
    "asyncio loop at one and at two in flight; so whether one concurrency shows it can differ between "
    "engines and between runs, and the stop's verdict is Triton's either way"
)


UNANSWERED = (
    "requests went unanswered (no final response within the request timeout): on core 2.51.0, with "
    "no rig code, such a request let its model unload through the C API (the Python backend released "
    "it; the stop clean) but held it through the official tritonserver API (its request waits for a "
    "final response; the stop waited out exit_timeout even after the caller let go of it), so the two "
    "engines can differ here; the rig keeps no reference to such a request, and the stop's verdict is "
    "Triton's either way"
)


NEVER_CALLED = (
    "finalize was never called in {n} instance(s), yet the stop returned in time: Triton's Python backend "
    "skips finalize and kills (SIGKILL) a stub that is dead or has not set its health flag within 1 s at the "
    "unload. With no rig code (benchmarks/stub_paused_at_stop.py), two instances' stubs paused 1.5 s across "
    "stop() lost 1 of 2 finalizes, paused 3 s both, stop() clean in 3.0 s, on 2.36.0, 2.51.0, 2.55.0, 2.67.0 "
    "and 2.71.0 alike: a node so busy that a stub waits a second for a CPU gives this verdict"
)


def never_called(row: Mapping[str, Any], uncalled: int) -> str | None:
    """The note for a ``finalize_missing`` cycle in which some finalize was never called at all
    (``uncalled``: ``rig.contract.evidence.never_finalized``)."""
    return NEVER_CALLED.format(n=uncalled) if row.get("outcome") == "finalize_missing" and uncalled else None


def raised_and_held(row: Mapping[str, Any]) -> str | None:
    """The note for a cycle whose model raised in execute and whose stop then held (see above)."""
    if row.get("outcome") not in ("exit_timeout", "finalize_missing"):
        return None
    messages = json.loads(row["error_messages"]) if row.get("error_messages") else {}
    return RAISED_AND_HELD if any(RAISED_IN_EXECUTE in m for m in messages) else None


def _field(row, key: str):
    return row.get(key) if isinstance(row, dict) else getattr(row, key, None)


def finalize_success(rows) -> float | None:
    """The one finalize-success figure of a run: finalizes that ran before ``stop()`` returned,
    over the finalizes expected (rows as ``CycleRow``s or dicts); None where none was expected."""
    expected = sum(int(_field(r, "finalize_expected") or 0) for r in rows)
    if not expected:
        return None
    return sum(int(_field(r, "finalize_before_stop") or 0) for r in rows) / expected


def tally(rows, key: str) -> dict[str, int]:
    """How many rows give each verdict of ``key`` (outcome, load_outcome, growth_outcome), a row
    without one left out."""
    out: dict[str, int] = {}
    for r in rows:
        value = _field(r, key)
        if value:
            out[value] = out.get(value, 0) + 1
    return out
