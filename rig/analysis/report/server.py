"""`rig report`'s "Where the time goes" section: per point, the client's mean latency beside
Triton's own statistics of the same windows (the request's time in the server and its parts:
queue, compute input, compute infer, compute output, overhead), the client's own cost per request
(where Triton's statistics cannot cover a request, a decoupled model's or one that answers after
``execute`` returns, that difference is not split: ``server_stats.uncovered``), and the batches the
server formed. Sums over whole columns, per point (``rig.contract.server_stats``
turns them into per-request figures)."""

from __future__ import annotations

import pandas as pd

from rig.analysis.report.html import Section, Table
from rig.analysis.report.parts import load_points
from rig.contract import server_stats

# what the section reads of the windows, besides the points'
COLUMNS = ["mean_us", *server_stats.ALL_COLUMNS, *server_stats.SPLIT_COLUMNS]
MAX_BATCH_WINDOWS = 5000  # a point's latest windows whose batch sizes are merged, at most


def server_section(windows: pd.DataFrame, keys: list[str]) -> Section | None:
    """One row per point (group keys, tool, mode, load point) of the windows that read the server's
    statistics; None where none did (``--server-stats off``, or a store from before schema 14)."""
    if "server_success" not in windows or not windows["server_success"].notna().any():
        return None
    w = windows[windows["server_success"].notna()]
    w = w.assign(
        point=load_points(w),
        _client_ns=pd.to_numeric(w["mean_us"], errors="coerce") * 1000 * pd.to_numeric(w["requests"], errors="coerce"),
        _client_n=pd.to_numeric(w["requests"], errors="coerce").where(w["mean_us"].notna()),
        _why=_why(w),
    )
    pkeys = [*keys, "tool", "mode", "point"]
    named = {k: (c, "sum") for k, c in server_stats.COLUMNS.items()}
    g = w.groupby(pkeys, sort=True, dropna=False)
    sums = g.agg(
        windows=("server_success", "size"), client_ns=("_client_ns", "sum"), client_n=("_client_n", "sum"), **named
    )
    batches = g["batch_sizes"].agg(lambda s: _merged(s.tail(MAX_BATCH_WINDOWS))).to_list()  # in sums' order
    whys = g["_why"].agg(lambda s: "; ".join(dict.fromkeys(x for t in s.dropna() for x in t.split("; "))))
    rows = []
    for (k, r), batch, why in zip(sums.iterrows(), batches, whys.to_list()):
        why = why if isinstance(why, str) and why else None  # pandas makes an empty group's NaN
        t = server_stats.parts({f: float(r[f]) for f in server_stats.FIGURES})
        client = r.client_ns / r.client_n / 1000 if r.client_n else None
        row = dict(zip(pkeys, k if isinstance(k, tuple) else (k,)))
        beyond = client - t["request_us"] if client is not None and t["request_us"] is not None else None
        row.update(
            {
                "windows": int(r.windows),
                "client µs": client,
                "Triton µs": t["request_us"],
                "queue µs": t["queue_us"],
                "compute input µs": t["compute_input_us"],
                "compute infer µs": t["compute_infer_us"],
                "compute output µs": t["compute_output_us"],
                "overhead µs": t["overhead_us"],
                "own µs": None if why else beyond,
                "mean batch": t["mean_batch_size"],
                "batch sizes": server_stats.batch_text(batch, most=4),
            }
        )
        if why:  # the statistics end when execute returns: the difference is no one's own
            row["not split"] = server_stats.not_split(beyond, why)
        rows.append(row)
    frame = pd.DataFrame(rows)
    if "not split" in frame:
        frame["not split"] = frame["not split"].astype(object).where(frame["not split"].notna(), "-")
    return Section("Where the time goes").add(
        Table(
            frame,
            (
                "Per request, over the windows that read Triton's own statistics: the client's mean latency, the "
                "request's time in the server (Triton µs = queue + compute input + compute infer + compute output + "
                "overhead, as perf_analyzer splits it), the client's own cost (own µs = client - Triton; where a "
                "model is decoupled or answers after execute returns, Triton's statistics end before its answer "
                "may leave: own µs is empty and 'not split' says so), and the batches the server formed "
                "(size x executions; mean batch = requests per execution). perf_analyzer's "
                "rows are its own summary's averages"
            ),
        )
    )


def _why(w: pd.DataFrame) -> pd.Series:
    """Each window's ``server_uncovered`` (schema 17); before it, a window that streamed reads as
    decoupled (as ``server_stats.uncovered``)."""
    why = w[server_stats.UNCOVERED] if server_stats.UNCOVERED in w else pd.Series(None, index=w.index, dtype=object)
    why = why.astype(object).where(why.notna(), None)
    if "responses" in w:
        streamed = w["responses"].notna() & why.isna()
        why = why.where(~streamed, "the model streams (decoupled)")
    return why


def _merged(texts: pd.Series) -> dict:
    out: dict[int, int] = {}
    for text in texts.dropna():
        for size, n in server_stats.batches_of(text).items():
            out[size] = out.get(size, 0) + n
    return out
