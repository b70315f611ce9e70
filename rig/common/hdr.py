"""The rig's HDR histograms: their settings, their stored encoding and their exact merge.

Every latency the rig records (a window's, a stream's first response and gaps, perf_analyzer's,
a fleet's nodes') is a histogram of microseconds from 1 us to one minute at 3 significant digits
(``new``). Stored (the windows' and fleet's ``histogram`` columns, schema 8 on) it is
HdrHistogram's standard encoding as text (``HISTF...``: the compressed V2 layout, base64), which any
HdrHistogram library decodes as it is, e.g. ``hdrh.histogram.HdrHistogram.decode(text)``. Files
before schema 8 hold base64 of that text: ``decode`` and ``merge`` read both.

No Locust, gevent or pandas here: the load, the fleet and analysis all use it.
"""

from __future__ import annotations

import binascii
import math
from collections.abc import Iterable

import numpy as np

LOWEST_US = 1
HIGHEST_US = 60_000_000  # one minute: longer latencies are recorded as a minute (``clipped``)
DIGITS = 3
_STANDARD = "HIST"  # how every HdrHistogram encoding's base64 begins (its cookie); the older one's: "SElT"


def new():
    """An empty histogram with the rig's settings."""
    from hdrh.histogram import HdrHistogram

    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def encode(hist) -> str:
    """``hist`` in HdrHistogram's standard encoding (compressed, base64), as text."""
    return hist.encode().decode("ascii")


def _standard(text: str | bytes) -> bytes:
    """The standard encoding's base64 text (as bytes), of either stored form."""
    b = text.encode("ascii") if isinstance(text, str) else bytes(text)
    return b if b.startswith(_STANDARD.encode()) else binascii.a2b_base64(b)


def _raw(text: str | bytes) -> bytes:
    """The encoding's bytes (cookie, length, compressed payload), of either stored form."""
    return binascii.a2b_base64(_standard(text))  # base64.b64decode, without its argument checks


def decode(text: str | bytes):
    """A stored histogram as an ``HdrHistogram``: the standard encoding, or the older base64 of it."""
    from hdrh.histogram import HdrHistogram

    return HdrHistogram.decode(_standard(text))


def _payload(text: str):
    """The zlib-inflated payload of one stored histogram and its header (lowest, highest,
    significant digits), or None where it is not HdrHistogram's compressed V2 encoding. The
    layouts are ``hdrh.codec``'s ``ExternalHeader`` (cookie, length) and ``PayloadHeader``
    (cookie, payload length, normalizing index offset, digits, lowest, highest, conversion
    ratio), big-endian."""
    import struct
    import zlib

    from hdrh import codec

    raw = _raw(text)
    if len(raw) < 8:
        return None
    cookie, length = struct.unpack_from(">II", raw)
    if codec.get_cookie_base(cookie) != codec.V2_COMPRESSION_COOKIE_BASE or length != len(raw) - 8:
        return None
    data = zlib.decompress(raw[8:])
    if len(data) < 40:
        return None
    cookie, _, offset, digits, lowest, highest, _ = struct.unpack_from(">IIIIqqd", data)
    if codec.get_cookie_base(cookie) != codec.V2_ENCODING_COOKIE_BASE or offset:
        return None
    return data, (lowest, highest, digits)


def merge(encoded: Iterable[str | None]):
    """The exact sum of stored histograms (None, empty and NaN entries skipped); None when none
    is left. Percentiles of the sum are those of all the latencies recorded together.

    Histograms with the rig's settings are decoded by hdrhistogram's C decoder straight into one
    counts array and summed with numpy, about ten times faster than a decoded ``HdrHistogram``
    each; any other goes through ``decode`` and ``add``."""
    from hdrh.codec import payload_header_size
    from hdrh.histogram import HdrHistogram
    from pyhdrh import decode as decode_counts

    total = acc = scratch = same = None
    count = 0
    for e in encoded:
        if e is None or (isinstance(e, float) and math.isnan(e)) or not len(e):
            continue
        got = _payload(e)
        if total is None:
            highest = max(HIGHEST_US, got[1][1] if got else decode(e).highest_trackable_value)
            total = HdrHistogram(LOWEST_US, highest, DIGITS)
            acc = np.zeros(total.counts_len, dtype=np.uint64)
            scratch = np.zeros(total.counts_len, dtype=np.uint64)
            same = (total.lowest_trackable_value, total.highest_trackable_value, total.significant_figures)
        if got is None or got[1] != same:
            total.add(decode(e))  # counted in ``total`` itself: folded in at the end
            continue
        r = decode_counts(got[0], payload_header_size, scratch.ctypes.data, total.counts_len, 8)
        if r["total"]:  # the decoder writes the non-zero counts only: clear what it wrote
            a, b = r["min_nonzero_index"], r["max_nonzero_index"] + 1
            acc[a:b] += scratch[a:b]
            scratch[a:b] = 0
            count += r["total"]
    if total is None or not count:
        return total
    counts = np.ctypeslib.as_array(total.counts)
    counts += acc
    nonzero = np.flatnonzero(counts)
    total.set_internal_tacking_values(int(nonzero[0]), int(nonzero[-1]), int(total.total_count + count))
    return total
