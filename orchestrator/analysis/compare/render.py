"""The comparison in each format: text, Markdown and HTML lay out the same blocks
(`document.py`) with the campaign report's layouts; JSON is `json.py`."""

from __future__ import annotations

from orchestrator.analysis.compare.document import document, header
from orchestrator.analysis.compare.json import render_json
from orchestrator.analysis.compare.model import Comparison
from orchestrator.analysis.report.html import render_page
from orchestrator.analysis.report.markdown import render_blocks as markdown_blocks
from orchestrator.analysis.report.text import render_blocks as text_blocks

FORMATS = ("text", "md", "json", "html")


def render_html(c: Comparison) -> str:
    from orchestrator.analysis.compare.plots import plots

    blocks = document(c)
    top = len(header(c))
    return render_page("Comparison across campaigns", blocks[:top], plots(c), blocks[top:])


def render(c: Comparison, fmt: str) -> str:
    if fmt == "text":
        return text_blocks(document(c))
    if fmt == "md":
        return markdown_blocks(document(c))
    if fmt == "json":
        return render_json(c)
    if fmt == "html":
        return render_html(c)
    raise ValueError(f"unknown format {fmt!r}")
