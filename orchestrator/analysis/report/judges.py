"""The report's judges section: labels per judge, Cohen's and Fleiss' kappas, the disagreements,
and each judge's accuracy against physics where it is known (`model.JudgeSection`)."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import OutcomeSet
from orchestrator.analysis.report.model import (
    Disagreement,
    JudgeAccuracy,
    JudgeSection,
    KappaRow,
)


def judge_section(data: OutcomeSet) -> JudgeSection | None:
    if not data.human_labels and not data.physics:
        return None
    judges = tuple(sorted({j.judge for j in data.human_labels}))
    if not judges:
        return None
    by_ep: dict[str, dict[str, str]] = {}
    for lab in data.human_labels:
        by_ep.setdefault(lab.episode_id, {})[lab.judge] = lab.label
    where = {o.episode_id: o for o in data.outcomes if o.episode_id}
    kappas = []
    for j1, j2 in combinations(judges, 2):
        items = [(v[j1], v[j2]) for v in by_ep.values() if j1 in v and j2 in v]
        if items:
            kappas.append(KappaRow(j1, j2, len(items), stats.cohen_kappa([x for x, _ in items], [y for _, y in items]),
                                   sum(1 for x, y in items if x == y) / len(items)))
    fleiss = None
    fleiss_items = 0
    if len(judges) >= 2:
        cats = ("success", "failure", "unsure")
        rows = [[sum(1 for j in judges if v[j] == c) for c in cats]
                for v in by_ep.values() if all(j in v for j in judges)]
        if rows:
            fleiss, fleiss_items = stats.fleiss_kappa(rows), len(rows)
    disagreements = []
    def slot_of(item: tuple[str, dict[str, str]]) -> int:
        o = where.get(item[0])
        return o.slot if o is not None and o.slot is not None else 0

    for ep, v in sorted(by_ep.items(), key=slot_of):
        if len(v) >= 2 and len(set(v.values())) > 1:
            o = where.get(ep)
            disagreements.append(Disagreement(ep, o.layout if o else "?", o.repeat if o else 0,
                                              o.policy if o else "?", tuple(sorted(v.items())),
                                              data.physics.get(ep)))
    accuracy = []
    if data.physics:
        for j in judges:
            agree = compared = unsure = fs = ff = 0
            for ep, v in by_ep.items():
                if j not in v or ep not in data.physics:
                    continue
                if v[j] == "unsure":
                    unsure += 1
                    continue
                compared += 1
                said = v[j] == "success"
                truth = data.physics[ep]
                agree += said == truth
                fs += said and not truth
                ff += (not said) and truth
            accuracy.append(JudgeAccuracy(j, agree, compared, unsure, fs, ff))
    per_judge = Counter(j.judge for j in data.human_labels)
    return JudgeSection(judges, tuple(sorted(per_judge.items())), tuple(kappas), fleiss, fleiss_items,
                        tuple(disagreements), tuple(accuracy))
