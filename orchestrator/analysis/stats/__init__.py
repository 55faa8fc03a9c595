"""Statistics for paired A/B trials of robot policies: pure functions, no I/O.

Every function states its definition and its reference (docs/statistics.md). Distributions come
from scipy (binomial, normal, chi-squared, Student t, beta, hypergeometric); nothing here
hand-writes a special function.

Notation for the paired 2x2 table over layouts (docs/statistics.md):

                    B succeeds   B fails
    A succeeds         a           b        (b = "A only")
    A fails            c           d        (c = "B only")

n = a + b + c + d pairs; b and c are the discordant pairs, the only ones that carry
information about which policy is better; rate(A) - rate(B) = (b - c) / n.

Modules (one idea each; everything is re-exported here, so `stats.wilson(...)` works):
`types` result dataclasses; `proportion` one rate (Wilson, Wald);
`mcnemar` the paired test; `paired_ci` intervals for the paired difference; `unpaired` Fisher, Mann-Whitney
and Newcombe for independent rates; `multi` Cochran's Q and Holm; `clustered` repeats on one
mark (the mark as the unit); `clustered_rate` one policy's rate over marks; `evalue` the anytime-valid e-value; `evalue_power` the e-value rule's exact power; `sequence` anytime-valid
confidence sequences; `power` exact power and sample sizes; `planning` `orchestrator plan`;
`seeds` over training seeds and task suites (and the method-level permutation test, the seed the unit); `aggregate` rliable's across-task aggregates
(mean, IQM, performance profiles, probability of improvement) with vectorised stratified
bootstraps; `trend` the exact trend test over ordered checkpoints; `bradley_terry` ratings from
paired wins; `mantel_haenszel` the CMH test; `agreement` judges' kappas; `ppi` rates and the paired difference from an automatic rater corrected by a random human audit.

References
----------
- Wilson EB (1927). Probable inference, the law of succession, and statistical inference.
  JASA 22:209-212.
- Brown LD, Cai TT, DasGupta A (2001). Interval estimation for a binomial proportion.
  Statistical Science 16:101-133.
- Clopper CJ, Pearson ES (1934). The use of confidence or fiducial limits illustrated in the
  case of the binomial. Biometrika 26:404-413.
- McNemar Q (1947). Note on the sampling error of the difference between correlated
  proportions or percentages. Psychometrika 12:153-157.
- Edwards AL (1948). Note on the "correction for continuity" in testing the significance of
  the difference between correlated proportions. Psychometrika 13:185-187.
- Fagerland MW, Lydersen S, Laake P (2013). The McNemar test for binary matched-pairs data:
  mid-p and asymptotic are better than exact conditional. BMC Med Res Methodol 13:91.
- Fagerland MW, Lydersen S, Laake P (2014). Recommended tests and confidence intervals for
  paired binomial proportions. Statistics in Medicine 33:2850-2875.
- Newcombe RG (1998a). Two-sided confidence intervals for the single proportion / Interval
  estimation for the difference between independent proportions: comparison of eleven
  methods. Statistics in Medicine 17:857-872 and 873-890.
- Newcombe RG (1998b). Improved confidence intervals for the difference between binomial
  proportions based on paired data. Statistics in Medicine 17:2635-2650.
- Tango T (1998). Equivalence test and confidence interval for the difference in proportions
  for the paired-sample design. Statistics in Medicine 17:891-908.
- Bonett DG, Price RM (2012). Adjusted Wald confidence interval for a difference of binomial
  proportions based on paired data. J Educ Behav Stat 37:479-488.
- Fisher RA (1935). The logic of inductive inference. JRSS 98:39-82.
- Cochran WG (1950). The comparison of percentages in matched samples. Biometrika 37:256-266.
- Holm S (1979). A simple sequentially rejective multiple test procedure. Scand J Stat 6:65-70.
- Wald A (1947). Sequential Analysis. Wiley.
- Ville J (1939). Etude critique de la notion de collectif. Gauthier-Villars.
- Ramdas A, Grunwald P, Vovk V, Shafer G (2023). Game-theoretic statistics and safe
  anytime-valid inference. Statistical Science 38:576-601.
- Agarwal R, Schwarzer M, Castro PS, Courville A, Bellemare MG (2021). Deep reinforcement
  learning at the edge of the statistical precipice. NeurIPS (arXiv:2108.13264).
- Bradley RA, Terry ME (1952). Rank analysis of incomplete block designs I. Biometrika
  39:324-345.
- Mantel N, Haenszel W (1959). J Natl Cancer Inst 22:719-748.
- Armitage P (1955). Tests for linear trends in proportions and frequencies. Biometrics
  11:375-386.
- Cohen J (1960). A coefficient of agreement for nominal scales. Educ Psychol Meas 20:37-46.
- Fleiss JL (1971). Measuring nominal scale agreement among many raters. Psychol Bull
  76:378-382.
"""

from __future__ import annotations

