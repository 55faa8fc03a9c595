"""The report's aborts section: every aborted attempt by the class of its cause, what the
protocol's pre-registered `aborts` rules made of it, and whether abort rates differ between
policies.

Classes (`run.bookkeeping.abort_class`): `policy`, `operator_unsafe`, `operator_misplaced`,
`operator_other`, `rig`, `invalid_start` (a judge sent the trial back), `interrupted` (Ctrl-C, a
killed process), `unclassified` (attempts of a store older than schema 3). Each class lists its
causes with their counts (`policy: non-finite action 3, exception 1`), as the store recorded
them (`store.abort_causes`; `unrecorded` for a row that has none). An abort the rules
map to `failure` scores the trial as a failure of the policy that ran (it is in the paired
tables); `excluded` is a trial past its re-run limit (left out, listed under unpaired layouts).

The abort-rate test. For each policy, n = its trials that were attempted and k = those with at
least one abort other than an interruption; every pair of policies is compared with Fisher's
exact test (two-sided, Fisher 1935) on (k1, n1 - k1; k2, n2 - k2), and the p-values are
Holm-adjusted over the pairs (Holm 1979). Under the randomised, interleaved schedule the
trials of the two policies face the same marks in random order, so under "abort risk does
not depend on the policy" the split of aborted trials between them is hypergeometric given
the margins, which is Fisher's null. A re-run class that differs between policies is the
selection bias the `failure` rules exist to prevent: the report warns when the adjusted p is
at most alpha.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from orchestrator.analysis import stats
from orchestrator.analysis.outcomes import UNRECORDED, OutcomeSet, TrialOutcome
from orchestrator.analysis.report.format import p_eq
from orchestrator.store.abort_answers import ALARM_CAUSES, UNANSWERED_CLASS

NOT_A_CAUSE = "interrupted"
NOT_ANSWERED = "not answered yet"


@dataclass(frozen=True)
class AbortRow:
    policy: str
    trials: int                                  # trials of this policy that were attempted
    trials_with_abort: int                       # ... with at least one abort that is not an interruption
    by_class: tuple[tuple[str, int], ...]        # aborted attempts per class
    by_cause: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]   # per class (as by_class): per cause
    scored_failures: int                         # trials an abort scored as this policy's failure
    excluded: int                                # trials left out at the re-run limit
    # per abort that asks a person (`class: cause`, store.abort_answers): the answers' gist, counted
    answers: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


@dataclass(frozen=True)
class AbortTest:
    a: str
    b: str
    fisher_p: float
    holm_p: float


@dataclass(frozen=True)
class AbortSection:
    rules: dict[str, Any]
    rows: tuple[AbortRow, ...]
    tests: tuple[AbortTest, ...]
    alpha: float
    warnings: tuple[str, ...]


def build_aborts(data: OutcomeSet) -> AbortSection | None:
    """The section for a campaign (None for an outcomes CSV, which records no attempts)."""
    if data.abort_rules is None:
        return None
    rows = []
    for p in data.policies:
        mine = [o for o in data.outcomes if o.policy == p and (o.state == "done" or o.abort_classes)]
        classes = Counter(c for o in mine for c in o.abort_classes)
        by_class = tuple(sorted(classes.items(), key=_most_first))
        rows.append(AbortRow(
            policy=p, trials=len(mine),
            trials_with_abort=sum(1 for o in mine if any(c != NOT_A_CAUSE for c in o.abort_classes)),
            by_class=by_class, by_cause=_causes(mine, [c for c, _ in by_class]),
            scored_failures=sum(1 for o in mine if o.settled == "failure"),
            excluded=sum(1 for o in mine if o.settled == "excluded"), answers=_answers(mine)))
    pairs = list(combinations(rows, 2))
    raw = [stats.fisher_exact(x.trials_with_abort, x.trials, y.trials_with_abort, y.trials) for x, y in pairs]
    adjusted = stats.holm(raw) if raw else []
    tests = tuple(AbortTest(x.policy, y.policy, p, h) for (x, y), p, h in zip(pairs, raw, adjusted, strict=True))
    return AbortSection(dict(data.abort_rules), tuple(rows), tests, data.alpha,
                        tuple(_warnings(rows, tests, dict(data.abort_rules), data.alpha)))


def _most_first(kv: tuple[str, int]) -> tuple[int, str]:
    return (-kv[1], kv[0])


def _causes(mine: list[TrialOutcome], classes: list[str]) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """Per class (in `classes`' order), the count of each cause, most frequent first (an abort
    given no cause, as an outcome built without one, counts as `unrecorded`)."""
    counts: Counter[tuple[str, str]] = Counter()
    for o in mine:
        causes = o.abort_causes + (UNRECORDED,) * (len(o.abort_classes) - len(o.abort_causes))
        counts.update(zip(o.abort_classes, causes, strict=False))
    return tuple((c, tuple(sorted(((why, n) for (k, why), n in counts.items() if k == c), key=_most_first)))
                 for c in classes)


def _answers(mine: list[TrialOutcome]) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """For the aborts that ask a person (a stop whose reason went unanswered, a servo overload or
    overcurrent), `class: cause` with each answer's gist (its text before the note: `unsafe
    motion`, `the hardware (supply, cable, servo)`) counted, `not answered yet` for none."""
    counts: Counter[tuple[str, str]] = Counter()
    for o in mine:
        answers = o.abort_answers + (None,) * (len(o.abort_classes) - len(o.abort_answers))
        for cls, cause, answer in zip(o.abort_classes, o.abort_causes, answers, strict=False):
            if cls == UNANSWERED_CLASS or cause in ALARM_CAUSES:
                counts[(f"{cls}: {cause}", answer.split(": ")[0] if answer else NOT_ANSWERED)] += 1
    asked = sorted({k for k, _ in counts})
    return tuple((k, tuple(sorted(((a, n) for (kk, a), n in counts.items() if kk == k), key=_most_first)))
                 for k in asked)


def describe_answers(row: AbortRow) -> str:
    """`operator_unanswered: interrupt: unsafe motion 1, not answered yet 1` (per abort that asks
    a person), or `none`."""
    return "; ".join(f"{k}: " + ", ".join(f"{a} {n}" for a, n in answers) for k, answers in row.answers) or "none"


def _warnings(rows: list[AbortRow], tests: tuple[AbortTest, ...], rules: dict[str, Any], alpha: float) -> list[str]:
    out = []
    by = {r.policy: r for r in rows}
    for r in rows:
        if r.scored_failures:
            classes = ", ".join(f"{c} ({rules.get(c)})" for c, _ in r.by_class if rules.get(c) == "failure")
            out.append(f"{r.scored_failures} trial{'s' if r.scored_failures != 1 else ''} of {r.policy} "
                       f"ended in an abort that the protocol counts as {r.policy}'s failure "
                       f"(aborts rules: {classes}); they are failures in every table")
    for t in tests:
        if t.holm_p <= alpha:
            x, y = by[t.a], by[t.b]
            out.append(f"abort rates differ between {t.a} and {t.b}: {x.trials_with_abort}/{x.trials} vs "
                       f"{y.trials_with_abort}/{y.trials} trials with an abort (Fisher exact p {p_eq(t.fisher_p)}, "
                       f"Holm-adjusted {p_eq(t.holm_p)}); " + _what_aborts_did(x, y, rules))
    limit = [r for r in rows if r.excluded]
    for r in limit:
        limits = f"aborts.max_reruns = {rules.get('max_reruns')}" + (
            f", max_interruptions = {rules['max_interruptions']}" if "max_interruptions" in rules else "")
        out.append(f"{r.excluded} trial{'s' if r.excluded != 1 else ''} of {r.policy} reached the re-run "
                   f"limit ({limits}) and {'are' if r.excluded != 1 else 'is'} left out (see 'Unpaired layouts')")
    return out


def _what_aborts_did(x: AbortRow, y: AbortRow, rules: dict[str, Any]) -> str:
    """What the more often aborted policy's aborts did to the comparison: re-run aborts are not
    outcomes (the comparison covers its clean runs), aborts the rules count as failures are
    outcomes (in every table), both when its aborts were of both kinds."""
    more = x if x.trials_with_abort * y.trials >= y.trials_with_abort * x.trials else y
    rerun = sum(n for c, n in more.by_class if rules.get(c) != "failure" and c != NOT_A_CAUSE)
    if not more.scored_failures:
        return ("aborts that were re-run are not outcomes, so the comparison covers only the clean runs "
                f"of {more.policy}, the more often aborted policy")
    scored = (f"{more.scored_failures} trial{'s' if more.scored_failures != 1 else ''} of {more.policy} "
              f"(the more often aborted policy) {'were' if more.scored_failures != 1 else 'was'} scored as its "
              "failure by the aborts rules and count in the comparison")
    if not rerun:
        return scored + ": the difference in aborts is part of the difference in success"
    return (scored + f"; {rerun} of its aborted attempts were re-run, are not outcomes, and for those "
            "trials the comparison covers only its clean runs")


def describe_rules(rules: dict[str, Any]) -> str:
    counted = [c for c, v in rules.items() if v == "failure"]
    rerun = [c for c, v in rules.items() if v == "rerun"]
    text = (f"pre-registered: {', '.join(counted) or 'none'} count as a failure of the policy that ran; "
            f"{', '.join(rerun) or 'none'} are re-run (at most {rules.get('max_reruns')} times)")
    if "overload" in rules:   # a protocol frozen before these rules has neither
        text += (f"; a servo overload is class {rules['overload']}; interruptions are re-run at most "
                 f"{rules.get('max_interruptions')} times")
    return text


def describe_causes(row: AbortRow) -> str:
    """`policy: non-finite action 3, exception 1; rig: camera 1` (classes and causes most
    frequent first), or `none`."""
    return "; ".join(f"{c}: " + ", ".join(f"{why} {n}" for why, n in causes) for c, causes in row.by_cause) or "none"
