"""perf_analyzer's output read (``rig.parent.perf_analyzer`` runs it): its ``-f`` CSV, its
``--profile-export-file`` windows, the ``Server:`` block of its stdout, and the one line that
says why a run failed."""

from __future__ import annotations

import csv
import itertools
import re

# ---------------------------------------------------------------- the CSV

# perf_analyzer's CSV header (lower case) -> our key; its times are microseconds ("_us").
_RENAMED = {
    "request rate": "rate",
    "inferences/second": "throughput",
    "network+server send/recv": "network_server_us",
    "avg latency": "avg_us",
}
_TIMES = {
    "client send",
    "server queue",
    "server compute input",
    "server compute infer",
    "server compute output",
    "client recv",
    "request/response",
    "response wait",
}


def _key(header: str) -> str:
    h = header.strip().lower()
    slug = re.sub(r"[^a-z0-9]+", "_", h).strip("_")
    if h in _RENAMED or re.fullmatch(r"p\d+ latency", h):
        return _RENAMED.get(h) or slug.replace("_latency", "_us")
    return slug + "_us" if h in _TIMES else slug


def _number(text: str):
    text = text.strip()
    try:
        v = float(text)
    except ValueError:
        return text
    return int(v) if v.is_integer() and "." not in text and "e" not in text.lower() else v


def parse_csv(text: str) -> list[dict]:
    """Rows of perf_analyzer's ``-f`` CSV as dicts, keyed by header name (see ``_key``)."""
    rows = list(csv.reader(text.splitlines()))
    start = next((i for i, r in enumerate(rows) if any(c.strip().lower() == "inferences/second" for c in r)), None)
    if start is None:
        return []
    keys = [_key(h) for h in rows[start]]
    out = []
    for r in rows[start + 1 :]:
        if not r or not any(c.strip() for c in r):
            break  # a blank line ends the table (later sections are other tables)
        row = {k: _number(v) for k, v in zip(keys, r) if k}
        for k in ("throughput", "rate"):  # "11086" is still a rate, not a count
            if isinstance(row.get(k), int):
                row[k] = float(row[k])
        out.append(row)
    return out


def parse_profile(text: str) -> list[dict]:
    """perf_analyzer's last (stable) windows from its ``--profile-export-file`` JSON (the requests
    it counted, send and response times in ns, and the windows' boundaries): per window its real
    request count and length, latencies in an HDR histogram of µs as rig.worker.load.windows makes them."""
    import json

    import numpy as np

    from rig.common import hdr

    exp = (json.loads(text).get("experiments") or [{}])[0]
    bounds = [int(b) for b in exp.get("window_boundaries") or []]
    pairs = [
        (r["timestamp"], r["response_timestamps"][-1])
        for r in exp.get("requests") or []
        if r.get("response_timestamps")
    ]
    sent, done = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    which = np.clip(np.searchsorted(bounds, done, side="right") - 1, 0, max(0, len(bounds) - 2))
    out = []
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        ns = (done - sent)[which == i]
        h = hdr.new()
        for v, c in zip(*np.unique(np.clip((ns + 500) // 1000, hdr.LOWEST_US, hdr.HIGHEST_US), return_counts=True)):
            h.record_value(int(v), int(c))
        n, length = int(ns.size), (b - a) / 1e9
        pct = h.get_percentile_to_value_dict([50, 90, 99, 99.9]) if n else {}
        out.append(
            {
                "window": i + 1,
                "start_s": (a - bounds[0]) / 1e9,
                "length_s": length,
                "requests": n,
                "errors": 0,
                "throughput": n / length if length > 0 else 0.0,
                **{f"p{q:g}_us".replace(".", ""): (float(pct[q]) if n else None) for q in (50, 90, 99, 99.9)},
                "max_us": float(h.get_max_value()) if n else None,
                "mean_us": float(ns.mean()) / 1000 if n else None,
                "histogram": hdr.encode(h) if n else None,
            }
        )
    return out


# perf_analyzer's "Server:" block (stdout), over the windows it reported: what Triton's statistics said
_SERVER_COUNT = re.compile(r"^\s*(Inference count|Execution count|Successful request count):\s*(\d+)")
_SERVER_LATENCY = re.compile(r"^\s*Avg request latency:\s*(\d+(?:\.\d+)?) usec")
_SERVER_PART = re.compile(r"(overhead|queue|compute input|compute infer|compute output) (\d+(?:\.\d+)?) usec")
_SERVER_KEYS = {"Inference count": "inferences", "Execution count": "executions", "Successful request count": "success"}


def is_server_line(line: str) -> bool:
    return bool(_SERVER_COUNT.match(line) or _SERVER_LATENCY.match(line))


def parse_server_summary(lines: list[str]) -> dict | None:
    """The server's side of perf_analyzer's last report (its stdout's ``Server:`` block: Triton's
    statistics over the windows it reported): ``success``, ``inferences``, ``executions`` and the
    per-request averages in us, ``request_us``, ``overhead_us``, ``queue_us``,
    ``compute_input_us``, ``compute_infer_us``, ``compute_output_us``. None where it printed none.
    (Its ``--profile-export-file`` holds no server figures: 2.48 writes only the requests and the
    windows' boundaries.)"""
    out: dict = {}
    for line in lines:
        m = _SERVER_COUNT.match(line)
        if m:
            out[_SERVER_KEYS[m.group(1)]] = int(m.group(2))
        m = _SERVER_LATENCY.match(line)
        if m:
            out["request_us"] = float(m.group(1))
            for name, v in _SERVER_PART.findall(line):
                out[name.replace(" ", "_") + "_us"] = float(v)
    need = ("success", "request_us", "queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")
    return out if all(k in out for k in need) and out["success"] > 0 else None


# ---------------------------------------------------------------- its output

_NOISE = re.compile(
    r"pinned memory|CudaDriverHelper|NVML|DCGM|cuda_memory_manager|CNMEM|CUDA driver"
    r"|malloc|free\(\)|corrupted|Server average accounted time|Received exit signal|^\*\*\*|Using .* (mode|calls)"
    r"|^At:$|^<frozen |\.py\(\d+\)",
    re.IGNORECASE,
)
_GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]\s*")
LOAD_FAILED = re.compile(r"failed to load '([^']*)'")


def clean_line(line: str) -> str:
    line = _GLOG.sub("", line.strip())
    if len(line) >= 2 and line[0] == '"':
        line = line.strip('"')
    return line.split("\\n")[0].strip()


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def meaningful(lines: list[str]) -> str:
    """The line that says why perf_analyzer failed, in this order: a model-load error, an
    instability notice, the server's first error, perf_analyzer's last ``error:`` line, else the
    last line that is not known noise (CUDA/NVML/DCGM warnings on a machine without GPU)."""
    useful = [
        (x, clean_line(x))
        for x in lines
        if clean_line(x) and not _NOISE.search(clean_line(x)) and not x.startswith((" ", "\t"))
    ]
    for pattern, first in (
        (LOAD_FAILED, True),
        (re.compile(r"stable measurement", re.IGNORECASE), True),
        (re.compile(r"^[EF]\d{4} "), True),
        (re.compile(r"^error", re.IGNORECASE), False),
    ):
        hits = [c for raw, c in useful if pattern.search(raw.strip()) or pattern.search(c)]
        if hits:
            return hits[0] if first else hits[-1]
    return useful[-1][1] if useful else "no output"
