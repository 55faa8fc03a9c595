"""The report as one self-contained HTML file: the same blocks as the text rendering, with real
`<table>` elements, and the plots embedded as base64 PNGs (no script, no external resource).
A print stylesheet keeps tables and figures whole on a page."""

from __future__ import annotations

import html
from collections.abc import Iterator

from orchestrator.analysis.report.document import (
    Block,
    Gap,
    Heading,
    Item,
    Line,
    Table,
    Title,
    document,
    header,
    warnings,
)
from orchestrator.analysis.report.model import Report
from orchestrator.analysis.report.plots import plots

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 980px; margin: 2em auto; padding: 0 1em; color: #222;
       line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: .3em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
.verdict { font-size: 1.15em; padding: .8em 1em; background: #f3f6fa; border-left: 4px solid #1f77b4; }
table { border-collapse: collapse; margin: .6em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
thead th { background: #f0f0f0; }
tbody tr:nth-child(even) { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
section.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: .5em; }
figure { margin: .5em 0; }
figure img { max-width: 100%; height: auto; }
figcaption { font-size: .85em; color: #555; }
@page { margin: 15mm; }
@media print {
  body { max-width: none; margin: 0; padding: 0; font-size: 10pt; }
  .verdict { background: none; border: 1px solid #000; }
  h2 { break-after: avoid; page-break-after: avoid; }
  table, figure, section.plots figure { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
  tbody tr:nth-child(even) { background: none; }
}
"""


def _cell(text: str, tag: str) -> str:
    numeric = tag == "td" and text[:1].isdigit() and " " not in text.strip()
    attrs = ' class="num"' if numeric else ""
    return f"<{tag}{attrs}>{html.escape(text)}</{tag}>"


def html_table(t: Table) -> str:
    head = "".join(_cell(h, "th") for h in t.header)
    body = "\n".join("<tr>" + "".join(_cell(x, "td") for x in row) + "</tr>" for row in t.rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _html(blocks: list[Block]) -> Iterator[str]:
    items: list[str] = []
    for b in blocks + [Gap()]:
        if isinstance(b, Item):
            items.append(f"<li>{html.escape(b.text)}</li>")
            continue
        if items:
            yield "<ul>\n" + "\n".join(items) + "\n</ul>"
            items = []
        if isinstance(b, Title):
            yield f"<h1>{html.escape(b.text)}</h1>"
        elif isinstance(b, Heading):
            yield f"<h2>{html.escape(b.text)}</h2>"
        elif isinstance(b, Table):
            yield html_table(b)
        elif isinstance(b, Line):
            if b.role == "verdict":
                yield f'<p class="verdict">{html.escape(b.text)}</p>'
            else:
                yield f"<p>{html.escape(b.text)}</p>"


def render_page(title: str, top: list[Block], figures: list[tuple[str, str]], rest: list[Block]) -> str:
    """One self-contained page: the `top` blocks, the figures ((caption, base64 PNG)), the rest."""
    shown = "\n".join(f'<figure><img alt="{html.escape(t)}" src="data:image/png;base64,{b}">'
                      f"<figcaption>{html.escape(t)}</figcaption></figure>" for t, b in figures)
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
            f"<style>{STYLE}</style></head><body>\n"
            + "\n".join(_html(top)) + "\n"
            + f'<section class="plots">\n{shown}\n</section>\n'
            + "\n".join(_html(rest)) + "\n</body></html>\n")


def render_html(r: Report) -> str:
    top = header(r) + warnings(r)
    return render_page(f"Report: {r.protocol_name or r.campaign_name}", top, plots(r), document(r)[len(top):])
