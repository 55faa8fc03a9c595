"""The corrected analysis of a campaign judged by the counted rater plus a random human audit
(`judging: {auto: counted, audit: F}`): rates and paired differences from the rater's labels on
every episode corrected by the audit's human labels (`stats.ppi`, the mark as the unit).

Per done trial: its prediction f is the `auto` rater's label where it was sure, people's
consensus (the human judges only; `judging.disagreement: failure` applied) where it was unsure;
a trial an `aborts` rule scored as a failure has f = Y = failure; a trial whose f is not known yet
(unsure, not yet labelled by people) is left out and counted. Audited trials are the store's
audit sample (`AuditSample.trial_ids`, slots in decimal); their human label Y corrects f. The
inclusion probability is (audited trials the rater labelled sure that people have labelled) /
(trials the rater labelled sure): the audit is a uniform random subset of the N trials drawn
before any outcome, and the judge queue hands audit episodes out in each judge's random order,
never told which are audited (docs/judging.md "The audit"), so the labelled ones among the
rater's are a uniform random subset of the rater's of their number (only there does Y - f need
correcting: elsewhere f is people's label). While the audit is incomplete the report says so;
with none of the rater's labelled it states no inclusion probability and no corrected difference.

The rater is counted when it disagrees with people on at most `RATER_DISAGREEMENT_BOUND` of the
audited episodes it labelled sure and people decided (fixed here, so pre-registered with the
tool's version; documented in docs/statistics.md). Beyond it the report says the rater cannot
be counted and falls back to people's labels only: every unsure episode, and the audit sample's
sure ones weighted by 1/pi (`stats.ppi` with lam = 0, Horvitz-Thompson), nothing from the rater.

The decision: per pair, the corrected difference's t test over marks (Holm over the pairs with 3+
policies) at the protocol's alpha: "better" exactly when it rejects; the winner, difference and
interval come from the same corrected estimate (one decision, one dataset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet, TrialOutcome, consensus_label
from orchestrator.analysis.report.format import fmt_p, kappa_text, points
from orchestrator.analysis.stats.agreement import KAPPA_FEW_LABELS

AUTO = "auto"
RATER_DISAGREEMENT_BOUND = 0.10
@dataclass(frozen=True)
class CorrectedPair:
    a: str
    b: str
    difference: stats.CorrectedInterval
    p: float                          # Holm-adjusted with 3+ policies
    significant: bool
    verdict: str


@dataclass(frozen=True)
class CorrectedSection:
    counted: bool                     # within the bound: the rater's labels, corrected, decide
    rates: tuple[tuple[str, stats.CorrectedInterval], ...]
    pairs: tuple[CorrectedPair, ...]
    population: int                   # N, the trials the audit was drawn from
    audit_size: int                   # k, as drawn
    audit_labelled: int               # of those, done and labelled by people
    inclusion: float | None           # audit_rated / rater_sure: P(one of the rater's labels is audited and labelled); None: none is
    audit_rated: int                  # audited episodes the rater labelled sure and people decided
    disagreements: int                # of those, where they differ
    agreement: dict[str, Any]         # stats.binary_agreement on those
    episodes: int                     # done episodes
    human_labelled: int               # of those, labelled by people (unsure + audit + any other)
    unsure: int                       # episodes the rater was unsure of
    waiting: int                      # done trials with no prediction yet (unsure, not yet labelled)
    alpha: float
    fraction: float = 0.0             # the protocol's judging.audit
    decides: bool = True              # False under the e-value rule: the rule decides, these are for reference
    rater_sure: int = 0               # trials with a prediction the rater labelled sure (the audit corrects these)

    @property
    def basis(self) -> str:
        if self.counted:
            return ("the rater's labels on every episode corrected by the audit's human labels "
                    "(prediction-powered inference, unit: marks)")
        return ("people's labels only: the rater cannot be counted (it disagreed with people on "
                f"{self.disagreements} of {self.audit_rated} audited episodes, above the pre-registered bound "
                f"{100 * RATER_DISAGREEMENT_BOUND:g}%); the unsure episodes and the audit sample weighted by 1/pi, "
                "unit: marks")


def _human(data: OutcomeSet) -> dict[str, bool | None]:
    """People's consensus per episode (the human judges only), None where it is unsure."""
    votes: dict[str, list[str]] = {}
    for label in data.human_labels:
        if label.judge != AUTO:
            votes.setdefault(label.episode_id, []).append(label.label)
    out: dict[str, bool | None] = {}
    for ep, labels in votes.items():
        verdict = consensus_label(labels)
        disputed = "success" in labels and "failure" in labels and verdict == "unsure"
        out[ep] = False if disputed and data.disagreement == "failure" else (
            None if verdict == "unsure" else verdict == "success")
    return out


