"""How the rig writes numbers for people (one place, so every table reads alike)."""

from __future__ import annotations

import collections
import json
import re


def num(value, fmt: str = "{:.3f}") -> str:
    """``value`` in ``fmt``, or ``-`` where it is unknown (None)."""
    return "-" if value is None else fmt.format(value)


_SECRET_PARAM = re.compile(
    r"(?i)\b(access_key|secret_key|session_token|aws_access_key_id|"
    r"aws_secret_access_key|aws_session_token|password|passwd|token|sig|signature)"
    r"=([^&\s\"']+)"
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@\"']+):([^@\s\"']+)@")


def redact(text: str) -> str:
    """``text`` with the credentials a URI or option can carry replaced by ``***``: query
    parameters such as ``secret_key=`` and the password of ``scheme://user:password@host``."""
    text = _SECRET_PARAM.sub(lambda m: f"{m.group(1)}=***", text)
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:***@", text)


def top_messages(counts, n: int = 5) -> str | None:
    """The ``n`` most frequent of several ``{message: count}`` tallies, as JSON (None: none)."""
    total: collections.Counter = collections.Counter()
    for c in counts:
        total.update(c)
    return json.dumps(dict(total.most_common(n))) if total else None


def md_cell(value) -> str:
    """Text made safe for one cell of a Markdown table: its bars escaped, its lines joined."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")
