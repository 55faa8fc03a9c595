"""Result types of the statistics package (frozen dataclasses, no computation beyond
the counts' own arithmetic). Notation of the paired table: see `orchestrator.analysis.stats`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """A confidence interval [lo, hi] with its point estimate, method and level."""

    estimate: float
    lo: float
    hi: float
    method: str
    level: float = 0.95

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


@dataclass(frozen=True)
class PairedTable:
    """Paired 2x2 over layouts: both, a_only (b), b_only (c), neither (d)."""

    both: int
    a_only: int
    b_only: int
    neither: int

    def __post_init__(self) -> None:
        for name in ("both", "a_only", "b_only", "neither"):
            value = getattr(self, name)
            if int(value) != value or value < 0:
                raise ValueError(f"{name} must be a non-negative count, not {value}")

    @property
    def n(self) -> int:
        return self.both + self.a_only + self.b_only + self.neither

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only

    @property
    def successes_a(self) -> int:
        return self.both + self.a_only

    @property
    def successes_b(self) -> int:
        return self.both + self.b_only

    @property
    def difference(self) -> float:
        """rate(A) - rate(B) = (b - c) / n."""
        return (self.a_only - self.b_only) / self.n if self.n else 0.0

    @classmethod
    def from_matrix(cls, m: Sequence[Sequence[int]]) -> PairedTable:
        return cls(int(m[0][0]), int(m[0][1]), int(m[1][0]), int(m[1][1]))


@dataclass(frozen=True)
class McNemarResult:
    """All McNemar variants for one paired table (b = A only, c = B only)."""

    b: int
    c: int
    exact_p: float
    mid_p: float
    chi2: float
    chi2_p: float
    chi2_cc: float
    chi2_cc_p: float


@dataclass(frozen=True)
class CochranQResult:
    q: float
    df: int
    p: float
    blocks: int


@dataclass(frozen=True)
class MeanInterval:
    mean: float
    sd: float
    n: int
    lo: float
    hi: float
    t_crit: float
    level: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2


@dataclass(frozen=True)
class PowerResult:
    layouts: int
    power: float
    expected_discordant: float


@dataclass(frozen=True)
class PlanResult:
    """What `orchestrator plan` prints."""

    p_a: float
    p_b: float
    discordance: float
    agreement: float
    p10: float
    p01: float
    alpha: float
    test: str
    targets: tuple[tuple[float, int | None], ...]     # (target power, layouts needed or None)
    unpaired_per_policy: tuple[tuple[float, int | None], ...]
    min_discordant: int                                # fewest discordant pairs that can reach alpha
    max_layouts: int
    # with `--stopping evalue`: (target power, layouts the e-value rule needs or None)
    evalue_targets: tuple[tuple[float, int | None], ...] = ()


@dataclass(frozen=True)
class EValueResult:
    """Beta-mixture e-value for the discordant pairs, with the decision at 1/alpha."""

    e_value: float
    a_only: int
    b_only: int
    alpha: float
    threshold: float
    reject: bool
    prior_a: float


@dataclass(frozen=True)
class ClusteredResult:
    """The mark-as-unit analysis of one comparison (see `stats.clustered`)."""

    marks: int                 # marks with at least one pair
    pairs: int
    discordant_marks: int      # marks whose b_k != c_k
    exact_p: float             # sign-flip test on d_k = b_k - c_k, doubled upper tail
    mid_p: float
    durkalski_chi2: float      # (B - C)^2 / sum d_k^2 (Durkalski et al. 2003)
    durkalski_p: float         # its chi2(1) p, for reference (unreliable with few marks)
    design_effect: float       # Kish's deff of D, >= 1
    difference: Interval       # Newcombe method 10 on the table divided by deff
