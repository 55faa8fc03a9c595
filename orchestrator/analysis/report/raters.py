"""How far each rater can be trusted: agreement with physics and with the human consensus.

For every human judge and for the automatic rater `auto`, against each reference that exists:
- `physics`: the simulator's own success test (simulated and twin campaigns);
- `consensus`: the majority of the *other* human judges (ties are unsure and left out; a
  judge is never compared with a consensus that contains their own vote; `auto` with the
  majority of all human judges).
Per pair: the 2x2 confusion table (rater x reference), the raw agreement, Cohen's kappa and its
95% interval (`stats.binary_agreement`), over the episodes both labelled success or failure;
the rater's `unsure` labels are counted apart (its abstention rate: unsure / all the episodes the
reference decided). JSON: `rater_agreement` (a list of rows).

The headline flags a human judge whose labels disagree with a reference on `FLAG_RATE` or more
of the episodes both decided (`judge_flags`: a line under the verdict in every format, and
`judge_flags` in the JSON): a judge's mislabels move outcomes, and on a simulated campaign,
where physics is known, they measure how far the judges of a real campaign can be trusted. The
automatic rater is advisory and is not flagged (its rows stay in the section).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet, consensus_label
from orchestrator.analysis.report.format import kappa_text
from orchestrator.analysis.stats.agreement import KAPPA_FEW_LABELS

AUTO = "auto"
FLAG_RATE = 0.05    # a judge disagreeing with a reference on this share of episodes or more is flagged


@dataclass(frozen=True)
class RaterAgreement:
    rater: str
    reference: str                   # "physics" | "consensus"
    items: int
    unsure: int                      # the rater's unsure labels on episodes the reference decided
    table: dict[str, int]            # success_success, success_failure, failure_success, failure_failure
    agreement: float
    kappa: float
    kappa_ci95: tuple[float, float]
    kappa_ci_coverage: float | None = None   # the interval's lowest measured coverage when below 0.93


def _row(rater: str, reference: str, said: dict[str, str], truth: dict[str, bool]) -> RaterAgreement | None:
    common = [ep for ep in said if ep in truth]
    decided = [ep for ep in common if said[ep] in ("success", "failure")]
    if not decided:
        return None
    result = stats.binary_agreement([said[ep] == "success" for ep in decided], [truth[ep] for ep in decided])
    return RaterAgreement(rater, reference, result["items"], len(common) - len(decided), result["table"],
                          result["agreement"], result["kappa"], tuple(result["kappa_ci95"]),
                          result["kappa_ci_coverage"])


def rater_agreement(data: OutcomeSet) -> tuple[RaterAgreement, ...]:
    """Rows for every rater (human judges, then `auto`) and reference (physics, consensus)."""
    by_judge: dict[str, dict[str, str]] = {}
    for label in data.human_labels:
        if label.judge != AUTO:
            by_judge.setdefault(label.judge, {})[label.episode_id] = label.label
    raters = dict(sorted(by_judge.items()))
    if data.auto_labels:
        raters[AUTO] = dict(data.auto_labels)
    rows = []
    for rater, said in raters.items():
        if data.physics:
            rows.append(_row(rater, "physics", said, data.physics))
        others = [labels for judge, labels in by_judge.items() if judge != rater]
        if others:
            consensus = {}
            for ep in set().union(*others):
                verdict = consensus_label([labels[ep] for labels in others if ep in labels])
                if verdict != "unsure":
                    consensus[ep] = verdict == "success"
            rows.append(_row(rater, "consensus", said, consensus))
    return tuple(r for r in rows if r is not None)


@dataclass(frozen=True)
class JudgeFlag:
    """A human judge disagreeing with a reference on `FLAG_RATE` or more of the episodes both decided."""

    judge: str
    reference: str                   # "physics" | "consensus" (of the other human judges)
    disagree: int
    items: int

    def text(self) -> str:
        against = "physics" if self.reference == "physics" else "the other judges' consensus"
        return (f"{self.judge} disagrees with {against} on {self.disagree} of {self.items} episodes "
                f"({100 * self.disagree / self.items:.0f}%; flagged at {100 * FLAG_RATE:g}% or more): "
                "see the raters section")

    def to_json(self) -> dict:
        return {"judge": self.judge, "reference": self.reference, "disagree": self.disagree, "items": self.items,
                "rate": self.disagree / self.items, "flag_rate": FLAG_RATE}


def judge_flags(rows: tuple[RaterAgreement, ...]) -> tuple[JudgeFlag, ...]:
    """The rows of human judges at or above `FLAG_RATE` of disagreement (counted from the table)."""
    out = []
    for r in rows:
        disagree = r.table["success_failure"] + r.table["failure_success"]
        if r.rater != AUTO and r.items and disagree >= FLAG_RATE * r.items:
            out.append(JudgeFlag(r.rater, r.reference, disagree, r.items))
    return tuple(out)


def rater_lines(rows: tuple[RaterAgreement, ...], still: tuple[tuple[str, str, str], ...]) -> list[str]:
    """The raters section's lines (text, Markdown and HTML): each row, then the episodes in which
    the arm never moved."""
    out = []
    for r in rows:
        t = r.table
        ci = "n/a" if r.kappa_ci95[0] != r.kappa_ci95[0] else f"{r.kappa_ci95[0]:.2f} to {r.kappa_ci95[1]:.2f}"
        if r.kappa_ci_coverage is not None:
            ci += (f"; with fewer than {KAPPA_FEW_LABELS} of one label its coverage was measured as low as "
                   f"{r.kappa_ci_coverage:.2f}")
        out.append(f"{r.rater} vs {r.reference}: kappa {kappa_text(r.kappa)} (95% CI {ci}), agreement "
                   f"{100 * r.agreement:.0f}% on {r.items} episodes; said success/reference success "
                   f"{t['success_success']}, success/failure {t['success_failure']}, failure/success "
                   f"{t['failure_success']}, failure/failure {t['failure_failure']}"
                   + (f"; abstained (unsure) on {r.unsure} of {r.items + r.unsure} "
                      f"({100 * r.unsure / (r.items + r.unsure):.0f}%); the agreement is on the episodes it rated"
                      if r.unsure else ""))
    for episode, layout, policy in still:
        out.append(f"the arm never moved in episode {episode} (layout {layout}, policy {policy}): "
                   "check the start state and the policy")
    return out
