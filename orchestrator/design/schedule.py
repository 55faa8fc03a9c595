"""The campaign schedule: seeded randomisation and interleaving of policies over layouts.

Rules (docs/design.md section 8): the schedule is drawn once from the protocol seed and stored
(a stored schedule never changes; these rules apply to campaigns created since); the layouts run
in a random order; on each layout every policy runs once per repeat (a *unit*, the pairing
block), in a random order; with repeats, marks run in blocks of MARK_BLOCK marks, every repeat of
a block's marks before the next block (so marks are completed progressively); with `order:
balanced` each policy goes first on the
same number of units (for 2 policies and 20 layouts exactly 10 and 10; with a count that does
not divide evenly, the first-position counts differ by at most one). Policies are therefore
interleaved (A,B / B,A), never run in blocks.

Randomness comes from numpy's PCG64 seeded through `SeedSequence`, whose output is specified
bit for bit, so the same seed gives the same schedule on any machine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from orchestrator.design.protocol import Layout, Protocol

MARK_BLOCK = 4   # marks whose repeats all run before the next marks start (campaigns with repeats)


@dataclass(frozen=True)
class Trial:
    """One trial slot, as drawn and as stored. `slot` is the 0-based run order; trials of one
    `unit` face one mark. `state`, `episode_id` and `attempts` are its progress in the store
    (a freshly drawn trial is pending, with no episode and no attempt)."""

    slot: int
    unit: int
    mark_id: str
    repeat: int
    position: int
    policy: str
    seed: int
    state: str = "pending"              # pending | running | done | aborted (store.TRIAL_STATES)
    episode_id: str | None = None
    attempts: int = 0


def trial_seed(protocol_seed: int, mark_id: str, repeat: int, policy: str) -> int:
    """A 31-bit seed for one trial, a pure function of what the trial is (not of run order)."""
    digest = hashlib.sha256(f"{protocol_seed}|{mark_id}|{repeat}|{policy}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _first_positions(n_units: int, labels: list[str], rng: np.random.Generator) -> list[str]:
    """Which policy goes first on each unit, balanced: counts differ by at most one."""
    reps = -(-n_units // len(labels))
    extra_order = list(rng.permutation(len(labels)))
    pool = [labels[i] for i in extra_order] * reps
    pool = pool[:n_units]
    return [pool[i] for i in rng.permutation(n_units)]


def _unit_order(repeats: int, mark_ids: list[str], rng: np.random.Generator) -> list[tuple[int, str]]:
    """(repeat, mark) of every unit in run order. One repeat: the marks in a random order. With
    repeats the shuffled marks are cut into blocks of MARK_BLOCK, and a block's marks run all
    their repeats (round by round, each round in a new random order) before the next block
    starts: marks are completed progressively, so a stopping rule that counts complete marks
    can stop early, while a mark's repeats stay spread over its block's rounds."""
    marks = [mark_ids[i] for i in rng.permutation(len(mark_ids))]
    if repeats == 1:
        return [(0, m) for m in marks]
    units: list[tuple[int, str]] = []
    for start in range(0, len(marks), MARK_BLOCK):
        block = marks[start:start + MARK_BLOCK]
        for repeat in range(repeats):
            units.extend((repeat, block[i]) for i in rng.permutation(len(block)))
    return units


def draw_schedule(protocol: Protocol, layout: Layout) -> list[Trial]:
    """Draw the full schedule for `protocol` on `layout` (deterministic in `protocol.seed`)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(protocol.seed)))
    labels = list(protocol.policies)
    units = _unit_order(protocol.trials_per_layout, [m.id for m in layout.marks], rng)
    if protocol.order == "balanced":
        firsts = _first_positions(len(units), labels, rng)
    else:
        firsts = [labels[int(rng.integers(len(labels)))] for _ in units]
    trials: list[Trial] = []
    for unit_index, ((repeat, mark_id), first) in enumerate(zip(units, firsts, strict=True)):
        rest = [label for label in labels if label != first]
        rest = [rest[i] for i in rng.permutation(len(rest))]
        for position, policy in enumerate([first, *rest]):
            trials.append(Trial(
                slot=len(trials), unit=unit_index, mark_id=mark_id, repeat=repeat,
                position=position, policy=policy,
                seed=trial_seed(protocol.seed, mark_id, repeat, policy)))
    return trials