from orchestrator.analysis.stats.aggregate import (
                                                  improvement_interval,
                                                  iqm_of_runs,
                                                  mean_and_iqm_intervals,
                                                  mean_of_tasks,
                                                  probability_of_improvement,
                                                  profile_intervals,
                                                  score_distribution,
)
from orchestrator.analysis.stats.agreement import binary_agreement, cohen_kappa, fleiss_kappa
from orchestrator.analysis.stats.clustered import (
                                                  clustered_difference,
                                                  clustered_mcnemar,
                                                  clustered_p_values,
                                                  design_effect,
                                                  mark_split,
                                                  signflip_tails,
)
from orchestrator.analysis.stats.clustered_rate import clustered_wilson, rate_design_effect
from orchestrator.analysis.stats.evalue import evalue_discordant
from orchestrator.analysis.stats.evalue_power import evalue_layouts_needed, evalue_power, rejection_by_discordant
from orchestrator.analysis.stats.mantel_haenszel import cmh_test
from orchestrator.analysis.stats.mcnemar import (
                                                  discordant_floor,
                                                  mcnemar,
                                                  mcnemar_exact_p,
                                                  mcnemar_midp,
                                                  min_discordant_for_alpha,
                                                  paired_table,
)
from orchestrator.analysis.stats.multi import cochran_q, holm
from orchestrator.analysis.stats.paired_ci import bonett_price_paired, newcombe_cells, newcombe_paired, tango_paired
from orchestrator.analysis.stats.planning import plan
from orchestrator.analysis.stats.power import (
                                                  _rejection_bounds,  # noqa: F401  (bench/stats_speed.py clears its cache)
                                                  cell_probabilities,
                                                  fisher_power,
                                                  fisher_trials_needed,
                                                  independent_groups_n,
                                                  layouts_needed,
                                                  paired_power,
)
from orchestrator.analysis.stats.ppi import CorrectedInterval, corrected_values, ppi_difference, ppi_rate
from orchestrator.analysis.stats.proportion import (
                                                  Z95,
                                                  clopper_pearson,
                                                  poisson_per_100,
                                                  wald,
                                                  wilson,
                                                  wilson_bounds,
                                                  z_for_level,
)
from orchestrator.analysis.stats.seeds import (
                                                  SeedTest,
                                                  interquartile_mean,
                                                  paired_seed_test,
                                                  rate_t_interval,
                                                  satterthwaite_interval,
                                                  seed_permutation_test,
                                                  stratified_bootstrap_ci,
                                                  t_interval,
                                                  t_interval_from_summary,
)
from orchestrator.analysis.stats.sequence import beta_binomial_bounds, beta_binomial_cs, difference_cs
from orchestrator.analysis.stats.trend import TrendResult, clustered_trend_test, trend_test
from orchestrator.analysis.stats.types import (
                                                  ClusteredResult,
                                                  CochranQResult,
                                                  EValueResult,
                                                  Interval,
                                                  McNemarResult,
                                                  MeanInterval,
                                                  PairedTable,
                                                  PlanResult,
                                                  PowerResult,
)
from orchestrator.analysis.stats.unpaired import fisher_exact, mann_whitney, newcombe_independent

__all__ = [
    "Z95", "Interval", "PairedTable", "McNemarResult", "CochranQResult", "MeanInterval",
    "PowerResult", "PlanResult", "EValueResult", "z_for_level",
    "wilson", "wald", "wilson_bounds", "poisson_per_100", "clopper_pearson",
    "paired_table", "mcnemar", "mcnemar_exact_p", "mcnemar_midp", "discordant_floor",
    "min_discordant_for_alpha", "newcombe_paired", "tango_paired",
    "bonett_price_paired", "fisher_exact", "mann_whitney", "newcombe_independent",
    "cochran_q", "holm", "t_interval", "t_interval_from_summary", "paired_power",
    "layouts_needed", "cell_probabilities", "independent_groups_n", "fisher_power",
    "fisher_trials_needed",
    "evalue_discordant", "evalue_power", "evalue_layouts_needed", "rejection_by_discordant", "interquartile_mean", "stratified_bootstrap_ci", "binary_agreement", "cohen_kappa",
    "fleiss_kappa", "plan", "SeedTest", "seed_permutation_test", "paired_seed_test", "rate_t_interval", "satterthwaite_interval",
    "ClusteredResult", "clustered_wilson", "rate_design_effect", "clustered_mcnemar", "clustered_p_values", "clustered_difference",
    "improvement_interval", "iqm_of_runs", "mean_and_iqm_intervals", "mean_of_tasks", "probability_of_improvement",
    "profile_intervals", "score_distribution", "cmh_test", "TrendResult", "trend_test", "clustered_trend_test",
    "design_effect", "mark_split", "signflip_tails", "newcombe_cells", "beta_binomial_cs", "beta_binomial_bounds", "difference_cs",
    "CorrectedInterval", "corrected_values", "ppi_rate", "ppi_difference",
]
