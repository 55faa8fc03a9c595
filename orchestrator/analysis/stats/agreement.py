"""Agreement between judges: Cohen's and Fleiss' kappa.

References: Cohen J (1960) Educ Psychol Meas 20:37-46; Fleiss JL (1971) Psychol Bull 76:378-382.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def cohen_kappa(labels_1: Sequence, labels_2: Sequence) -> float:
    """Cohen's kappa (Cohen 1960) for two raters on the same items:
    kappa = (p_o - p_e) / (1 - p_e), p_o the observed agreement, p_e = sum_k p1_k p2_k the
    agreement expected from the raters' marginal rates. Undefined (NaN) when p_e = 1: both raters
    gave every item one and the same class, so kappa is 0/0 (their full agreement is no evidence
    of skill beyond chance; a report says "undefined", never 1.00)."""
    if len(labels_1) != len(labels_2):
        raise ValueError("both raters must label the same items")
    if not labels_1:
        return float("nan")
    cats = sorted(set(labels_1) | set(labels_2), key=str)
    index = {c: i for i, c in enumerate(cats)}
    m = np.zeros((len(cats), len(cats)))
    for x, y in zip(labels_1, labels_2, strict=True):
        m[index[x], index[y]] += 1
    m /= m.sum()
    po = float(np.trace(m))
    pe = float(np.dot(m.sum(axis=1), m.sum(axis=0)))
    if pe >= 1.0:
        return float("nan")
    return (po - pe) / (1 - pe)


def fleiss_kappa(counts: np.ndarray | Sequence[Sequence[int]]) -> float:
    """Fleiss' kappa (Fleiss 1971); counts is items x categories, each row summing to the same
    number of raters r: P_i = (sum_j n_ij^2 - r) / (r (r - 1)), P-bar = mean P_i,
    p_j = sum_i n_ij / (N r), P_e = sum p_j^2, kappa = (P-bar - P_e) / (1 - P_e); undefined (NaN)
    when P_e = 1 (every rating one class)."""
    x = np.asarray(counts, dtype=float)
    r = x.sum(axis=1)
    if x.ndim != 2 or x.shape[0] == 0 or not np.allclose(r, r[0]) or r[0] < 2:
        raise ValueError("Fleiss' kappa needs items x categories with the same number (>= 2) of raters per item")
    r0 = r[0]
    p_i = (np.sum(x * x, axis=1) - r0) / (r0 * (r0 - 1))
    p_bar = p_i.mean()
    p_j = x.sum(axis=0) / x.sum()
    p_e = float(np.sum(p_j ** 2))
    if p_e >= 1.0:
        return float("nan")
    return float((p_bar - p_e) / (1 - p_e))


# Below this many of the rarer label in either rater's labels the kappa interval under-covers;
# its lowest coverage measured there (bench/interval_coverage.py --section kappa, docs/statistics.md)
KAPPA_FEW_LABELS = 10
KAPPA_FEW_COVERAGE = 0.80


def binary_agreement(rater: Sequence[bool], reference: Sequence[bool]) -> dict:
    """Agreement of a binary rater with a reference on the same items: the 2x2 confusion
    table, the observed agreement p_o, Cohen's kappa, and a 95% interval for kappa.

    The interval maps the Wilson score interval of p_o (Wilson 1927; `proportion.wilson`)
    through kappa = (p_o - p_e) / (1 - p_e), the chance agreement p_e = p1 q1 + (1-p1)(1-q1)
    held at its estimate from the two raters' success rates: it treats p_e as known, so it
    leaves out the sampling error of the marginal rates (it is not an interval conditional on
    the marginals: p_o is not binomial given them). Its coverage is measured, not derived
    (`bench/interval_coverage.py`, docs/statistics.md): it depends on the rarer label. When
    either rater gives fewer than `KAPPA_FEW_LABELS` of one label (a prevalence of 0.9 on 20
    items leaves about 2 failures), the marginals are barely estimated and it covers as little as
    `KAPPA_FEW_COVERAGE` (0.80 at n = 10, prevalence 0.95, kappa 0.85; 0.88 at n = 20, prevalence
    0.9, kappa 0.85): the result then carries
    `kappa_ci_coverage`, that lowest measured coverage, for the report to print beside the
    interval; otherwise `kappa_ci_coverage` is None and the interval covers at least 0.93 on the
    measured grid. Unlike the large-sample standard error of Fleiss,
    Cohen & Everitt (1969, Psychol Bull 72:323-327), it does not collapse to a point at perfect
    agreement (40 of 40 agreeing items still leave kappa's lower bound well below 1). Bounds are clipped to
    [-1, 1]; when p_e = 1 (both raters gave every item the same class) kappa and its interval
    are undefined (NaN)."""
    from orchestrator.analysis.stats.proportion import wilson

    if len(rater) != len(reference):
        raise ValueError("the rater and the reference must label the same items")
    table = {"success_success": 0, "success_failure": 0, "failure_success": 0, "failure_failure": 0}
    for r, ref in zip(rater, reference, strict=True):
        table[f"{'success' if r else 'failure'}_{'success' if ref else 'failure'}"] += 1
    n = len(rater)
    if n == 0:
        return {"items": 0, "table": table, "agreement": float("nan"), "kappa": float("nan"),
                "kappa_ci95": [float("nan"), float("nan")], "kappa_ci_coverage": None}
    agree = table["success_success"] + table["failure_failure"]
    p1 = (table["success_success"] + table["success_failure"]) / n
    q1 = (table["success_success"] + table["failure_success"]) / n
    pe = p1 * q1 + (1 - p1) * (1 - q1)
    kappa = cohen_kappa([bool(x) for x in rater], [bool(x) for x in reference])
    if pe >= 1.0:
        ci = [float("nan"), float("nan")]
    else:
        interval = wilson(agree, n)
        low, high = interval.lo, interval.hi
        ci = [max(-1.0, (low - pe) / (1 - pe)), min(1.0, (high - pe) / (1 - pe))]
    fewest = min(table["success_success"] + table["success_failure"], table["failure_success"] + table["failure_failure"],
                 table["success_success"] + table["failure_success"], table["success_failure"] + table["failure_failure"])
    return {"items": n, "table": table, "agreement": agree / n, "kappa": float(kappa),
            "kappa_ci95": [float(ci[0]), float(ci[1])],
            "kappa_ci_coverage": KAPPA_FEW_COVERAGE if fewest < KAPPA_FEW_LABELS and pe < 1.0 else None}
