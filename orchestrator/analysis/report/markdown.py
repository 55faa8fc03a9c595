"""The report as Markdown (GitHub-flavoured tables): the same blocks as the text rendering."""

from __future__ import annotations

from orchestrator.analysis.report.document import Block, Gap, Heading, Item, Table, Title, document
from orchestrator.analysis.report.model import Report


def markdown_table(t: Table) -> list[str]:
    return (["| " + " | ".join(t.header) + " |", "|" + "|".join("---" for _ in t.header) + "|"]
            + ["| " + " | ".join(row) + " |" for row in t.rows])


def markdown_lines(b: Block) -> list[str]:
    if isinstance(b, Title):
        return [f"# {b.text}", ""]
    if isinstance(b, Heading):
        return ["", f"## {b.text}"]
    if isinstance(b, Table):
        return markdown_table(b)
    if isinstance(b, Item):
        return [f"- {b.text}"]
    if isinstance(b, Gap):
        return [""]
    return [b.text]


def render_blocks(blocks: list[Block]) -> str:
    return "\n".join(line for b in blocks for line in markdown_lines(b)).rstrip() + "\n"


def render_markdown(r: Report) -> str:
    return render_blocks(document(r))
