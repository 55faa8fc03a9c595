"""The compare outcomes CSV (`orchestrator compare --outcomes FILE`, docs/design.md): results
recorded elsewhere.

Columns `task,policy,method,training_seed,layout,success` (any order, any case), optional
`repeat,stratum,held_out,step`. `success` takes the values of `report --outcomes` (1, 0, true,
false, yes, no); `training_seed` and `step` are whole numbers or empty (no seed, no step);
`held_out` is true/false (empty: false). Within a task, a policy keeps one method, seed and step,
a layout one stratum and one held_out, and (policy, layout, repeat) appears once. Every problem
is a `path:line: message` line (BadInput, exit 2). Each task of a file is one campaign: pairs are
formed on (task, training_seed, layout, repeat).
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.analysis.compare.trials import Campaign, Identity, Trial
from orchestrator.analysis.outcomes_csv import csv_header, csv_rows, parse_success
from orchestrator.core.errors import BadInput

REQUIRED = ("task", "policy", "method", "training_seed", "layout", "success")
OPTIONAL = ("repeat", "stratum", "held_out", "step")


def _whole(value: str, what: str, empty_ok: bool) -> int | None:
    """A whole number >= 0 (None when empty and allowed); ValueError with the message."""
    if not value:
        if empty_ok:
            return None
        raise ValueError(f"{what} is empty")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{what} must be a whole number, not {value!r}") from None
    if number < 0 and what != "training_seed":
        raise ValueError(f"{what} must be >= 0, not {number}")
    return number


def _flag(value: str) -> bool:
    if not value:
        return False
    flag = parse_success(value)
    if flag is None:
        raise ValueError(f"held_out must be true or false, not {value!r}")
    return flag


def _row(cell: dict[str, str]) -> tuple[Identity, int, bool, bool]:
    """(identity, repeat, success, held_out) of one row; ValueError naming the problem."""
    for name in ("task", "policy", "method", "layout"):
        if not cell[name]:
            raise ValueError(f"empty {name}")
    success = parse_success(cell["success"])
    if success is None:
        raise ValueError(f"success must be one of 1,0,true,false,yes,no, not {cell['success']!r}")
    identity = Identity(cell["method"], _whole(cell["training_seed"], "training_seed", True),
                        _whole(cell.get("step", ""), "step", True))
    repeat = _whole(cell.get("repeat", ""), "repeat", True) or 0
    return identity, repeat, success, _flag(cell.get("held_out", ""))


def _clash(seen: dict, task: str, policy: str, layout: str, repeat: int, identity: Identity,
           stratum: str | None, held: bool, line: int) -> str | None:
    """What this row contradicts among the earlier rows of its task (None: nothing)."""
    checks = ((("row", policy, layout, repeat), None, "a second row for policy {policy!r}, layout {layout!r}, "
               "repeat {repeat}"),
              (("policy", policy), identity.name, "policy {policy!r} is {value} here but {first} at line {at}"),
              (("identity", identity), policy, "{identity} is policy {policy!r} here but {first!r} at line {at}"),
              (("layout", layout), (stratum, held), "layout {layout!r} has stratum {value[0]!r}, held_out "
               "{value[1]} here but {first[0]!r}, {first[1]} at line {at}"))
    for key, value, message in checks:
        first, at = seen.setdefault((task, *key), (value, line))
        if at != line and (value is None or first != value):
            text = message.format(policy=policy, layout=layout, repeat=repeat, value=value, first=first, at=at,
                                  identity=identity.name)
            return text + (f" (first at line {at})" if value is None else "")
    return None


def read_outcomes_csv(path: Path, key_prefix: str) -> tuple[list[Campaign], list[Trial]]:
    """The CSV's campaigns (one per task, keyed `key_prefix:task`) and trials."""
    path = Path(path)
    rows, lines = csv_rows(path, ",".join(REQUIRED))
    col = {h: i for i, h in enumerate(csv_header(path, rows[0], lines[0], REQUIRED, OPTIONAL))}
    problems: list[str] = []
    trials: list[Trial] = []
    seen: dict = {}
    for row, line in zip(rows[1:], lines[1:], strict=True):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(col):
            problems.append(f"{path}:{line}: expected {len(col)} fields, found {len(row)}")
            continue
        cell = {h: row[i].strip() for h, i in col.items()}
        try:
            identity, repeat, success, held = _row(cell)
        except ValueError as exc:
            problems.append(f"{path}:{line}: {exc}")
            continue
        task, policy, layout, stratum = cell["task"], cell["policy"], cell["layout"], cell.get("stratum") or None
        clash = _clash(seen, task, policy, layout, repeat, identity, stratum, held, line)
        if clash:
            problems.append(f"{path}:{line}: task {task!r}: {clash}")
            continue
        trials.append(Trial(campaign=f"{key_prefix}:{task}", task=task, policy=policy, identity=identity,
                            layout=layout, repeat=repeat, success=success, stratum=stratum, held_out=held))
    if problems:
        raise BadInput(problems)
    if not trials:
        raise BadInput(f"{path}:{lines[0]}: no data rows after the header")
    campaigns = []
    for task in dict.fromkeys(t.task for t in trials):
        mine = [t for t in trials if t.task == task]
        campaigns.append(Campaign(
            key=f"{key_prefix}:{task}", task=task, source=str(path), label_source="csv",
            policies=tuple(dict.fromkeys((t.policy, t.identity) for t in mine)),
            held_out_strata=tuple(sorted({t.stratum or "(no stratum)" for t in mine if t.held_out})),
            scheduled=len(mine), known=len(mine)))
    return campaigns, trials
