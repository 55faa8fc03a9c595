"""Anytime-valid inference on the discordant pairs: the Beta-mixture e-value.

References: Ville J (1939) Etude critique de la notion de collectif; Ramdas A, Grunwald P,
Vovk V, Shafer G (2023) Statistical Science 38:576-601.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

from scipy import special

from orchestrator.analysis.stats.types import EValueResult


def evalue_discordant(a_only: int, b_only: int, alpha: float = 0.05, prior_a: float = 1.0) -> EValueResult:
    """Anytime-valid e-value for 'the policies are equally good' on the discordant pairs.

    Each discordant pair is a Bernoulli(theta) draw (1 = A won); H0: theta = 1/2. The mixture
    likelihood ratio with a Beta(prior_a, prior_a) prior on theta,
        E = B(prior_a + b, prior_a + c) / B(prior_a, prior_a) / 0.5^(b + c),
    is a non-negative martingale with mean 1 under H0, so by Ville's inequality
    P(sup_t E_t >= 1/alpha) <= alpha: rejecting when E >= 1/alpha keeps the type-I error <= alpha
    however often one looks (Ville 1939; Ramdas et al. 2023). The prior is symmetric, so the
    test is two-sided. Computed in logs (scipy.special.betaln)."""
    if a_only < 0 or b_only < 0:
        raise ValueError("discordant counts must be non-negative")
    if prior_a <= 0:
        raise ValueError("prior_a must be positive")
    if isinstance(a_only, numbers.Integral) and isinstance(b_only, numbers.Integral):
        # the runner's rule and the power recursions ask about the same few counts over and over
        return _evalue_of_counts(int(a_only), int(b_only), float(alpha), float(prior_a))
    return _evalue_of_counts.__wrapped__(a_only, b_only, alpha, prior_a)


@lru_cache(maxsize=8192)
def _evalue_of_counts(a_only, b_only, alpha: float, prior_a: float) -> EValueResult:
    log_e = (special.betaln(prior_a + a_only, prior_a + b_only) - special.betaln(prior_a, prior_a)
             + (a_only + b_only) * math.log(2.0))
    e = float(math.exp(min(log_e, 700.0)))
    threshold = 1.0 / alpha
    return EValueResult(e, a_only, b_only, alpha, threshold, e >= threshold, prior_a)
