"""Does the A-vs-B discordance differ between stations? An exact conditional test.

Station i has n_i discordant pairs, x_i of them "A only" (A succeeded, B failed) and
n_i - x_i "B only". Under the null hypothesis every station shares one probability p that a
discordant pair goes A's way, so x_i ~ Binomial(n_i, p) independently. Conditioning on every
n_i and on the total X = sum x_i removes p: the x_i then follow the multivariate
hypergeometric law P(x) = prod_i C(n_i, x_i) / C(N, X), N = sum n_i. The p-value sums P(y)
over every table y with the same margins and P(y) <= P(x) (with a relative tolerance of 1e-7
for ties), the Fisher-Freeman-Halton exact test on the 2 x k table of (A only, B only) counts
by station:

    G. H. Freeman and J. H. Halton (1951). Note on an exact treatment of contingency, goodness
    of fit and other problems of significance. Biometrika 38(1/2), 141-149.

For k = 2 it is Fisher's exact test (two-sided, the same "as or less probable" rule as
`scipy.stats.fisher_exact`). Tables are enumerated exactly; stations without discordant pairs
add nothing and are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_TABLES = 2_000_000  # more would take seconds; discordant counts per station are small


@dataclass(frozen=True)
class Homogeneity:
    stations: tuple[str, ...]
    a_only: tuple[int, ...]
    b_only: tuple[int, ...]
    p_value: float | None       # None: fewer than two stations with discordant pairs, or too many tables
    tables: int                 # tables enumerated


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def discordance_homogeneity(counts: dict[str, tuple[int, int]]) -> Homogeneity:
    """The exact conditional test for `counts` = {station: (A only, B only)}."""
    names = tuple(sorted(s for s, (a, b) in counts.items() if a + b > 0))
    a_only = tuple(counts[s][0] for s in names)
    b_only = tuple(counts[s][1] for s in names)
    if len(names) < 2:
        return Homogeneity(names, a_only, b_only, None, 0)
    sizes = [a + b for a, b in zip(a_only, b_only, strict=True)]
    total_a, total = sum(a_only), sum(sizes)
    if math.prod(n + 1 for n in sizes[:-1]) > MAX_TABLES:
        return Homogeneity(names, a_only, b_only, None, 0)
    log_denominator = _log_comb(total, total_a)
    observed = sum(_log_comb(n, x) for n, x in zip(sizes, a_only, strict=True)) - log_denominator
    p_value, tables = 0.0, 0
    for table in _tables(sizes, total_a):
        tables += 1
        log_p = sum(_log_comb(n, x) for n, x in zip(sizes, table, strict=True)) - log_denominator
        if log_p <= observed + 1e-7:
            p_value += math.exp(log_p)
    return Homogeneity(names, a_only, b_only, min(1.0, p_value), tables)


def _tables(sizes: list[int], total: int):
    """Every (x_1..x_k) with 0 <= x_i <= sizes[i] and sum x_i = total."""
    if len(sizes) == 1:
        if 0 <= total <= sizes[0]:
            yield (total,)
        return
    rest = sum(sizes[1:])
    for x in range(max(0, total - rest), min(sizes[0], total) + 1):
        for tail in _tables(sizes[1:], total - x):
            yield (x, *tail)
