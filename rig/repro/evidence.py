"""What the run left: the models' finalize evidence (one JSON line per ``initialize`` and
``finalize``), the stubs' crash markers (``crash.c``), the verdict in the rig's words
(``rig.contract.verdicts.classify``), and the server log's lines that matter."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------- finalize evidence


def read_evidence(path: Path) -> list[dict[str, Any]]:
    """The lines the models appended (``init``, ``finalize_start``, ``finalize_end``), one JSON object each."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line cut short by a stub that died mid-write
    return out


def finalize_summary(marks: list[dict[str, Any]], t_stop_returned: float | None) -> dict[str, Any]:
    """Each instance that initialized: when its finalize ended, relative to stop()'s return
    (``before``, ``after``, ``never``), and the counts (as the rig's finalize columns)."""
    inits = {(m.get("pid"), m.get("instance")): m for m in marks if m.get("phase") == "init"}
    ends = {(m.get("pid"), m.get("instance")): m for m in marks if m.get("phase") == "finalize_end"}
    starts = {(m.get("pid"), m.get("instance")) for m in marks if m.get("phase") == "finalize_start"}
    instances = []
    for key in sorted(inits, key=lambda k: (str(k[1]), str(k[0]))):
        end = ends.get(key)
        if end is None:
            when, delta = "never", None
        elif t_stop_returned is not None and end["t_mono"] <= t_stop_returned:
            when, delta = "before", end["t_mono"] - t_stop_returned
        else:
            when, delta = "after", None if t_stop_returned is None else end["t_mono"] - t_stop_returned
        instances.append(
            {
                "instance": key[1],
                "pid": key[0],
                "when": when,
                "seconds": delta,
                "called": key in starts,
                "error": end.get("error") if end else None,
            }
        )
    return {
        "expected": len(instances),
        "before": sum(i["when"] == "before" for i in instances),
        "after": sum(i["when"] == "after" for i in instances),
        "never": sum(i["when"] == "never" for i in instances),
        "errors": sum(1 for i in instances if i["error"]),
        "instances": instances,
    }


def read_crashes(folder: Path) -> list[dict[str, Any]]:
    """The stubs' crash markers (``<pid>-crash-<signal>.json``, written by ``crash.c``'s handler)."""
    out = []
    for path in sorted(folder.glob("*-crash-*.json")) if folder.is_dir() else ():
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    return out


def exit_aborts(crashes: list[dict[str, Any]], marks: list[dict[str, Any]]) -> int:
    """Of the stubs' crashes, those that were aborts at exit: a stub that died only after every
    finalize it owed (each instance it initialized ended its finalize before the crash)."""
    count = 0
    for crash in crashes:
        pid = crash.get("pid")
        inits = {m.get("instance") for m in marks if m.get("pid") == pid and m.get("phase") == "init"}
        ended = {
            m.get("instance")
            for m in marks
            if m.get("pid") == pid and m.get("phase") == "finalize_end" and m["t_mono"] <= crash.get("t_mono", 0)
        }
        count += bool(inits) and inits <= ended
    return count


def lifecycle_verdict(
    load_failed: bool,
    stop_error: str | None,
    finalize: dict[str, Any],
    lost: int = 0,
    crashes: int = 0,
    aborts_at_exit: int = 0,
) -> str:
    """The rig's lifecycle verdict (rig.contract.verdicts.classify) from what this script sees: the
    start, requests in flight at stop() that got no word (``lost``), the stop's error, the stubs
    that died of a signal (``crashes``, of which ``aborts_at_exit`` after their finalize), and the
    finalizes that ended before stop() returned."""
    if load_failed:
        return "load_failed"
    if lost:
        return "requests_lost"
    if stop_error:
        return "exit_timeout" if "exit timeout" in stop_error.lower() else "stop_error"
    if crashes > aborts_at_exit:
        return "stub_crashed"
    if finalize["errors"]:
        return "finalize_error"
    if finalize["expected"] > finalize["before"]:
        return "finalize_missing"
    return "aborted_at_exit" if crashes else "clean"


def admits(expected: str, got: str) -> bool:
    """Whether ``got`` is the expected verdict or one of its alternatives (``exit_timeout|clean``)."""
    return got in str(expected).split("|")


# ---------------------------------------------------------------- the server's log

_LOG_KEEP = (
    "loading:",
    "successfully loaded",
    "failed to load",
    "Waiting for in-flight",
    "in-flight inferences",
    "All models are stopped",
    "live models",
    "unloading",
    "unloaded",
    "Exit timeout",
    "exit timeout",
    "Finalize",
    "finalize",
    "Stub process",
    "unhealthy",
    "Failed",
    "failed",
)
_LOG_NOISE = ("CudaDriverHelper", "CUDA", "pinned memory", "GPU metrics", "Unable to find")
_LOG_LINE = re.compile(r"^([IWE])(\d{4} )?(\d\d:\d\d:\d\d\.\d+) +\d+ ([\w.]+:\d+)\] (.*)$")


def log_lines(text: str, limit: int = 40) -> list[str]:
    """The lines of Triton's log that tell the story of the load and the stop (not its tables, not
    a CPU-only machine's CUDA words), shortened to level, time, source and the message's first line;
    a message that comes again with other numbers (every raising execute's) once, with its count."""
    out: list[str] = []
    seen: dict[str, int] = {}  # the message with its numbers taken out -> its line in out
    again: dict[int, int] = {}
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if not m:
            continue
        level, _, clock, where, message = m.groups()
        message = message.split("\\n")[0].strip()  # the log escapes a message's newlines
        if any(n in message for n in _LOG_NOISE) or not (level == "E" or any(k in message for k in _LOG_KEEP)):
            continue
        key = level + re.sub(r"\d+", "N", message)
        if key in seen and not message.startswith('"Timeout '):
            again[seen[key]] = again.get(seen[key], 0) + 1
            continue
        seen[key] = len(out)
        out.append(f"{level} {clock} {where}] {message[:300]}")
    for i, count in again.items():
        out[i] += f" (and {count} more like it)"
    return out if len(out) <= limit else [*out[:10], f"... ({len(out) - limit} lines left out)", *out[-(limit - 10) :]]
