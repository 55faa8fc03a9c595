"""`orchestrator plan`'s numbers in one call: layouts for the paired test, trials per policy for
the unpaired contrast, and the discordant-pair floor of the chosen test."""

from __future__ import annotations

from orchestrator.analysis.stats.evalue_power import evalue_layouts_needed
from orchestrator.analysis.stats.mcnemar import min_discordant_for_alpha
from orchestrator.analysis.stats.power import cell_probabilities, fisher_trials_needed, layouts_needed
from orchestrator.analysis.stats.types import PlanResult


def plan(p_a: float, p_b: float, agreement: float | None = None, discordance: float | None = None,
         power: float = 0.8, alpha: float = 0.05, test: str = "mcnemar_midp",
         n_max: int = 2000, stopping: str = "none") -> PlanResult:
    """Planning summary for `orchestrator plan`: layouts needed for 80 %, 90 % and the requested
    power with the paired exact test (`layouts_needed`), the per-policy trials an unpaired
    design would need by exact Fisher power (`fisher_trials_needed`: Fisher's test is
    the report's unpaired comparison), and the fewest discordant pairs that can reach
    alpha at all (`min_discordant_for_alpha`); with `stopping="evalue"` also the layouts the
    pre-registered e-value rule needs (`evalue_layouts_needed`: the exact probability that it
    has stopped, rejecting, by then; Ville 1939, Wald 1947). Raises ValueError on impossible
    inputs."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), not {power}")
    _p11, p10, p01, _p00 = cell_probabilities(p_a, p_b, agreement, discordance)
    q = p10 + p01
    wanted = sorted({0.8, 0.9, round(power, 6)})
    targets = tuple((w, layouts_needed(p10, p01, w, alpha, test, n_max)) for w in wanted)
    unpaired = tuple((w, fisher_trials_needed(p_a, p_b, w, alpha, n_max)) for w in wanted)
    if stopping not in ("none", "evalue"):
        raise ValueError(f"stopping must be none or evalue, not {stopping!r}")
    evalue = tuple((w, evalue_layouts_needed(p10, p01, w, alpha, n_max)) for w in wanted) if stopping == "evalue" else ()
    return PlanResult(p_a, p_b, q, 1 - q, p10, p01, alpha, test, targets, unpaired,
                      min_discordant_for_alpha(alpha, test), n_max, evalue)
