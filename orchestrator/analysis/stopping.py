"""The pre-registered stopping rule: `analysis.stopping: {kind: evalue, max_layouts: N}`.

After each completed layout the runner asks `evaluate_stopping(store, loaded_protocol)`.
The rule uses the discordant pairs observed so far (discordant marks when marks have repeats:
repeats on one mark are not independent, see `stats.clustered`): the Beta-mixture e-value
(`stats.evalue_discordant`) is an anytime-valid test, so the campaign may stop as soon as
e >= 1/alpha and the type-I error stays <= alpha however often it looks (Ville's
inequality). With 3+ policies every pair gets its own e-value and the threshold is
K/alpha for K pairs (a union bound). At N completed layouts the campaign stops regardless.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any, NamedTuple

from orchestrator.analysis.outcomes import TrialOutcome
from orchestrator.analysis.stats import PairedTable, evalue_discordant, mark_split, paired_table


class StoppingDecision(NamedTuple):
    stop: bool
    reason: str
    e_value: float


def _analysis(protocol: Any) -> tuple[float, Any, tuple[str, ...]]:
    """(alpha, stopping, policy labels) from a Protocol, a LoadedProtocol or a plain dict."""
    inner = getattr(protocol, "protocol", protocol)
    if isinstance(inner, dict):
        analysis = inner.get("analysis") or {}
        return (float(analysis.get("alpha", 0.05)), analysis.get("stopping", "none"),
                tuple(inner.get("policies", {}) or ()))
    analysis = inner.analysis
    return float(analysis.alpha), analysis.stopping, tuple(inner.policies)


def _stopping_fields(stopping: Any) -> tuple[str, int | None]:
    if isinstance(stopping, str) or stopping is None:
        return "none", None
    if isinstance(stopping, dict):
        return str(stopping.get("kind", "none")), stopping.get("max_layouts")
    return str(stopping.kind), int(stopping.max_layouts)


def stopping_decision(outcomes_so_far: Sequence[TrialOutcome], protocol: Any) -> StoppingDecision:
    """Decide whether to stop now. Returns (stop, reason, e_value).

    The e-value of a pair (a, b) uses the marks whose every (layout, repeat) has a known outcome
    for both a and b (`RuleView`; a third policy that never ran takes nothing away from the pair):
    with one trial per mark the discordant layouts, with repeats the discordant marks
    (a mark's sign of A-only minus B-only over its repeats, `stats.mark_split`): repeats on one
    mark are not independent, the signs of complete marks are (under H0);
    max_layouts counts the layouts every policy has run, judged or not (on hardware labels may
    lag behind). stop is True when the e-value of some pair reaches K/alpha (K = number of
    policy pairs), or when max_layouts layouts have run. e_value is the largest pairwise e-value. With
    no evalue rule registered it never stops (reason says so)."""
    alpha, stopping, labels = _analysis(protocol)
    kind, max_layouts = _stopping_fields(stopping)
    ran: dict[tuple[str, int], set[str]] = {}
    for o in outcomes_so_far:
        if o.state == "done":
            ran.setdefault((o.layout, o.repeat), set()).add(o.policy)
    if not labels:
        labels = tuple(dict.fromkeys(o.policy for o in outcomes_so_far))
    view = RuleView.of(outcomes_so_far, labels)
    blocks, repeats = view.blocks, view.repeats
    layouts_run = sum(1 for v in ran.values() if all(p in v for p in labels))
    pairs = list(combinations(labels, 2))
    k = max(len(pairs), 1)
    best_e, best_pair, best_counts = 0.0, None, (0, 0)
    for a, b in pairs:
        a_only, b_only = view.split(a, b)
        e = evalue_discordant(a_only, b_only, alpha / k).e_value
        if e > best_e or best_pair is None:
            best_e, best_pair, best_counts = e, (a, b), (a_only, b_only)
    if kind != "evalue":
        return StoppingDecision(False, "no stopping rule pre-registered", best_e)
    threshold = k / alpha
    n = len(blocks)
    judged_note = "" if n == layouts_run else f" ({n} of them with known outcomes for every policy)"
    if best_pair is not None and best_e >= threshold:
        a, b = best_pair
        leader = a if best_counts[0] > best_counts[1] else b
        return StoppingDecision(
            True, f"stopped early by the pre-registered e-value rule after {layouts_run} layouts{judged_note}: "
                  f"e = {best_e:.1f} >= {threshold:g} for {a} vs {b} "
                  f"({best_counts[0]}-{best_counts[1]} discordant{' marks' if repeats else ''}, {leader} ahead)",
            best_e)
    if max_layouts is not None and layouts_run >= max_layouts:
        return StoppingDecision(
            True, f"reached max_layouts = {max_layouts}{judged_note} without the e-value rule rejecting "
                  f"(largest e = {best_e:.2f} < {threshold:g})", best_e)
    return StoppingDecision(False, f"continue: {layouts_run} layouts run{judged_note}, largest e = "
                                   f"{best_e:.2f} < {threshold:g}", best_e)


class RuleView:
    """What the e-value rule counts, the one definition the runner and the report share. Per
    pair of policies (a, b): the (layout, repeat) blocks where both a and b are known, and the
    marks all of whose scheduled blocks are so known (a mark counts only once complete, so its
    sign is final). A third policy's missing outcome (every attempt aborted, an unsure label)
    removes nothing from a vs b: under "a and b are equal" the sign of a mark complete for a and
    b is symmetric whatever the other policies did, so the pair's e-value stays a test martingale."""

    def __init__(self, known: dict[tuple[str, int], dict[str, bool]], reps: dict[str, list[int]],
                 labels: Sequence[str]):
        self.known = known
        self.reps = reps
        self.blocks = {key: v for key, v in known.items() if all(p in v for p in labels)}
        self.repeats = any(len(r) > 1 for r in reps.values())

    @classmethod
    def of(cls, outcomes: Sequence[TrialOutcome], labels: Sequence[str]) -> RuleView:
        known: dict[tuple[str, int], dict[str, bool]] = {}
        reps: dict[str, set[int]] = {}
        for o in outcomes:
            reps.setdefault(o.layout, set()).add(o.repeat)
            if o.success is not None:
                known.setdefault((o.layout, o.repeat), {})[o.policy] = bool(o.success)
        return cls(known, {m: sorted(r) for m, r in reps.items()}, labels)

    def pairs(self, a: str, b: str) -> dict[str, list[tuple[bool, bool]]]:
        """{mark: [(a's outcome, b's outcome) per repeat]} over the marks complete for a and b."""
        out = {}
        for m, rs in self.reps.items():
            got = [self.known.get((m, r), {}) for r in rs]
            if all(a in v and b in v for v in got):
                out[m] = [(v[a], v[b]) for v in got]
        return out

    def tables(self, a: str, b: str) -> list[PairedTable]:
        """The per-mark paired tables of the marks the rule counts for a vs b."""
        return [paired_table([x for x, _ in v], [y for _, y in v]) for v in self.pairs(a, b).values()]

    def split(self, a: str, b: str) -> tuple[int, int]:
        """Discordant marks (A ahead, B ahead) over the marks complete for a and b: a mark's
        d = (A-only) - (B-only) over its repeats (`stats.mark_split`); with one repeat per mark,
        the discordant layouts. The e-value's counts."""
        return mark_split(self.tables(a, b))

    def units(self, a: str, b: str) -> int:
        """Marks complete for a and b (with one repeat per mark, the layouts known for both)."""
        return len(self.pairs(a, b))


def evaluate_stopping(store: Any, loaded_protocol: Any) -> StoppingDecision:
    """The runner's entry point: outcomes from the store (physics in simulation, the human
    consensus on hardware), then `stopping_decision`."""
    from orchestrator.analysis.outcomes import outcomes_from_store

    simulated = bool(store.campaign().get("simulated"))
    outcomes = outcomes_from_store(store, "physics" if simulated else None)
    return stopping_decision(outcomes.outcomes, loaded_protocol)
