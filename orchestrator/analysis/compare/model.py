"""The frozen comparison across campaigns: every number the renderings show, computed once by
`build.py`. Field meanings follow docs/design.md (the compare JSON, schema
`orchestrator.compare/2`)."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.analysis import stats
from orchestrator.analysis.compare.trials import Campaign

SCHEMA = "orchestrator.compare/2"


@dataclass(frozen=True)
class SeedScore:
    """One run: a (method, task, training seed), its checkpoint's k/n with the Wilson interval."""

    seed: int | None
    step: int | None
    successes: int
    trials: int
    wilson: stats.Interval
    policies: tuple[str, ...]           # `campaign:label` of every policy behind it

    @property
    def rate(self) -> float:
        return self.successes / self.trials


@dataclass(frozen=True)
class TaskScore:
    task: str
    seeds: tuple[SeedScore, ...]
    mean_over_seeds: float
    t95: stats.MeanInterval | None      # None with one seed


@dataclass(frozen=True)
class MethodScore:
    method: str
    tasks: tuple[TaskScore, ...]
    mean: stats.Interval                # over tasks of the mean over seeds, stratified bootstrap
    iqm: stats.Interval                 # pooled runs of every task, stratified bootstrap
    runs: int


@dataclass(frozen=True)
class Improvement:
    x: str
    y: str
    tasks: tuple[str, ...]
    interval: stats.Interval            # P(X > Y), stratified bootstrap


@dataclass(frozen=True)
class Profile:
    method: str
    taus: tuple[float, ...]
    values: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]


@dataclass(frozen=True)
class CheckpointPairs:
    """These checkpoints on these layouts: every scoring X checkpoint paired with every scoring Y
    checkpoint on one layout run, the (campaign, mark) the unit (`paired.py`)."""

    campaigns: int
    table: stats.PairedTable            # pooled pairs
    units: int                          # (campaign, mark) units with a pair
    discordant_units: int               # units whose b_k != c_k
    exact_p: float                      # sign-flip over units
    mid_p: float
    holm_mid_p: float                   # adjusted over every pair of methods
    cmh_chi2: float                     # Cochran-Mantel-Haenszel over the units (reference)
    cmh_p: float
    difference: stats.Interval          # clustered Newcombe over the units
    differ: bool                        # the adjusted mid-p <= alpha
    statement: str
    notes: tuple[str, ...]
    by_seed: bool = False               # X seed s with Y seed s only (seed pairing pre-registered)


@dataclass(frozen=True)
class PairedAcross:
    """X vs Y across tasks: the method-level test over (task, seed) scores decides; the
    checkpoint-level pairs are reported beside it (None: no campaign ran both on a layout run)."""

    x: str
    y: str
    tasks: tuple[str, ...]              # the tasks both methods have
    seeds: stats.SeedTest               # permutation of method labels over (task, seed) scores
    p: float                            # its p, Holm-adjusted over every pair of methods
    significant: bool
    verdict: str
    checkpoints: CheckpointPairs | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class LadderStep:
    step: int
    successes: int
    trials: int
    wilson: stats.Interval


@dataclass(frozen=True)
class Ladder:
    """Ordered checkpoints of one training run (method, seed)."""

    method: str
    seed: int | None
    steps: tuple[LadderStep, ...]
    trend: stats.TrendResult
    last: int
    previous: int
    later_only: tuple[str, ...]         # layouts (campaign/mark#repeat) only the last step succeeded
    earlier_only: tuple[str, ...]
    last_exact_p: float                 # sign-flip over the (campaign, mark) units
    last_mid_p: float
    statement: str
    trend_statement: str


@dataclass(frozen=True)
class BoardRow:
    name: str
    rating: float
    lo: float
    hi: float
    comparisons: int                    # discordant layouts it won or lost
    wins: int = 0
    losses: int = 0

    @property
    def near_separation(self) -> bool:
        """Two or fewer losses or wins: the rating rests on the penalty, its bootstrap interval
        undercovers (docs/statistics.md)."""
        return min(self.wins, self.losses) <= 2


@dataclass(frozen=True)
class Neighbours:
    """Two neighbours on the board, decided on their own discordant layouts (`leaderboard.py`)."""

    a: str                              # the higher rated
    b: str
    rating_difference: float            # Bradley-Terry theta_a - theta_b (every comparison)
    wins: int                           # discordant layouts a won against b
    losses: int
    units: int                          # (campaign, mark) units where they had a discordant layout
    mid_p: float                        # sign-flip over those units
    holm_p: float                       # adjusted over the neighbours
    separated: bool
    lo: float                           # head-to-head log-odds: logit of the clustered Clopper-Pearson bounds
    hi: float


@dataclass(frozen=True)
class Leaderboard:
    rows: tuple[BoardRow, ...]
    components: tuple[tuple[str, ...], ...]
    neighbours: tuple[Neighbours, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Section:
    """Everything computed on one part of the trials: in distribution, or the held-out strata."""

    label: str
    methods: tuple[MethodScore, ...]
    improvements: tuple[Improvement, ...]
    profiles: tuple[Profile, ...]
    paired: tuple[PairedAcross, ...]
    ladders: tuple[Ladder, ...]
    leaderboard: Leaderboard | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Comparison:
    schema: str
    campaigns: tuple[Campaign, ...]
    main: Section
    held_out: Section | None
    reps: int
    profile_reps: int
    board_reps: int
    seed: int
    alpha: float
    notes: tuple[str, ...]
