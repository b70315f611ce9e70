"""The conformance table as an HTML fragment (the report's page; ``rig.analysis.conformance.text``
writes the same as Markdown): each cell's class its health, a link to its figures, each
scenario's description its tooltip."""

from __future__ import annotations

import html

from rig.analysis.conformance.figures import BATCH_NOTE, figure_head, figure_rows
from rig.analysis.conformance.table import NOT_EXACT_MARK, Conformance, is_batched, not_exact
from rig.analysis.conformance.text import SYMBOLS, Slot, footnotes, grid_rows, grid_title, joined, legend


def _parts_html(s: Slot) -> str:
    if not s.parts:
        return html.escape(s.html)
    return joined(s.parts, lambda t, to: html.escape(t) if to is None else f'<a href="#{to}">{html.escape(t)}</a>')


def _inline(text: str) -> str:
    """Markdown's backticks as <code>, the rest escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _swatches(text: str) -> str:
    """A legend line's health symbols as the colours the HTML grid shows them in."""
    for h, sym in SYMBOLS.items():
        text = text.replace(sym, f'<span class="cf-key cf-{h}"></span>')
    return text


def _attr(name: str, value: str) -> str:
    return f' {name}="{html.escape(value)}"' if value else ""


def to_html(table: Conformance, level: int = 3) -> str:
    """The same as ``to_markdown``, as an HTML fragment (for the report's page): each cell's class
    its health (``cf-healthy``, ``cf-unhealthy``, ``cf-intermittent``; a finding's or an unjudged
    one's also ``cf-finding``, ``cf-unjudged``), an ``<a href="#id">`` to its row in the figures
    table, which carries that ``id``; each scenario's description its tooltip."""
    out = ['<div class="conformance">']
    out += [f'<p class="note">{_swatches(_inline(text))}</p>' for text in legend()]
    for g in table.grids:
        head, rows = grid_rows(g)
        out.append(f"<h{level}>{_inline(grid_title(g))}</h{level}>")
        ths = [f"<th{_attr('title', not_exact(x.rstrip(NOT_EXACT_MARK)) or '')}>{html.escape(x)}</th>" for x in head]
        out.append('<table class="cf-grid"><thead><tr>' + "".join(ths) + "</tr></thead><tbody>")
        for label, *cells in rows:
            tds = [f'<th scope="row" class="cf-row"{_attr("title", label.title)}>{html.escape(label.html)}</th>']
            for s in cells:
                body = _parts_html(s) if s.link is None else f'<a href="#{s.link}">{html.escape(s.html)}</a>'
                tds.append(f"<td{_attr('class', s.classes)}{_attr('title', s.title)}>{body}</td>")
            out.append("<tr>" + "".join(tds) + "</tr>")
        out.append("</tbody></table>")
        out += [f'<p class="note">{html.escape(n)}</p>' for n in footnotes(g)]
        out.append(
            f'<table class="cf-figures"><caption>Figures: {_inline(grid_title(g))}</caption><thead><tr>'
            + "".join(f"<th>{html.escape(x)}</th>" for x in figure_head(g))
            + "</tr></thead><tbody>"
        )
        for aid, cols in figure_rows(g):
            out.append(f'<tr id="{aid}">' + "".join(f"<td>{html.escape(x)}</td>" for x in cols) + "</tr>")
        out.append("</tbody></table>")
        if is_batched(g.shape):
            out.append(f'<p class="note">{_inline(BATCH_NOTE)}</p>')
    out.append("</div>")
    return "\n".join(out) + "\n"
