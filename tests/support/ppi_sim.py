"""Seeded simulation of a campaign judged by an imperfect automatic rater plus a random human
audit, for the coverage of the corrected intervals (`stats.ppi`): the tests run a few points,
bench/ppi_coverage.py the grid whose figures docs/statistics.md gives.

The model (per replicate). K marks, `repeats` repeats, two policies (A, B; `extra` adds C, D, ...
with those logits). Mark m has a difficulty
u_m ~ N(0, mark_sd^2) shared by its repeats and by both policies (the correlation that makes the
mark the unit). Trial i of policy P on mark m has a latent lift margin s = beta_P + u_m + e,
e ~ Logistic(0, 1), and people label it a success when s > 0 (the truth people would give:
P(success | mark) = sigmoid(beta_P + u_m)). The rater reads s' = s + rater_bias + eta, eta ~
N(0, rater_noise^2), says success when s' > band, failure when s' < -band and unsure in between:
its errors and abstentions fall on near-threshold episodes, so on marks whose success rate is
near 1/2 (errors correlated with difficulty); rater_bias > 0 makes it call failures successes.
The audit: exactly k = `design.audit.audit_size(audit, N)` of the N = 2 K repeats trials, drawn without replacement.
The estimand of a policy's rate is E_u[sigmoid(beta_P + u)] (Gauss-Hermite quadrature), of the
difference the two rates' difference: over the population of marks, not the K drawn.
An unfinished campaign: each trial is not run with probability `missing` (so marks are
incomplete and pairs broken), and each episode people must label (unsure or audited) still waits
for them with probability `waiting` (the judge queue interrupted: a uniform random subset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from orchestrator.analysis import stats
from orchestrator.design.audit import audit_size

ALPHA = 0.05


@dataclass(frozen=True)
class Scenario:
    marks: int = 30
    repeats: int = 3
    logit_a: float = 1.0
    logit_b: float = 0.0
    mark_sd: float = 1.0
    rater_noise: float = 0.5
    rater_bias: float = 0.0
    band: float = 0.4
    audit: float = 0.2
    extra: tuple[float, ...] = ()     # logits of policies C, D, ...
    missing: float = 0.0              # share of trials not run
    waiting: float = 0.0              # share of episodes to label that people have not labelled yet

    @property
    def logits(self) -> tuple[float, ...]:
        return (self.logit_a, self.logit_b, *self.extra)


@dataclass(frozen=True)
class Replicate:
    """One simulated campaign: arrays of shape (policies, K, repeats), policy A first."""

    truth: np.ndarray          # people's label (bool)
    rater: np.ndarray          # 1 success, 0 failure, -1 unsure
    audited: np.ndarray        # bool
    run: np.ndarray | None = None        # bool: the trial ran (None: all)
    waits: np.ndarray | None = None      # bool: people have not labelled it yet (None: none waits)

    @property
    def prediction(self) -> np.ndarray:
        """f: the rater's label where sure, people's where unsure."""
        return np.where(self.rater < 0, self.truth, self.rater == 1).astype(float)

    def human(self) -> np.ndarray:
        """People's label where they labelled (unsure or audited), nan elsewhere."""
        return np.where((self.rater < 0) | self.audited, self.truth.astype(float), np.nan)


def true_rate(logit: float, mark_sd: float) -> float:
    """E_u[sigmoid(logit + u)], u ~ N(0, mark_sd^2), by 60-point Gauss-Hermite quadrature."""
    x, w = np.polynomial.hermite_e.hermegauss(60)
    return float(np.sum(w / (1 + np.exp(-(logit + mark_sd * x)))) / math.sqrt(2 * math.pi))


def simulate(sc: Scenario, rng: np.random.Generator) -> Replicate:
    shape = (len(sc.logits), sc.marks, sc.repeats)
    u = rng.normal(0, sc.mark_sd, sc.marks)[None, :, None]
    beta = np.array(sc.logits)[:, None, None]
    s = beta + u + rng.logistic(0, 1, shape)
    seen = s + sc.rater_bias + rng.normal(0, sc.rater_noise, shape)
    rater = np.where(seen > sc.band, 1, np.where(seen < -sc.band, 0, -1))
    n = int(np.prod(shape))
    audited = np.zeros(n, dtype=bool)
    audited[rng.choice(n, audit_size(sc.audit, n), replace=False)] = True
    run = rng.random(shape) >= sc.missing if sc.missing else None
    waits = rng.random(shape) < sc.waiting if sc.waiting else None
    return Replicate(s > 0, rater, audited.reshape(shape), run, waits)


def uncorrected_rate(rep: Replicate, policy: int = 0) -> stats.Interval:
    """The positive control: the rater's labels alone (people's only where it was unsure), with
    the clustered Wilson interval as if they were people's labels."""
    f = rep.prediction[policy]
    return stats.clustered_wilson([(int(row.sum()), len(row)) for row in f])


