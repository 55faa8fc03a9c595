"""The report as plain text: the document's blocks (`document.py`) laid out line by line."""

from __future__ import annotations

from orchestrator.analysis.report.document import Block, Gap, Heading, Item, Table, Title, document
from orchestrator.analysis.report.model import Report


def text_table(t: Table) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(t.header, *t.rows, strict=True)]
    return ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip() for row in (t.header, *t.rows)]


def _text_lines(b: Block) -> list[str]:
    if isinstance(b, Title):
        return [b.text, "=" * len(b.text)]
    if isinstance(b, Heading):
        return ["", b.text, "-" * len(b.text)]
    if isinstance(b, Table):
        return text_table(b)
    if isinstance(b, Item):
        return [f"- {b.text}"]
    if isinstance(b, Gap):
        return [""]
    return [b.text]


def render_blocks(blocks: list[Block]) -> str:
    """Blocks laid out as plain text (the campaign report's and `compare`'s)."""
    return "\n".join(line for b in blocks for line in _text_lines(b)).rstrip() + "\n"


def render_text(r: Report) -> str:
    return render_blocks(document(r))
