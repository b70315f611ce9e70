"""Triton's own statistics of a model, as the rig reads them: what the server saw of each request.

The core keeps, per model and version, cumulative counters since the model loaded
(``TRITONSERVER_ServerModelStatistics``, the official API's ``Model.statistics()``: one JSON
message, ``{"model_stats": [{"name", "version", "inference_count", "execution_count",
"inference_stats": {"success": {"count", "ns"}, "fail", "queue", "compute_input", "compute_infer",
"compute_output", ...}, "batch_stats": [{"batch_size", "compute_infer": {"count", "ns"}, ...}]}]}``).
The worker reads them as each window closes and stores the difference from the last read
(``totals``, ``difference``, ``window_columns``); the bench and soak tables and the report read
the window columns back as "where the time goes" (``over_windows``, ``parts``). Pure functions:
both sides import them.

A request's time in the server (``success.ns``, the request's whole life in the core) is its queue,
compute input, compute infer and compute output, and the rest, which perf_analyzer calls the
overhead. Each part is divided by the successful requests, as perf_analyzer does (a cache hit,
which the rig never configures, would count in none of the compute parts). ``inference_count``
counts the batch items run, ``execution_count`` the model executions: their ratio is the mean
batch size the scheduler formed, and ``batch_stats`` the executions of each size.

The client's time beyond Triton's is the rig's own cost only where Triton's statistics cover the
request's life. The Python backend reports a request's statistics when ``execute`` returns: a
decoupled model, or one whose ``execute`` returns None and answers through the response sender
(from a thread of its own, maybe later), can answer after that. Such windows say why in
``server_uncovered`` (``uncovered``), and the difference is then not split (``beyond_us``, never
``own_us``).
"""

from __future__ import annotations

import json

# The figures of one read (cumulative) or of one window (a difference), and their window columns
_STATS = {
    "success": ("success", "count"),
    "failures": ("fail", "count"),
    "request_ns": ("success", "ns"),
    "queue_ns": ("queue", "ns"),
    "compute_input_ns": ("compute_input", "ns"),
    "compute_infer_ns": ("compute_infer", "ns"),
    "compute_output_ns": ("compute_output", "ns"),
}
FIGURES = (
    "success",
    "failures",
    "inferences",
    "executions",
    "request_ns",
    "queue_ns",
    "compute_input_ns",
    "compute_infer_ns",
    "compute_output_ns",
)
COLUMNS = {k: f"server_{k}" for k in FIGURES}  # figure -> its WindowRow column
PARTS = ("queue", "compute_input", "compute_infer", "compute_output")  # of the request's time in the server
ALL_COLUMNS = (*COLUMNS.values(), "batch_sizes", "mean_batch_size")


def totals(message: dict) -> dict:
    """The cumulative figures of one model's statistics message (summed over its versions):
    ``FIGURES`` as integers and ``batches`` ({size: executions}). ``ValueError`` where it is no
    statistics message."""
    if not isinstance(message, dict) or not isinstance(message.get("model_stats"), list):
        raise ValueError(f"not a model statistics message: {str(message)[:120]}")
    out = dict.fromkeys(FIGURES, 0)
    batches: dict[int, int] = {}
    for m in message["model_stats"]:
        stats = m.get("inference_stats") or {}
        for key, (part, field) in _STATS.items():
            out[key] += int((stats.get(part) or {}).get(field) or 0)
        out["inferences"] += int(m.get("inference_count") or 0)
        out["executions"] += int(m.get("execution_count") or 0)
        for b in m.get("batch_stats") or []:
            # an execution of this size is counted once in each compute part: infer's count is its
            n = int((b.get("compute_infer") or {}).get("count") or 0)
            if n:
                size = int(b["batch_size"])
                batches[size] = batches.get(size, 0) + n
    out["batches"] = batches
    return out


def difference(now: dict, before: dict | None) -> dict:
    """What happened between two reads of ``totals``; where a counter went back (the model was
    loaded again, its counters restarted) the later read is all of it."""
    if before is None or any(now[k] < before[k] for k in FIGURES):
        return {**now, "batches": dict(now["batches"])}
    out = {k: now[k] - before[k] for k in FIGURES}
    out["batches"] = {
        s: n - before["batches"].get(s, 0) for s, n in now["batches"].items() if n - before["batches"].get(s, 0) > 0
    }
    return out


