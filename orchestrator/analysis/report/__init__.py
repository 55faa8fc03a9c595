"""The campaign report: a frozen `Report` built from an `OutcomeSet`, and its renderings.

- model.py: the frozen report (every number shown, computed once);
- build.py: `build_report`, the only place that calls the statistics (`orchestrator.analysis.stats`);
- document.py: the report as a format-neutral document, one function per section;
- text.py: the document laid out as plain text;
- markdown.py, html.py (+ plots.py), json.py: the other renderings of the same report.

JSON follows docs/design.md section 13 (schema `orchestrator.report/1`); the extra keys it carries are
additions, never changes of meaning. HTML is one self-contained file with matplotlib PNGs
embedded as base64 (matplotlib is imported only for HTML).
"""

from __future__ import annotations

from orchestrator.analysis.report.build import build_report
from orchestrator.analysis.report.html import render_html
from orchestrator.analysis.report.json import read_report, render_json, to_dict
from orchestrator.analysis.report.markdown import render_markdown
from orchestrator.analysis.report.model import (
    OVERRUN_WARN_FRACTION,
    SCHEMA,
    Comparison,
    Disagreement,
    DriftRow,
    JudgeAccuracy,
    JudgeSection,
    KappaRow,
    PolicySummary,
    PolicyTiming,
    Report,
    StratumComparison,
    StratumRow,
    TimeSummary,
)
from orchestrator.analysis.report.more_layouts import PLAN_MAX_LAYOUTS
from orchestrator.analysis.report.text import render_text

RENDERERS = {"text": render_text, "md": render_markdown, "json": render_json, "html": render_html}


def render(r: Report, fmt: str) -> str:
    try:
        return RENDERERS[fmt](r)
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}") from None


__all__ = ["OVERRUN_WARN_FRACTION", "PLAN_MAX_LAYOUTS", "RENDERERS", "SCHEMA", "Comparison", "Disagreement",
           "DriftRow", "JudgeAccuracy", "JudgeSection", "KappaRow", "PolicySummary", "PolicyTiming", "Report",
           "StratumComparison", "StratumRow", "TimeSummary", "build_report", "render", "render_html",
           "read_report", "render_json", "render_markdown", "render_text", "to_dict"]
