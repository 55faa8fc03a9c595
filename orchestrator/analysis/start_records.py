"""What the store recorded of each trial's start: the start-state check of every attempt and the
operator's interventions, read from the campaign's events and attempts (statistics-free; the
report's `start_check` and `interventions` sections are built from these).

The runner (`run/start_state.py`) logs one `start_check` event per measurement, before the
attempt it admits is written, and `start_correction` / `start_override` when the operator
placed the cube again or started the trial anyway; `operator_stop` when the operator ended the
session between trials or at a refusal. An attempt's start check is the last `start_check`
event of its slot logged at or before the attempt started (and after the slot's previous
attempt started); it was overridden when a `start_override` of the slot lies between the two.

Interventions (`INTERVENTION_CAUSES`), each one act of a person, counted once:
- `placement`: the cube put on a trial's mark by hand when the trial was cued, once per attempt
  whose cube the arm did not try to place (`reset: operator`, and a session's first trial with
  `reset: auto`); on the simulator and the twin the simulated hand stands in for the operator
  and is counted the same way;
- `correction`: the cube placed again after a refused start check; after an autonomous reset
  that missed (`cube_reset` with `passes: false`) this is the person's one act for that
  attempt, not a placement as well;
- `override`: a refused start started anyway;
- `cube lost`: the autonomous reset could not find the cube, or found it off the table or out
  of the arm's reach (`cube_lost` events); the person then fetches the cube and puts it on the
  mark, which the start check records as a correction of that slot: the first such correction
  after a `cube_lost` is that same act and is counted here only;
- `stop`: the operator ended an episode (an emergency stop or a redo: `operator_*` aborts),
  stopped the arm's reset (`reset_stopped`: the arm then goes to rest and the operator says what
  next; a cube they then place is that attempt's `placement` as well), or ended the session
  (`operator_stop`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

INTERVENTION_CAUSES = ("placement", "correction", "override", "cube lost", "stop")
OPERATOR_ABORTS = ("operator_unsafe", "operator_misplaced", "operator_other")


@dataclass(frozen=True)
class StartRecord:
    """The start-state check of one attempt (the attempt's episode ran from this start)."""

    slot: int
    episode_id: str
    passes: bool
    overridden: bool
    dx_mm: float | None          # layout frame, x forward, y left (None: no cube measured)
    dy_mm: float | None
    dyaw_deg: float | None       # reduced by the cube's symmetry to (-45, 45]
    judged_invalid: bool         # a judge sent this attempt back as an invalid start

    @property
    def offset_mm(self) -> float | None:
        """Distance of the cube's centre from the mark's."""
        if self.dx_mm is None or self.dy_mm is None:
            return None
        return math.hypot(self.dx_mm, self.dy_mm)


def _data(event: dict[str, Any]) -> dict[str, Any]:
    raw = event.get("data")
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def start_records(events: Sequence[dict[str, Any]], attempts: Sequence[dict[str, Any]]) -> tuple[StartRecord, ...]:
    """One record per attempt that a start check admitted (see the module docstring), in the
    order the attempts started; attempts of a campaign without start checks give none."""
    checks: dict[int, list[dict[str, Any]]] = {}
    overrides: dict[int, list[float]] = {}
    for e in events:
        if e.get("slot") is None:
            continue
        if e["kind"] == "start_check":
            checks.setdefault(int(e["slot"]), []).append(e)
        elif e["kind"] == "start_override":
            overrides.setdefault(int(e["slot"]), []).append(float(e["at"]))
    out: list[StartRecord] = []
    for a, slot, after, started in _attempt_windows(attempts):
        mine = [e for e in checks.get(slot, ()) if after < float(e["at"]) <= started]
        if not mine:
            continue
        check = mine[-1]
        data = _data(check)
        out.append(StartRecord(
            slot=slot, episode_id=str(a["episode_id"]), passes=bool(data.get("passes")),
            overridden=any(float(check["at"]) <= t <= started for t in overrides.get(slot, ())),
            dx_mm=_number(data.get("dx_mm")),
            dy_mm=_number(data.get("dy_mm")), dyaw_deg=_number(data.get("dyaw_deg")),
            judged_invalid=a.get("abort_class") == "invalid_start"))
    return tuple(out)


def _attempt_windows(attempts: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], int, float, float]]:
    """(attempt, slot, after, started) in the order the attempts started: what the store recorded
    of a slot before an attempt lies in (after, started], `after` being when the slot's previous
    attempt started (-inf for its first)."""
    out: list[tuple[dict[str, Any], int, float, float]] = []
    previous_start: dict[int, float] = {}
    for a in sorted(attempts, key=lambda a: (float(a["started_at"]), int(a["id"]))):
        slot, started = int(a["slot"]), float(a["started_at"])
        out.append((a, slot, previous_start.get(slot, float("-inf")), started))
        previous_start[slot] = started
    return out


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def intervention_counts(events: Iterable[dict[str, Any]], attempts: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Interventions by cause (`INTERVENTION_CAUSES`, every cause present, zeros included)."""
    events = sorted(events, key=lambda e: float(e.get("at") or 0.0))
    kinds = Counter(e["kind"] for e in events)
    counts = dict.fromkeys(INTERVENTION_CAUSES, 0)
    # an invalid start is a judge's, afterwards: its attempt still had its cube placed by hand
    counts["placement"] = sum(1 for tried in _arm_tried(events, attempts) if not tried)
    counts["correction"] = kinds["start_correction"] - _corrections_of_lost_cubes(events)
    counts["override"] = kinds["start_override"]
    counts["cube lost"] = kinds["cube_lost"]
    counts["stop"] = kinds["operator_stop"] + kinds["reset_stopped"] + sum(1 for a in attempts if a.get("abort_class") in OPERATOR_ABORTS)
    return counts


def _arm_tried(events: Sequence[dict[str, Any]], attempts: Sequence[dict[str, Any]]) -> list[bool]:
    """Per attempt: did the arm try to place its cube (a `cube_reset` of its slot after the slot's
    previous attempt started and at or before this one started)?"""
    resets: dict[int, list[float]] = {}
    for e in events:
        if e["kind"] == "cube_reset" and e.get("slot") is not None:
            resets.setdefault(int(e["slot"]), []).append(float(e["at"]))
    return [any(after < t <= started for t in resets.get(slot, ())) for _, slot, after, started in _attempt_windows(attempts)]


def _corrections_of_lost_cubes(events: Sequence[dict[str, Any]]) -> int:
    """The `start_correction`s that put a lost cube back (the first of its slot after each
    `cube_lost`): the act the `cube lost` count already holds."""
    lost: set[Any] = set()
    n = 0
    for e in events:
        if e["kind"] == "cube_lost":
            lost.add(e.get("slot"))
        elif e["kind"] == "start_correction" and e.get("slot") in lost:
            lost.discard(e.get("slot"))
            n += 1
    return n


def per_100_trials(total: int, trials: int) -> float | None:
    """Interventions per 100 trials done (None: no trial done)."""
    return round(100 * total / trials, 1) if trials else None


def intervention_line(counts: dict[str, int], trials: int, interval: tuple[float, float] | None = None) -> str:
    """`41 interventions in 40 trials, 102.5 per 100 trials: placement 40, correction 1, ...` (the
    console's line at the end of a session and the report's); with `interval`, the rate's exact
    Poisson 95 % interval per 100 trials (`stats.poisson_per_100`) follows the rate."""
    total = sum(counts.values())
    rate = per_100_trials(total, trials)
    shown = "" if interval is None else f" (exact Poisson 95% CI {interval[0]:.1f} to {interval[1]:.1f})"
    return (f"{total} intervention{'s' if total != 1 else ''} in {trials} trials"
            + ("" if rate is None else f", {rate:g} per 100 trials{shown}") + ": "
            + ", ".join(f"{cause} {n}" for cause, n in counts.items()))