def add(a: dict | None, b: dict) -> dict:
    """Two models' (or two windows') figures together."""
    if a is None:
        return {**b, "batches": dict(b["batches"])}
    out = {k: a[k] + b[k] for k in FIGURES}
    out["batches"] = dict(a["batches"])
    for s, n in b["batches"].items():
        out["batches"][s] = out["batches"].get(s, 0) + n
    return out


def window_columns(delta: dict | None) -> dict:
    """A window's columns from its figures (the run's models' together); all null where there
    are none (statistics off, or a read failed)."""
    if delta is None:
        return dict.fromkeys(ALL_COLUMNS)
    out = {COLUMNS[k]: delta[k] for k in FIGURES}
    out["batch_sizes"] = batch_json(delta["batches"])
    out["mean_batch_size"] = mean_of(delta)
    return out


def mean_of(figures: dict) -> float | None:
    """The mean batch size of some figures: from the sizes Triton recorded where it did
    (``batch_stats`` counts failed executions at their size too), else inferences over executions
    (``inference_count`` counts only the requests that succeeded: a raising ``execute`` would
    make that ratio too small)."""
    if figures.get("batches"):
        return mean_batch(figures["batches"])
    ex = figures.get("executions") or 0
    return figures.get("inferences", 0) / ex if ex else None


def cycle_columns(figures: dict | None) -> dict:
    """A cycle's columns (schema 15) from its models' figures since they loaded (``totals``,
    summed with ``add``); all null where none were read."""
    if figures is None:
        return dict.fromkeys(("batch_sizes", "mean_batch_size", "server_executions", "server_failures"))
    return {
        "batch_sizes": batch_json(figures["batches"]),
        "mean_batch_size": mean_of(figures),
        "server_executions": figures["executions"],
        "server_failures": figures["failures"],
    }


def batch_json(batches: dict) -> str:
    """``{"size": executions}`` in size order: the ``batch_sizes`` column."""
    return json.dumps({str(s): int(batches[s]) for s in sorted(batches, key=int)})


