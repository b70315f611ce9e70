"""The report's two renderings: Markdown for a CI log and one self-contained HTML page (inline
CSS, figures as base64 PNG data URIs, no scripts or fonts from elsewhere: it opens offline).

A report is a list of ``Section``s; a section holds blocks: text, a table (a DataFrame), a
figure (PNG bytes), or a fragment rendered elsewhere (``Html``: its HTML for the page, its
Markdown for the summary). Pure functions from those to strings.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math

import pandas as pd

from rig.common.text import md_cell


@dataclasses.dataclass
class Figure:
    png: bytes  # or what ``rig.analysis.plots.render`` returned: a Pending whose ``result()`` it is
    alt: str


@dataclasses.dataclass
class Table:
    frame: pd.DataFrame
    caption: str = ""
    markdown: bool = True  # also printed in the Markdown summary


@dataclasses.dataclass
class Html:
    html: str  # a fragment for the page, as it is (the caller escaped it)
    markdown: str = ""  # what the Markdown summary shows in its place (empty: nothing)


@dataclasses.dataclass
class Section:
    title: str
    blocks: list = dataclasses.field(default_factory=list)  # str | Table | Figure | Html

    def add(self, *blocks) -> Section:
        self.blocks.extend(b for b in blocks if b is not None)
        return self


def cell(v) -> str:
    """One value as a table shows it: numbers rounded to what the eye needs, nulls as '-'."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        a = abs(v)
        if a == 0:
            return "0"
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 10:
            return f"{v:.1f}"
        if a >= 0.01:
            return f"{v:.3f}"
        return f"{v:.2e}"
    return str(v)


def markdown_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "(none)"
    cols = [str(c) for c in df.columns]
    rows = [[md_cell(cell(v)) for v in r] for r in df.itertuples(index=False)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(title: str, summary: list[str], sections: list[Section]) -> str:
    out = [f"# {title}", ""] + [f"{s}" for s in summary] + [""]
    for s in sections:
        out += [f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, str):
                out += [b, ""]
            elif isinstance(b, Table) and b.markdown:
                if b.caption:
                    out += [f"**{b.caption}**", ""]
                out += [markdown_table(b.frame), ""]
            elif isinstance(b, Html) and b.markdown:
                out += [b.markdown.rstrip(), ""]
    return "\n".join(out).rstrip() + "\n"


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:18px 28px 48px}
h1{font-size:22px;margin:8px 0 4px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d6dae0;padding-bottom:4px}
p.sum{margin:2px 0;color:#39424c}nav a{margin-right:14px;color:#2a5db0}
table{border-collapse:collapse;margin:6px 0 14px;background:#fff;font-size:12.5px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #dde1e6;padding:3px 8px;text-align:right}th{background:#eef1f5;text-align:center}
td:first-child,th:first-child{text-align:left}
caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}
tr.flag td{background:#fdecea}tr.unconfirmed td{background:#fbf3d5}
figure{margin:8px 0 18px;background:#fff;padding:8px;border:1px solid #dde1e6;display:inline-block}
img{max-width:100%;height:auto;display:block}figcaption{font-size:12px;color:#5b6570}
.note{color:#5b6570;font-size:12.5px}
h3{font-size:15px;margin:18px 0 6px}.conformance td a{color:inherit;text-decoration:none}
.cf-grid td{text-align:left;min-width:7em;max-width:10em;vertical-align:top}
.cf-grid th.cf-row{background:#fff;font-weight:600;white-space:nowrap;vertical-align:top;
position:sticky;left:0;z-index:1}
.cf-grid thead th:first-child{position:sticky;left:0;z-index:2}
.cf-grid td.cf-healthy,.cf-key.cf-healthy{background:#dcf1de}
.cf-grid td.cf-unhealthy,.cf-key.cf-unhealthy{background:#f9d9d5}
.cf-grid td.cf-intermittent,.cf-key.cf-intermittent{background:#fbeeb8}
.cf-grid td.cf-finding{box-shadow:inset 0 0 0 2px #b3261e;font-weight:600}.cf-grid td.cf-unjudged{font-style:italic}
.cf-grid td.never-run,.cf-grid td.skipped{color:#8a939c}
.cf-key{display:inline-block;width:.9em;height:.9em;border:1px solid #b9c0c8;vertical-align:-1px}
.cf-figures td{text-align:left}tr:target td{background:#fff5c2}
"""


def _html_table(t: Table) -> str:
    df = t.frame
    # a row's class by its "significant" cell: yes (or True) is flagged, "unconfirmed" shaded apart
    marks = {True: ' class="flag"', "yes": ' class="flag"', "unconfirmed": ' class="unconfirmed"'}
    sig = df["significant"].tolist() if "significant" in df else [None] * len(df)
    body = []
    for f, r in zip(sig, df.itertuples(index=False)):
        tds = "".join(f"<td>{html.escape(cell(v))}</td>" for v in r)
        body.append(f"<tr{marks.get(f, '')}>{tds}</tr>")
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    cap = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    if df.empty:
        return f"<table>{cap}<tr><td>(none)</td></tr></table>"
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _html_figure(f: Figure) -> str:
    data = base64.b64encode(f.png if isinstance(f.png, bytes) else f.png.result()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(f.alt)}">'
        f"<figcaption>{html.escape(f.alt)}</figcaption></figure>"
    )


def page(title: str, summary: list[str], sections: list[Section]) -> str:
    """The whole HTML page as one string."""
    nav = " ".join(f'<a href="#s{i}">{html.escape(s.title)}</a>' for i, s in enumerate(sections))
    parts = [f"<h1>{html.escape(title)}</h1>"]
    parts += [f'<p class="sum">{html.escape(s)}</p>' for s in summary]
    parts.append(f"<nav>{nav}</nav>")
    for i, s in enumerate(sections):
        parts.append(f'<section id="s{i}"><h2>{html.escape(s.title)}</h2>')
        for b in s.blocks:
            if isinstance(b, str):
                parts.append(f'<p class="note">{html.escape(b)}</p>')
            elif isinstance(b, Table):
                parts.append(_html_table(b))
            elif isinstance(b, Figure):
                parts.append(_html_figure(b))
            elif isinstance(b, Html):
                parts.append(b.html)
        parts.append("</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{html.escape(title)}</title>'
        f'<link rel="icon" href="data:,"><style>{_CSS}</style></head><body><main>\n'
        + "\n".join(parts)
        + "\n</main></body></html>\n"
    )