@dataclass(frozen=True)
class _Trial:
    outcome: TrialOutcome
    f: float
    y: float | None
    audited: bool
    sure: bool = True                 # the rater labelled it (False: people's consensus, or a settled failure)

    def prediction(self, counted: bool) -> float:
        """f when the rater is counted; else people's labels only: f where people decided
        (unsure, settled) and 0 where the rater was sure, so the audit's Y - 0 corrects it."""
        return self.f if counted or not self.sure else 0.0


def _trials(data: OutcomeSet, audit: Any, human: dict[str, bool | None]) -> tuple[list[_Trial], int]:
    """(trials with a prediction, done trials still waiting for one)."""
    out, waiting = [], 0
    for o in data.outcomes:
        if o.state != "done":
            continue
        if o.episode_id is None:
            if o.settled == "failure":
                out.append(_Trial(o, 0.0, 0.0, False, sure=False))
            continue
        y = human.get(o.episode_id)
        rater = data.auto_labels.get(o.episode_id, "unsure")
        f = (rater == "success") if rater in ("success", "failure") else y
        if f is None:
            waiting += 1
            continue
        audited = str(o.slot) in audit.trial_ids and y is not None
        out.append(_Trial(o, float(f), None if y is None else float(y), audited, rater in ("success", "failure")))
    return out, waiting


def _difference(marks: list[str], ta: list[_Trial], tb: list[_Trial], counted: bool,
                inclusion: float | None) -> stats.CorrectedInterval:
    """The corrected paired difference (`stats.ppi_difference`); with no audited episode of the
    rater's labelled yet (`inclusion` None) its errors are unmeasured: [-1, 1], p 1."""
    if inclusion is None:
        return stats.CorrectedInterval(float("nan"), -1.0, 1.0, float("nan"), len(set(marks)), len(marks), 0,
                                       p_value=1.0)
    return stats.ppi_difference(marks, [t.prediction(counted) for t in ta], [t.y for t in ta],
                                [t.audited for t in ta], [t.prediction(counted) for t in tb],
                                [t.y for t in tb], [t.audited for t in tb], inclusion)


def _verdict(a: str, b: str, d: stats.CorrectedInterval, p: float, significant: bool, basis: str,
             several: bool) -> str:
    if not math.isfinite(d.estimate):
        return (f"{a} vs {b}: not established: no audited episode the rater labelled has people's label yet, "
                f"so its errors are unmeasured (on {basis}).")
    est, lo, hi = points(d.estimate, d.lo, d.hi)
    test = f"{'Holm-adjusted ' if several else ''}t test over {d.marks} marks p {fmt_p(p)}"
    figures = f"corrected difference {est} points, {100 * d.level:g}% CI {lo} to {hi}, {test}"
    if significant:
        better, worse = (a, b) if d.estimate > 0 else (b, a)
        return f"{better} better than {worse}: {figures}; these rest on {basis}."
    return f"{a} vs {b}: not established at this n ({figures}; on {basis})."


