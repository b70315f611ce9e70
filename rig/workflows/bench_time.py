"""``rig bench``'s "where the time goes" table: at each point, each tool's medians over repeats of
Triton's request time and its parts (``rig.contract.server_stats.over_windows``), the client's
mean, and the tool's own cost, client - server; where the rig's windows say Triton's statistics
cannot cover a request (a decoupled model, or one that answers after ``execute`` returns), the own
column says ``n/s`` (not split) and a note gives the difference, which is no tool's own."""

from __future__ import annotations

from rig.common.text import num

# Where the time goes, per request (server_stats.over_windows): the client's mean, the server's
# request time and its parts, the tool's own cost (client - server), and the mean batch formed
TIME_KEYS = (
    "client_us",
    "request_us",
    "queue_us",
    "compute_input_us",
    "compute_infer_us",
    "compute_output_us",
    "overhead_us",
    "own_us",
    "beyond_us",  # client - server where Triton's statistics cannot cover the request (not split)
    "mean_batch_size",
)


def time_table(rows: list[dict], with_pa: bool) -> str:
    """Where the time goes at each point, each tool's medians over repeats (empty where no window
    read the server's statistics: ``--server-stats off``)."""
    tools = ("rig", "perf_analyzer") if with_pa else ("rig",)
    if not any((r.get("server") or {}).get(t, {}).get("request_us") is not None for r in rows for t in tools):
        return ""
    lines = [
        (
            "where the time goes, us per request (medians over repeats): client = the tool's mean latency; "
            "server = Triton's request time = queue + input + infer + output + overhead; own = client - server"
        ),
        (
            f"{'inst':>4} {'point':>7} {'tool':<13} {'client':>7} {'server':>7} {'queue':>7} {'input':>6} "
            f"{'infer':>7} {'output':>6} {'overh.':>6} {'own':>6} {'batch':>5}"
        ),
    ]
    for r in rows:
        for t in tools:
            f = (r.get("server") or {}).get(t) or {}
            if f.get("request_us") is None:
                continue
            lines.append(_time_line(r, t, f, "{:.0f}", _unsplit(r)))
        both = [(r.get("server") or {}).get(t) or {} for t in tools]
        if with_pa and all(f.get("request_us") is not None for f in both):
            ratios = {k: _ratio(both[0].get(k), both[1].get(k)) for k in TIME_KEYS}
            lines.append(_time_line(r, "rig / PA", ratios, "{:.2f}", _unsplit(r)))
    unsplit = [r for r in rows if _unsplit(r)]
    if unsplit:
        beyond = ", ".join(
            f"{_f(r['server']['rig']['beyond_us'])} us at {r['point']:g}"
            + ("" if r["instances"] is None else f" (inst {r['instances']})")
            for r in unsplit
        )
        lines.append(
            f"n/s: not split. A model here is decoupled or answers after execute returns, and Triton's statistics "
            f"of a request end when execute returns: client - server ({beyond}, the rig's) is not the tool's own; "
            "the streaming lane's own cost, measured apart: docs/measurements/speed.md"
        )
    if with_pa:
        lines.append(
            "rig / PA: the ratio of each part. Triton runs each tool's response callback on its own thread "
            "and counts it in 'output' (and, at one instance, in the next request's queue): compare "
            "'input' and 'infer' for the server alone"
        )
    return "\n".join(lines)


def _ratio(a, b):
    return a / b if a is not None and b else None


def _unsplit(r: dict) -> bool:
    """Whether the rig's windows at this point say Triton's statistics cannot cover a request
    (``server_stats.uncovered``): then no tool's client - server is its own."""
    return ((r.get("server") or {}).get("rig") or {}).get("beyond_us") is not None


def _time_line(r: dict, tool: str, f: dict, fmt: str, unsplit: bool = False) -> str:
    own = "n/s" if unsplit else _f(f.get("own_us"), fmt)
    return (
        f"{'-' if r['instances'] is None else r['instances']:>4} {r['point']:>7g} {tool:<13} "
        f"{_f(f['client_us'], fmt):>7} {_f(f['request_us'], fmt):>7} {_f(f['queue_us'], fmt):>7} "
        f"{_f(f['compute_input_us'], fmt):>6} {_f(f['compute_infer_us'], fmt):>7} "
        f"{_f(f['compute_output_us'], fmt):>6} {_f(f['overhead_us'], fmt):>6} {own:>6} "
        f"{_f(f['mean_batch_size'], '{:.2f}'):>5}"
    )


def _f(v, fmt="{:.0f}") -> str:
    return num(v, fmt)
