"""The exact test of equal A-vs-B discordance across stations, against independent oracles:
scipy's Fisher exact test (two stations) and the multivariate hypergeometric law enumerated
with itertools and scipy (three stations), plus its size under the null by seeded simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.analysis.stats.homogeneity import discordance_homogeneity


@pytest.mark.parametrize("counts", [((7, 1), (2, 6)), ((3, 3), (4, 2)), ((10, 0), (0, 10)), ((1, 0), (0, 2)),
                                    ((5, 9), (12, 2))])
def test_two_stations_equal_fisher_exact(counts):
    (a1, b1), (a2, b2) = counts
    ours = discordance_homogeneity({"s1": (a1, b1), "s2": (a2, b2)})
    assert ours.p_value == pytest.approx(sps.fisher_exact([[a1, b1], [a2, b2]])[1], rel=1e-9, abs=1e-12)


def _oracle(sizes, a_only):
    law = sps.multivariate_hypergeom(m=list(sizes), n=sum(a_only))
    observed = law.pmf(list(a_only))
    total = 0.0
    for table in itertools.product(*(range(n + 1) for n in sizes)):
        if sum(table) == sum(a_only):
            p = law.pmf(list(table))
            if p <= observed * (1 + 1e-7):
                total += p
    return total


@pytest.mark.parametrize("counts", [{"a": (6, 1), "b": (2, 5), "c": (3, 3)},
                                    {"a": (0, 4), "b": (4, 0), "c": (2, 2), "d": (1, 0)},
                                    {"a": (3, 2), "b": (2, 3), "c": (0, 0)}])
def test_three_or_more_stations_equal_enumerated_hypergeometric(counts):
    ours = discordance_homogeneity(counts)
    kept = [s for s in sorted(counts) if sum(counts[s])]
    sizes = [sum(counts[s]) for s in kept]
    assert ours.stations == tuple(kept)
    assert ours.p_value == pytest.approx(_oracle(sizes, [counts[s][0] for s in kept]), rel=1e-9)


def test_undefined_with_fewer_than_two_stations_with_discordance():
    assert discordance_homogeneity({"a": (3, 1), "b": (0, 0)}).p_value is None


def test_size_under_the_null_is_at_most_alpha():
    rng = np.random.default_rng(2026)
    rejections, runs = 0, 400
    for _ in range(runs):
        sizes = rng.integers(3, 12, size=3)
        a_only = rng.binomial(sizes, 0.6)
        result = discordance_homogeneity({f"s{i}": (int(a), int(n - a)) for i, (a, n) in enumerate(zip(a_only, sizes, strict=True))})
        rejections += result.p_value is not None and result.p_value <= 0.05
    assert rejections / runs <= 0.05 + 2 * (0.05 * 0.95 / runs) ** 0.5   # exact tests are conservative


def test_power_against_stations_that_differ():
    """The positive control of the size test: a test that never rejects passes that one. Three
    stations whose discordant pairs go A's way with probability 0.9, 0.5 and 0.1 (10 pairs
    each) are told apart in most campaigns."""
    rng = np.random.default_rng(7)
    rejections, runs = 0, 200
    for _ in range(runs):
        a_only = rng.binomial(10, [0.9, 0.5, 0.1])
        result = discordance_homogeneity({f"s{i}": (int(a), int(10 - a)) for i, a in enumerate(a_only)})
        rejections += result.p_value is not None and result.p_value <= 0.05
    assert rejections / runs >= 0.9