def batches_of(text) -> dict[int, int]:
    """A ``batch_sizes`` column's value back as {size: executions} (nothing where null or unreadable)."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        return {int(s): int(n) for s, n in json.loads(text).items()}
    except (ValueError, AttributeError, TypeError):
        return {}


def summed_batches(values) -> dict[int, int] | None:
    """The ``batch_sizes`` values of some windows summed ({size: executions}); None where none
    of them holds any (statistics off, an older store, or no window at all)."""
    out: dict[int, int] | None = None
    for text in values:
        if not isinstance(text, str) or not text:
            continue
        out = {} if out is None else out
        for s, n in batches_of(text).items():
            out[s] = out.get(s, 0) + n
    return out


def mean_batch(batches: dict) -> float | None:
    """The mean batch size of ``{size: executions}`` (None where no execution)."""
    n = sum(batches.values())
    return sum(s * c for s, c in batches.items()) / n if n else None


def batch_compact(batches: dict | None, most: int = 8) -> str:
    """Batch sizes in a table's cell: ``1x45 8x1221 (mean 7.6)`` (size x executions, the most
    frequent ``most`` in size order); ``-`` where none were recorded."""
    if batches is None:
        return "-"
    if not batches or not sum(batches.values()):
        return "none formed"
    top = sorted(sorted(batches, key=lambda s: -batches[s])[:most])
    more = f" +{len(batches) - most} sizes" if len(batches) > most else ""
    return " ".join(f"{s}x{batches[s]}" for s in top) + more + f" (mean {mean_batch(batches):.1f})"


def _number(v) -> float | None:
    """A stored figure as a float; None for a null (None, NaN, pandas' NA)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def over_windows(windows: list[dict]) -> dict:
    """Where the time goes over ``windows`` (rows as dicts): the client's mean latency
    (``client_us``, weighted by requests), the server's per-request figures from the summed
    columns (``parts``), the client's own cost per request (``own_us``: its mean less the server's
    request time; where the statistics cannot cover the requests, ``uncovered`` says why, and the
    difference is ``beyond_us``, ``own_us`` None), the batch sizes formed (``batch_sizes``, {size:
    executions}) and ``windows`` read. Windows without the server's columns are left out of both
    sides (so the two means are over the same windows); empty where none has them."""
    sums = dict.fromkeys(FIGURES, 0.0)
    batches: dict[int, int] = {}
    client_ns, client_n, n = 0.0, 0, 0
    for w in windows:
        got = {k: _number(w.get(COLUMNS[k])) for k in FIGURES}
        if got["success"] is None:
            continue
        n += 1
        for k, v in got.items():
            sums[k] += v or 0.0
        for s, c in batches_of(w.get("batch_sizes")).items():
            batches[s] = batches.get(s, 0) + c
        mean, req = _number(w.get("mean_us")), _number(w.get("requests"))
        if mean is not None and req:
            client_ns += mean * 1000 * req
            client_n += int(req)
    if not n:
        return {}
    out = parts(sums)
    client = client_ns / client_n / 1000 if client_n else None
    if batches:
        out["mean_batch_size"] = mean_batch(batches)
    beyond = client - out["request_us"] if client is not None and out["request_us"] is not None else None
    why = uncovered(windows)
    out.update(
        windows=n,
        client_us=client,
        batch_sizes=batches,
        own_us=None if why else beyond,
        beyond_us=beyond if why else None,
        uncovered=why,
    )
    return out


# The window column that says why Triton's statistics cannot cover a request's life (schema 17)
UNCOVERED = "server_uncovered"
SPLIT_COLUMNS = (UNCOVERED, "responses")  # what ``uncovered`` reads of a window, beside the server's columns
NOT_SPLIT = "Triton's statistics of a request end when execute returns, and its answer may leave later"


def uncovered_reason(decoupled, after_return) -> str | None:
    """``server_uncovered`` of a window: the models that are decoupled, then those whose
    ``execute`` returned None (they answer through the response sender), ``chat is decoupled;
    scorer answers after execute returns``; None where every model answers inside ``execute``."""
    why = [f"{m} is decoupled" for m in sorted(set(decoupled))]
    why += [f"{m} answers after execute returns" for m in sorted(set(after_return) - set(decoupled))]
    return "; ".join(why) or None


def uncovered(windows: list[dict]) -> str | None:
    """Why Triton's statistics of ``windows`` cannot cover their requests' life (their
    ``server_uncovered`` reasons, together), or None where they can. A window from before schema 17
    that streamed (``responses`` set: a decoupled model) says so too."""
    why: dict[str, None] = {}
    for w in windows:
        if _number(w.get(COLUMNS["success"])) is None:
            continue
        text = w.get(UNCOVERED)
        if isinstance(text, str) and text:
            why.update(dict.fromkeys(text.split("; ")))
        elif _number(w.get("responses")) is not None:
            why["the model streams (decoupled)"] = None
    return "; ".join(why) or None


def not_split(beyond_us: float | None, why: str, fmt=lambda v: f"{v:,.0f}") -> str:
    """The line said instead of the rig's own cost where the statistics cannot cover a request."""
    value = "-" if beyond_us is None else fmt(beyond_us)
    return f"client - Triton = {value} us: not split ({why}: {NOT_SPLIT})"


def parts(sums: dict) -> dict:
    """Per successful request, in microseconds, from summed figures: ``request_us`` (the request's
    time in the server), ``queue_us``, ``compute_input_us``, ``compute_infer_us``,
    ``compute_output_us``, ``overhead_us`` (the request's time less the four parts), and
    ``mean_batch_size``; None where nothing succeeded. ``success``, ``inferences`` and
    ``executions`` as given."""
    n = sums.get("success") or 0
    out = {"success": sums.get("success"), "inferences": sums.get("inferences"), "executions": sums.get("executions")}
    for p in ("request", *PARTS):
        out[f"{p}_us"] = sums[f"{p}_ns"] / n / 1000 if n else None
    out["overhead_us"] = (out["request_us"] - sum(out[f"{p}_us"] for p in PARTS)) if n else None
    ex = sums.get("executions") or 0
    out["mean_batch_size"] = sums["inferences"] / ex if ex else None
    return out


def from_averages(
    success: int,
    inferences: int | None,
    executions: int | None,
    request_us: float,
    queue_us: float,
    compute_input_us: float,
    compute_infer_us: float,
    compute_output_us: float,
) -> dict:
    """Window columns from per-request averages over ``success`` requests (perf_analyzer's summary
    gives no sums): each sum is its average times the count, so that ``over_windows`` reads the
    averages back; failures and batch sizes null (its summary has neither)."""

    def ns(us):
        return int(round(us * 1000 * success))

    out = window_columns(
        {
            "success": success,
            "failures": 0,
            "inferences": inferences or success,
            "executions": executions or success,
            "request_ns": ns(request_us),
            "queue_ns": ns(queue_us),
            "compute_input_ns": ns(compute_input_us),
            "compute_infer_ns": ns(compute_infer_us),
            "compute_output_ns": ns(compute_output_us),
            "batches": {},
        }
    )
    out.update(server_failures=None, batch_sizes=None)  # not in its summary
    return out


def batch_text(batches: dict, most: int = 8) -> str:
    """Batch sizes for people: ``1 x 1,204, 8 x 310`` (size x executions), the most frequent
    ``most`` in size order."""
    if not batches:
        return "-"
    top = sorted(sorted(batches, key=lambda s: -batches[s])[:most])
    text = ", ".join(f"{s} x {batches[s]:,}" for s in top)
    return text + (f" (+{len(batches) - most} more sizes)" if len(batches) > most else "")


# A request's parts whose growth names where a slowing load's time went (``part_growth``): the
# server's four, then the rig's own (the client's mean less the server's request time), or, where the
# statistics cannot cover the request (``uncovered``), the same difference not split; each with its
# name first in a note, then after it.
GROWTH_NAMES = {
    "queue": ("Triton's queue", "queue"),
    "compute_input": ("Triton's compute input", "input"),
    "compute_infer": ("Triton's infer", "infer"),
    "compute_output": ("Triton's output", "output"),
    "own": ("the rig's own", "the rig's own"),
    "beyond": ("the client's time beyond Triton's (not split: the answer may leave after execute)", "beyond"),
}


def part_growth(windows: list[dict], share: float = 1 / 3) -> dict[str, float]:
    """How much each part of a request's time (``GROWTH_NAMES``, microseconds a request) grew
    from the load's first windows to its last: the first and the last ``share`` of the windows
    that answered requests and read the server's statistics (in start order; one each at least,
    and two windows in all). Empty where fewer hold the statistics (``--server-stats off``, an
    old core, a fixed count of requests); a part either side cannot give is left out."""
    rows = [
        w for w in windows if (_number(w.get("requests")) or 0) > 0 and (_number(w.get(COLUMNS["success"])) or 0) > 0
    ]
    if len(rows) < 2:
        return {}
    rows.sort(key=lambda w: _number(w.get("start_s")) or 0.0)
    k = max(1, int(len(rows) * share))
    first, last = over_windows(rows[:k]), over_windows(rows[-k:])
    out = {}
    for p in (*PARTS, "own", "beyond"):
        a, b = first.get(f"{p}_us"), last.get(f"{p}_us")
        if a is not None and b is not None:
            out[p] = b - a
    return out


def _us(v: float) -> str:
    return f"{v:+,.1f}" if abs(v) < 10 else f"{v:+,.0f}"


def growth_text(growth: dict[str, float], most: int = 3) -> str | None:
    """``part_growth`` for a slowing verdict's note: the parts that grew, most first (``most`` at
    most), ``Triton's queue +180 us a request, infer +3 us``; where none grew by 0.1 us, that none
    did; None where there is nothing to read (no statistics)."""
    if not growth:
        return None
    grew = sorted((p for p, v in growth.items() if v >= 0.05), key=lambda p: -growth[p])[:most]
    if not grew:
        return "no part of a request's time grew, Triton's or " + (
            "the client's beyond it" if "beyond" in growth else "the rig's own"
        )
    head, *rest = grew
    return ", ".join(
        [
            f"{GROWTH_NAMES[head][0]} {_us(growth[head])} us a request",
            *(f"{GROWTH_NAMES[p][1]} {_us(growth[p])} us" for p in rest),
        ]
    )
