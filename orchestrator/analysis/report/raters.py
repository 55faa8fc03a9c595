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
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet, consensus_label

AUTO = "auto"


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