def corrected_section(data: OutcomeSet) -> CorrectedSection | None:
    """None unless the campaign has an audit sample (`OutcomeSet.audit`)."""
    audit = data.audit
    if audit is None or not audit.trial_ids:
        return None
    human = _human(data)
    trials, waiting = _trials(data, audit, human)
    labelled = sum(t.audited for t in trials)
    rated = [t for t in trials if t.audited and data.auto_labels.get(t.outcome.episode_id or "") in ("success", "failure")]
    agreement = stats.binary_agreement([t.f == 1 for t in rated], [t.y == 1 for t in rated])
    disagreements = sum(t.f != t.y for t in rated)
    counted = not rated or disagreements <= RATER_DISAGREEMENT_BOUND * len(rated)
    sure = sum(t.sure for t in trials)
    pi = len(rated) / sure if rated else None     # rated: the audited trials among the `sure`
    rates = []
    for p in data.policies:
        mine = [t for t in trials if t.outcome.policy == p]
        rates.append((p, stats.ppi_rate([t.outcome.layout for t in mine], [t.prediction(counted) for t in mine],
                                        [t.y for t in mine], [t.audited for t in mine], [not t.sure for t in mine])))
    by_key: dict[tuple[tuple[str, int], str], _Trial] = {(t.outcome.key, t.outcome.policy): t for t in trials}
    raw = []
    for a, b in combinations(data.policies, 2):
        keys = sorted({k for k, p in by_key if p == a} & {k for k, p in by_key if p == b})
        ta, tb = [by_key[(k, a)] for k in keys], [by_key[(k, b)] for k in keys]
        raw.append((a, b, _difference([k[0] for k in keys], ta, tb, counted, pi)))
    adjusted = stats.holm([d.p_value for _, _, d in raw]) if raw else []
    section = CorrectedSection(counted, tuple(rates), (), audit.population, len(audit.trial_ids), labelled, pi,
                               len(rated), disagreements, agreement,
                               episodes=sum(1 for o in data.outcomes if o.state == "done" and o.episode_id),
                               human_labelled=sum(1 for o in data.outcomes if o.state == "done" and o.episode_id
                                                  and o.episode_id in _labelled_by_people(data)),
                               unsure=sum(1 for o in data.outcomes if o.state == "done" and o.episode_id
                                          and data.auto_labels.get(o.episode_id, "unsure") not in ("success", "failure")),
                               waiting=waiting, alpha=data.alpha, fraction=float(audit.fraction), rater_sure=sure)
    pairs = []
    for (a, b, d), p_holm in zip(raw, adjusted, strict=True):
        significant = d.items > 0 and p_holm <= data.alpha
        pairs.append(CorrectedPair(a, b, d, p_holm, significant, _verdict(a, b, d, p_holm, significant, section.basis,
                                                                          len(raw) > 1)))
    return replace(section, pairs=tuple(pairs))


def _labelled_by_people(data: OutcomeSet) -> set[str]:
    return {label.episode_id for label in data.human_labels if label.judge != AUTO}


def corrected_notes(section: CorrectedSection) -> tuple[str, ...]:
    """Beside the verdict: what decided, and that the McNemar figures are the uncorrected labels'."""
    notes = ["The verdict is the corrected analysis's (judging.audit): the McNemar figures and intervals "
             "in the comparison below are on the labels as voted (the rater where it was sure, people "
             "elsewhere), uncorrected, for reference only."]
    s = section
    if s.audit_labelled < s.audit_size:
        notes.append(f"The audit is incomplete: people have labelled {s.audit_labelled} of its {s.audit_size} trials; "
                     "the corrected figures use those (a uniform random subset: the queue hands them out in random "
                     "order)" + (f", {s.audit_rated} of the {s.rater_sure} episodes the rater labelled (inclusion "
                                 f"probability {s.inclusion:.3f})." if s.inclusion is not None else "."))
    if s.inclusion is None and s.rater_sure:
        notes.append(f"No audited episode the rater labelled has people's label yet (0 of its {s.rater_sure}): its "
                     "errors are unmeasured, so no corrected difference is established and each corrected rate's "
                     "interval spans every error the rater could have.")
    return tuple(notes)