def coverage(sc: Scenario, runs: int, seed: int) -> dict[str, float]:
    """Through the report's own path (`report.corrected.corrected_section` on the replicate as an
    `OutcomeSet`, the disagreement bound and its fallback included): the coverage of policy A's
    and B's rate intervals (`rate_a`, `rate_b`; `rate_min` the lowest over every policy), of the
    A - B difference's (`difference`; `differences_min` the lowest over every pair), the share of
    replicates calling A vs B "better" (`reject`: under the null its type-I error, else its
    power) and calling any pair of equal rates "better" (`false_better`: the family-wise error,
    Holm over the pairs), plus the positive control's coverage, the share that fell back to
    people's labels only, people's labels per episode and A's mean interval width."""
    from orchestrator.analysis.report.corrected import corrected_section

    rng = np.random.default_rng(seed)
    truth = [true_rate(logit, sc.mark_sd) for logit in sc.logits]
    hits = dict.fromkeys(("rate_a", "rate_b", "difference", "reject", "false_better", "uncorrected_a", "fallback"), 0)
    per_rate, per_pair = np.zeros(len(truth)), {}
    labelled = width = 0.0
    for _ in range(runs):
        rep = simulate(sc, rng)
        section = corrected_section(outcome_set(rep, sc.audit, ALPHA))
        assert section is not None
        rates = [iv for _, iv in section.rates]
        per_rate += [iv.contains(t) for iv, t in zip(rates, truth, strict=True)]
        hits["rate_a"] += rates[0].contains(truth[0])
        hits["rate_b"] += rates[1].contains(truth[1])
        false_better = False
        for pair in section.pairs:
            i, j = ord(pair.a) - ord("A"), ord(pair.b) - ord("A")
            per_pair[(i, j)] = per_pair.get((i, j), 0) + pair.difference.contains(truth[i] - truth[j])
            false_better |= pair.significant and abs(truth[i] - truth[j]) < 1e-12
        first = section.pairs[0]
        hits["difference"] += first.difference.contains(truth[0] - truth[1])
        hits["reject"] += first.significant
        hits["false_better"] += false_better
        hits["uncorrected_a"] += uncorrected_rate(rep).contains(truth[0])
        hits["fallback"] += not section.counted
        labelled += section.human_labelled / section.episodes
        width += rates[0].hi - rates[0].lo
    out = {key: value / runs for key, value in hits.items()}
    out["rate_min"] = float(per_rate.min()) / runs
    out["differences_min"] = min(per_pair.values()) / runs
    out["human_per_episode"] = labelled / runs
    out["width_a"] = width / runs
    return out


@dataclass(frozen=True)
class AuditDouble:
    """The audit sample's shape (trial ids, fraction, population, seed; trial ids are slots in decimal)."""

    trial_ids: frozenset[str]
    fraction: float
    population: int
    seed: str = "0"


def outcome_set(rep: Replicate, fraction: float, alpha: float = 0.05):
    """The replicate as a report's input: outcomes as people's consensus with the counted rater
    voting (what `outcomes_from_store` gives), the truth as physics, the rater's labels, people's
    labels on the unsure and audited episodes that do not wait (judge `ann`), the audit sample
    over every scheduled trial; a trial that did not run is `pending` with no episode."""
    from orchestrator.analysis.outcomes import JudgeLabel, OutcomeSet, TrialOutcome

    outcomes, auto, human, audited, physics = [], {}, [], set(), {}
    names = {1: "success", 0: "failure", -1: "unsure"}
    policies = tuple(chr(ord("A") + p) for p in range(rep.truth.shape[0]))
    slot = 0
    for m in range(rep.truth.shape[1]):
        for r in range(rep.truth.shape[2]):
            for p, label in enumerate(policies):
                ep = f"e{slot}"
                if rep.audited[p, m, r]:
                    audited.add(str(slot))
                if rep.run is not None and not rep.run[p, m, r]:
                    outcomes.append(TrialOutcome(layout=f"m{m}", repeat=r, policy=label, success=None, slot=slot,
                                                 position=p, state="pending"))
                    slot += 1
                    continue
                rater, truth = int(rep.rater[p, m, r]), bool(rep.truth[p, m, r])
                auto[ep] = names[rater]
                physics[ep] = truth
                queued = rater < 0 or bool(rep.audited[p, m, r])
                labelled = queued and not (rep.waits is not None and rep.waits[p, m, r])
                if labelled:
                    human.append(JudgeLabel(ep, "ann", "success" if truth else "failure"))
                voted = truth if labelled and (rater < 0 or truth == (rater == 1)) else (
                    None if labelled or rater < 0 else rater == 1)
                outcomes.append(TrialOutcome(layout=f"m{m}", repeat=r, policy=label, success=voted, slot=slot,
                                             position=p, episode_id=ep))
                slot += 1
    return OutcomeSet(outcomes=tuple(outcomes), policies=policies, source="memory", label_source="consensus",
                      alpha=alpha, human_labels=tuple(human), auto_labels=auto, physics=physics,
                      audit=AuditDouble(frozenset(audited), fraction, slot))
