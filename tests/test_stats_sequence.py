"""Anytime-valid confidence sequences: the Beta-binomial mixture bound
against numerical integration, and coverage under the pre-registered optional stopping rule
by seeded simulation (with its standard error), beside the fixed-n Newcombe interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from orchestrator.analysis import stats as S


def _mixture_ratio_quad(theta, k, m):
    """Oracle: M(theta) = int_0^1 t^k (1-t)^(m-k) dt / (theta^k (1-theta)^(m-k)), the uniform
    (Beta(1, 1)) mixture likelihood ratio, by quadrature instead of Beta functions."""
    num, _ = integrate.quad(lambda t: t ** k * (1 - t) ** (m - k), 0, 1, epsabs=0, epsrel=1e-12, limit=200)
    return num / (theta ** k * (1 - theta) ** (m - k))


@pytest.mark.parametrize("k, m", [(9, 10), (3, 12), (0, 7), (20, 20), (14, 20), (30, 70)])
def test_cs_bounds_solve_the_mixture_equation(k, m):
    iv = S.beta_binomial_cs(k, m, alpha=0.05)
    assert iv.lo <= k / m <= iv.hi
    for bound, inward in ((iv.lo, +1e-6), (iv.hi, -1e-6)):
        if bound in (0.0, 1.0):
            # open end: even the edge itself is inside (the ratio stays below 1/alpha)
            edge = min(max(bound, 1e-12), 1 - 1e-12)
            assert _mixture_ratio_quad(edge, k, m) < 20
        else:
            assert _mixture_ratio_quad(bound, k, m) == pytest.approx(20, rel=1e-6)
            assert _mixture_ratio_quad(bound + inward, k, m) < 20
            assert _mixture_ratio_quad(bound - inward, k, m) > 20


def test_cs_excludes_half_exactly_when_the_evalue_rule_rejects():
    # M(1/2) is the stopping rule's e-value, so the two decisions cannot disagree
    for b in range(0, 30):
        for c in range(0, 30):
            iv = S.beta_binomial_cs(b, b + c, 0.05)
            e = S.evalue_discordant(b, c, 0.05)
            if abs(math.log(e.e_value) - math.log(20)) > 1e-9:
                assert (not iv.contains(0.5)) == e.reject, (b, c)


def _optional_stopping(rng, p_a, p_b, campaigns, max_layouts=60, alpha=0.05):
    """Seeded campaigns under the pre-registered rule: after every layout the e-value of the
    discordant pairs so far; stop at e >= 1/alpha or at max_layouts. Outcomes of A and B on a
    layout share a uniform draw (positively correlated, as on real layouts)."""
    u = rng.random((campaigns, max_layouts))
    v = rng.random((campaigns, max_layouts))
    shared = v < 0.5
    a_ok = np.where(shared, u < p_a, rng.random((campaigns, max_layouts)) < p_a)
    b_ok = np.where(shared, u < p_b, rng.random((campaigns, max_layouts)) < p_b)
    b = np.cumsum(a_ok & ~b_ok, axis=1)
    c = np.cumsum(~a_ok & b_ok, axis=1)
    from scipy import special
    log_e = special.betaln(1 + b, 1 + c) - special.betaln(1, 1) + (b + c) * math.log(2)
    hit = log_e >= math.log(1 / alpha)
    stop = np.where(hit.any(axis=1), hit.argmax(axis=1), max_layouts - 1)
    truth = p_a - p_b
    return [(list(zip(a_ok[i, :stop[i] + 1], b_ok[i, :stop[i] + 1], strict=True)), bool(hit[i].any())) for i in range(campaigns)], truth


def _counts(pairs):
    return (sum(1 for a, b in pairs if a and not b), sum(1 for a, b in pairs if b and not a), len(pairs))


@pytest.mark.parametrize("p_a, p_b", [(0.6, 0.6), (0.8, 0.6)])
def test_difference_cs_covers_after_optional_stopping(p_a, p_b):
    """Coverage of the 95 % CS for rate(A) - rate(B) at the (data-dependent) stopping time:
    >= 0.95 - 2 SE, SE = sqrt(0.95 * 0.05 / 1000) = 0.0069. Under H0 the fixed-n Newcombe
    interval at an early stop misses the true difference far more often than the CS does."""
    count = 1000
    runs, truth = _optional_stopping(np.random.default_rng(15), p_a, p_b, count)
    se = math.sqrt(0.95 * 0.05 / count)
    cs_cover = [S.difference_cs(*_counts(pairs)).contains(truth) for pairs, _ in runs]
    assert np.mean(cs_cover) >= 0.95 - 2 * se, np.mean(cs_cover)
    if p_a == p_b:
        early = [i for i, (_, stopped) in enumerate(runs) if stopped]
        assert early, "no campaign stopped early: the simulation shows nothing"
        newcombe_cover = [S.newcombe_paired(S.paired_table(*zip(*runs[i][0], strict=True))).contains(truth) for i in early]
        assert np.mean(newcombe_cover) < np.mean([cs_cover[i] for i in early])


def test_theta_cs_coverage_is_time_uniform():
    """P(the split's CS ever misses theta over 150 discordant pairs) <= alpha + 2 SE
    (SE = sqrt(0.05 * 0.95 / 1000) = 0.0069): the property that makes any stopping time safe."""
    rng = np.random.default_rng(8)
    count, steps, theta = 1000, 150, 0.7
    wins = np.cumsum(rng.random((count, steps)) < theta, axis=1)
    m = np.broadcast_to(np.arange(1, steps + 1), wins.shape)
    lo, hi = S.beta_binomial_bounds(wins.ravel(), m.ravel(), 0.05)
    ever_missed = ((lo > theta) | (hi < theta)).reshape(count, steps).any(axis=1)
    se = math.sqrt(0.05 * 0.95 / count)
    assert ever_missed.mean() <= 0.05 + 2 * se, ever_missed.mean()