def corrected_lines(section: CorrectedSection) -> list[str]:
    """The section's lines (text, Markdown and HTML)."""
    s = section
    out = [f"Estimates rest on {s.basis}."]
    for p, iv in s.rates:
        out.append(f"{p}: corrected success rate {iv.estimate:.3f}, {100 * iv.level:g}% CI {iv.lo:.3f} to {iv.hi:.3f} "
                   f"over {iv.marks} marks ({iv.items} trials, {iv.audited} audited)")
    for c in s.pairs:
        out.append(c.verdict)
    ci = s.agreement["kappa_ci95"]
    kappa_ci = "n/a" if ci[0] != ci[0] else f"{ci[0]:.2f} to {ci[1]:.2f}"
    if s.agreement["kappa_ci_coverage"] is not None:
        kappa_ci += (f"; with fewer than {KAPPA_FEW_LABELS} of one label its coverage was measured as low as "
                     f"{s.agreement['kappa_ci_coverage']:.2f}")
    out.append(f"The rater against people on the audit: kappa {kappa_text(s.agreement['kappa'])} (95% CI {kappa_ci}) "
               f"on {s.audit_rated} audited episodes it labelled; disagreements {s.disagreements} "
               f"(bound {100 * RATER_DISAGREEMENT_BOUND:g}%: {'within, the rater is counted' if s.counted else 'exceeded, people only'})")
    out.append(f"People labelled {s.human_labelled} of {s.episodes} episodes "
               f"({s.human_labelled / s.episodes if s.episodes else 0:.2f} labels per episode by people): "
               f"{s.unsure} the rater was unsure of, and the audit of {s.audit_size} of {s.population} trials "
               f"drawn at freeze time ({s.audit_labelled} labelled)"
               + (f"; {s.waiting} unsure episode{'s wait' if s.waiting != 1 else ' waits'} for people and "
                  f"{'are' if s.waiting != 1 else 'is'} left out" if s.waiting else ""))
    return out


def _interval_json(iv: stats.CorrectedInterval) -> dict[str, Any]:
    # one mark: no spread across marks to estimate (se inf); JSON has no infinity
    return {"estimate": iv.estimate if math.isfinite(iv.estimate) else None, "ci95": [iv.lo, iv.hi], "se": iv.se if math.isfinite(iv.se) else None,
            "marks": iv.marks, "items": iv.items,
            "audited": iv.audited, "unit": "mark", "method": iv.method}


def corrected_json(section: CorrectedSection | None) -> dict[str, Any] | None:
    """The report JSON's `corrected` (None: no audit)."""
    if section is None:
        return None
    s = section
    kappa = s.agreement["kappa"]
    ci = s.agreement["kappa_ci95"]
    return {
        "decides": s.decides, "rater_counted": s.counted, "basis": s.basis,
        "disagreement_bound": RATER_DISAGREEMENT_BOUND, "estimator": "ppi" if s.counted else "human-only (ipw)",
        "rates": {p: _interval_json(iv) for p, iv in s.rates},
        # null: the rates' intervals covered 0.93 or more at every measured point (docs/statistics.md)
        "rates_ci_coverage": None,
        "comparisons": [{"a": c.a, "b": c.b, **_interval_json(c.difference), "p": c.p, "p_raw": c.difference.p_value,
                         "test": "t over marks", "significant": c.significant, "verdict": c.verdict} for c in s.pairs],
        "audit": {"fraction": s.fraction, "population": s.population, "size": s.audit_size, "labelled": s.audit_labelled,
                  "inclusion_probability": s.inclusion, "rated": s.audit_rated, "disagreements": s.disagreements,
                  "kappa": None if kappa != kappa else kappa,
                  "kappa_ci95": None if ci[0] != ci[0] else list(ci), "table": s.agreement["table"]},
        "episodes": s.episodes, "labelled_by_people": s.human_labelled, "rater_unsure": s.unsure,
        "waiting_for_people": s.waiting,
        "people_labels_per_episode": s.human_labelled / s.episodes if s.episodes else None,
    }
