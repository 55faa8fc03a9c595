"""The audit sample: a random set of a campaign's trials whose episodes human judges label
whatever the `auto` rater said (the protocol's `judging.audit`, docs/judging.md "The audit").

Definition. With `audit` = f and N scheduled trials (the campaign's population), the sample
is k = floor(f * N + 1/2) trials (f * N rounded half up), drawn without replacement: the
first k slots of a uniformly random permutation of the N slots, from numpy's PCG64 seeded
through `SeedSequence(seed)`, whose output is specified bit for bit, so the seed recorded in
the store reproduces the sample on any machine. `seed` is a fresh random 128-bit integer
drawn when the campaign is frozen (`secrets`), not the protocol's seed: anyone who reads the
protocol (the operator, a judge) could otherwise compute which trials are audited.

What follows (the inclusion probabilities a weighted estimator uses):

- every trial is in the sample with probability exactly k/N, and every k-subset of the N
  trials is equally likely (the first k of a uniform permutation);
- `order`, the sample in draw order, is itself a uniform random ordering of it, so any prefix
  of it (the first j) is a uniform random j-subset of the N trials (probability j/N each);
- the draw uses nothing but the seed and N: it is independent of the schedule's policies, of
  every outcome and of every label.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np


def audit_size(fraction: float, population: int) -> int:
    """k = floor(fraction * population + 1/2): how many of `population` trials are audited."""
    return int(math.floor(fraction * population + 0.5))


def audit_problem(fraction: float, population: int) -> str | None:
    """Why an audit of `fraction` cannot be drawn from `population` scheduled trials (it draws
    none), or None."""
    if fraction > 0 and audit_size(fraction, population) < 1:
        return (f"audit {fraction:g} of the {population} scheduled trials draws none: use at least "
                f"{0.5 / population:.3g}, or 0 for no audit")
    return None


def new_audit_seed() -> int:
    """A fresh random 128-bit seed (never derived from the protocol, which the operator reads)."""
    return secrets.randbits(128)


@dataclass(frozen=True)
class AuditSample:
    """The audit sample of a campaign, as drawn when it was frozen and recorded in its store.

    - `trial_ids`: the audited trials, each named by its slot in decimal (`str(slot)`, the
      schedule's 0-based run order: `TrialOutcome.slot`, `Trial.slot`);
    - `fraction`: the protocol's `judging.audit`;
    - `population`: N, the scheduled trials the sample was drawn from;
    - `seed`: the seed it was drawn with (`draw_audit(fraction, population, seed)` gives it back);
    - `order`: the same trials in draw order (any prefix is a uniform random subset).

    Each trial's inclusion probability is `size / population` (`inclusion_probability`)."""

    trial_ids: frozenset[str]
    fraction: float
    population: int
    seed: int
    order: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.trial_ids)

    @property
    def inclusion_probability(self) -> float:
        """k / N: the probability that any given trial is in the sample."""
        return self.size / self.population if self.population else 0.0

    def includes(self, slot: int) -> bool:
        """Whether the trial at `slot` is audited."""
        return str(slot) in self.trial_ids

    @property
    def slots(self) -> tuple[int, ...]:
        """The audited slots in draw order."""
        return tuple(int(t) for t in self.order)


def draw_audit(fraction: float, population: int, seed: int) -> AuditSample:
    """The audit sample of `population` trials (slots 0..N-1) at `fraction`, from `seed` (see the
    module docstring for the definition and its properties)."""
    if not 0.0 <= fraction <= 1.0 or population < 0:
        raise ValueError(f"audit fraction {fraction} must be in [0, 1] and population {population} >= 0")
    k = audit_size(fraction, population)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    order = tuple(str(int(slot)) for slot in rng.permutation(population)[:k])
    return AuditSample(trial_ids=frozenset(order), fraction=float(fraction), population=population,
                       seed=int(seed), order=order)
