"""The Outcomes CSV (docs/design.md section 14, `report --outcomes`) read into an `OutcomeSet`: header
row, columns `layout,policy,success`, optional `repeat,stratum,judge,failure_mode`; success is
one of 1,0,true,false,yes,no (any case). Every problem is a `path:line: message` line
(BadInput, exit 2); nothing is silently dropped."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome
from orchestrator.core.errors import BadInput
from orchestrator.core.textfile import read_text_file

SUCCESS_WORDS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
CSV_REQUIRED = ("layout", "policy", "success")
CSV_OPTIONAL = ("repeat", "stratum", "judge", "failure_mode")


def parse_success(value: str) -> bool | None:
    """1/0/true/false/yes/no, any case and surrounding spaces; None if not one of them."""
    return SUCCESS_WORDS.get(value.strip().lower())


def csv_rows(path: Path, header: str = "layout,policy,success") -> tuple[list[list[str]], list[int]]:
    """The CSV's rows from the first non-blank one, with their physical line numbers (BadInput
    for an empty file, naming the `header` expected)."""
    text = read_text_file(path, "outcomes CSV", encoding="utf-8-sig")
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        raise BadInput(f"{path}: malformed CSV: {exc}") from None
    # csv.reader loses physical line numbers for quoted newlines; rebuild them
    line_numbers = _row_lines(text)
    while rows and not any(cell.strip() for cell in rows[0]):
        rows.pop(0)
        line_numbers.pop(0)
    if not rows:
        raise BadInput(f"{path}:1: empty file: expected a header row `{header}`")
    return rows, line_numbers


def csv_header(path: Path, row: list[str], line: int, required: tuple[str, ...] = CSV_REQUIRED,
               optional: tuple[str, ...] = CSV_OPTIONAL) -> list[str]:
    """The header's column names (lower case, any order); BadInput at `path:line` for unknown,
    repeated or missing ones. The outcomes CSV's rule, and `compare --outcomes`'s."""
    header = [h.strip().lower() for h in row]
    unknown = [h for h in header if h not in required + optional]
    if unknown:
        raise BadInput(f"{path}:{line}: unknown column{'s' if len(unknown) > 1 else ''} "
                       f"{', '.join(repr(u) for u in unknown)} (allowed: {', '.join(required + optional)})")
    dupes = [h for h, n in Counter(header).items() if n > 1]
    if dupes:
        raise BadInput(f"{path}:{line}: column {dupes[0]!r} appears twice in the header")
    missing = [h for h in required if h not in header]
    if missing:
        raise BadInput(f"{path}:{line}: missing required column{'s' if len(missing) > 1 else ''} "
                       f"{', '.join(repr(m) for m in missing)} (header is: {','.join(header)})")
    return header


def load_outcomes_csv(path: str | Path) -> OutcomeSet:
    """Read an Outcomes CSV (docs/design.md section 14). Raises BadInput with `path:line: message` lines.

    Rules: the header must name layout, policy and success (any order, any case) and nothing
    unknown; every row needs as many fields as the header, a non-empty layout and policy, a
    success in 1,0,true,false,yes,no and, if given, an integer repeat >= 0; (layout, repeat,
    policy) must be unique; one layout must keep one stratum; at least two policies."""
    path = Path(path)
    rows, line_numbers = csv_rows(path)
    hline = line_numbers[0]
    header = csv_header(path, rows[0], hline)
    problems: list[str] = []
    outcomes: list[TrialOutcome] = []
    seen: dict[tuple[str, int, str], int] = {}
    strata: dict[str, tuple[str, int]] = {}
    for row, line in zip(rows[1:], line_numbers[1:], strict=True):
        if not any(cell.strip() for cell in row):
            continue  # blank line
        result = _row_outcome(path, line, row, header, seen, strata)
        if isinstance(result, str):
            problems.append(result)
        else:
            outcomes.append(result)
    if problems:
        raise BadInput(problems)
    if not outcomes:
        raise BadInput(f"{path}:{hline}: no data rows after the header")
    policies = tuple(dict.fromkeys(o.policy for o in outcomes))
    if len(policies) < 2:
        raise BadInput(f"{path}:{outcomes[0].line}: only one policy ({policies[0]!r}); a comparison needs 2 or more")
    # a layout listed with a stratum on one row and none on another: fill it in
    filled = tuple(o if o.stratum or o.layout not in strata else
                   TrialOutcome(**{**o.__dict__, "stratum": strata[o.layout][0]}) for o in outcomes)
    judges = sorted({o.judge for o in filled if o.judge})
    label_source = "csv" + (f" (judge: {', '.join(judges)})" if judges else "")
    return OutcomeSet(outcomes=filled, policies=policies, source=str(path), label_source=label_source,
                      campaign_name=path.stem, scheduled_trials=len(filled))


def _row_outcome(path: Path, line: int, row: list[str], header: list[str], seen: dict[tuple[str, int, str], int],
                 strata: dict[str, tuple[str, int]]) -> TrialOutcome | str:
    """One data row's outcome, or its problem (`path:line: message`). `seen` ((layout, repeat,
    policy) -> line) and `strata` (layout -> (stratum, line)) hold the rows before it and take
    this one's."""
    if len(row) != len(header):
        return f"{path}:{line}: expected {len(header)} fields ({','.join(header)}), found {len(row)}"
    cell = {h: row[i].strip() for i, h in enumerate(header)}
    problem, success, repeat = _row_values(cell)
    if problem:
        return f"{path}:{line}: {problem}"
    key = (cell["layout"], repeat, cell["policy"])
    if key in seen:
        return (f"{path}:{line}: duplicate row for layout {key[0]!r}, repeat {repeat}, "
                f"policy {key[2]!r} (first at line {seen[key]})")
    seen[key] = line
    stratum = cell.get("stratum") or None
    if stratum is not None:
        prev = strata.get(cell["layout"])
        if prev is not None and prev[0] != stratum:
            return (f"{path}:{line}: layout {cell['layout']!r} is in stratum {stratum!r} "
                    f"here but {prev[0]!r} at line {prev[1]}")
        strata.setdefault(cell["layout"], (stratum, line))
    return TrialOutcome(layout=cell["layout"], repeat=repeat, policy=cell["policy"], success=success,
                        stratum=stratum, judge=cell.get("judge") or None,
                        failure_mode=(cell.get("failure_mode") or None) if not success else None, line=line)


def _row_values(cell: dict[str, str]) -> tuple[str | None, bool, int]:
    """(the row's problem or None, success, repeat) of one row's stripped cells."""
    if not cell["layout"]:
        return "empty layout", False, 0
    if not cell["policy"]:
        return "empty policy", False, 0
    success = parse_success(cell["success"])
    if success is None:
        return f"success must be one of 1,0,true,false,yes,no, not {cell['success']!r}", False, 0
    if not cell.get("repeat"):
        return None, success, 0
    try:
        repeat = int(cell["repeat"])
    except ValueError:
        repeat = -1
    if repeat < 0:
        return f"repeat must be a whole number >= 0, not {cell['repeat']!r}", False, 0
    return None, success, repeat


def _row_lines(text: str) -> list[int]:
    """The 1-based physical line on which each CSV record starts."""
    lines = []
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    while True:
        try:
            next(reader)
        except StopIteration:
            break
        except csv.Error:
            break
        lines.append(start)
        start = reader.line_num + 1
    return lines
