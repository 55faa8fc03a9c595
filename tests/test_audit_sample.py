"""The audit sample (design/audit.py, store/audit.py): its size, its reproducibility from the seed
recorded in the store, that every trial is equally likely to be in it (and in any prefix of its
draw order), checked against the uniform distribution with a chi-square test across seeds (the
oracle: the uniform inclusion count, no project code), with a positive control (a biased draw
fails the same check), and the store's copy, on SQLite here and on PostgreSQL in
test_audit_pg.py."""

from __future__ import annotations

import hashlib
import math
import sqlite3

import pytest
from scipy.stats import chi2

from orchestrator.core.errors import BadInput
from orchestrator.design.audit import AuditSample, draw_audit
from orchestrator.design.protocol import load_protocol
from orchestrator.design.schedule import draw_schedule
from orchestrator.store.sqlite import CampaignStore
from support.tiny import PROTOCOL


def _uniformity_p(counts: list[int], draws: int, per_draw: int) -> float:
    """Chi-square goodness of fit of inclusion counts against every unit equally likely: each of
    the N units is expected draws * per_draw / N times (Pearson's statistic, N - 1 degrees of
    freedom: the counts sum to draws * per_draw)."""
    expected = draws * per_draw / len(counts)
    statistic = sum((c - expected) ** 2 / expected for c in counts)
    return float(chi2.sf(statistic, len(counts) - 1))


@pytest.mark.parametrize(("fraction", "population", "size"),
                         [(0.2, 40, 8), (0.2, 6, 1), (0.25, 6, 2), (0.5, 5, 3), (1.0, 7, 7), (0.0, 9, 0),
                          (0.05, 9, 0)])
def test_the_size_is_the_fraction_of_the_trials_rounded_half_up(fraction, population, size):
    # 0.25 * 6 = 1.5 -> 2 and 0.5 * 5 = 2.5 -> 3 (half up, not Python's half-to-even round)
    sample = draw_audit(fraction, population, seed=12345)
    assert sample.size == len(sample.order) == size
    assert sample.trial_ids == frozenset(sample.order) and len(set(sample.order)) == size
    assert all(0 <= int(t) < population for t in sample.trial_ids)
    assert sample.population == population and sample.fraction == fraction
    assert math.isclose(sample.inclusion_probability, size / population)


def test_the_seed_reproduces_the_sample_and_other_seeds_do_not():
    first = draw_audit(0.2, 40, seed=2**100 + 7)
    assert draw_audit(0.2, 40, seed=2**100 + 7) == first                # same seed, same sample and order
    others = {draw_audit(0.2, 40, seed=s).order for s in range(20)}
    assert len(others) == 20 and first.order not in others
    # the oracle: numpy's PCG64 from SeedSequence(seed), first k of a permutation (design/audit.py)
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(2**100 + 7)))
    assert first.order == tuple(str(int(s)) for s in rng.permutation(40)[:8])


SEEDS = 4000


def test_every_trial_is_equally_likely_in_the_sample_and_in_any_prefix_of_its_order():
    population, fraction = 20, 0.25            # k = 5
    whole, prefix2 = [0] * population, [0] * population
    for seed in range(SEEDS):
        sample = draw_audit(fraction, population, seed)
        for t in sample.trial_ids:
            whole[int(t)] += 1
        for t in sample.order[:2]:             # an interrupted session that labelled 2 of the 5
            prefix2[int(t)] += 1
    assert sum(whole) == SEEDS * 5 and sum(prefix2) == SEEDS * 2   # count guard
    assert _uniformity_p(whole, SEEDS, 5) > 1e-3
    assert _uniformity_p(prefix2, SEEDS, 2) > 1e-3
    # the positive control: a draw that favours low slots a little (each pick is the lower of two
    # uniform picks half the time) fails the same check
    import random

    biased = [0] * population
    rng = random.Random(1)
    for _ in range(SEEDS):
        pool = list(range(population))
        for _ in range(5):
            pick = min(rng.sample(pool, 2)) if rng.random() < 0.5 and len(pool) > 1 else rng.choice(pool)
            pool.remove(pick)
            biased[pick] += 1
    assert _uniformity_p(biased, SEEDS, 5) < 1e-6


def _audited_store(tmp_path, fraction: float) -> tuple[CampaignStore, int]:
    """The tiny protocol (6 trials) frozen in a new store, with `judging.audit` at `fraction` (0: as shipped)."""
    loaded = load_protocol(PROTOCOL)
    text = loaded.text
    if fraction:
        text = text.replace("judging: {judges: 1,", f"judging: {{judges: 1, auto: counted, audit: {fraction},")
        assert text != loaded.text
    schedule = draw_schedule(loaded.protocol, loaded.layout)
    store = CampaignStore.create(tmp_path / "c", name="c", protocol_path=str(loaded.path), protocol_text=text,
                                 protocol_sha256=hashlib.sha256(text.encode()).hexdigest(),
                                 layout_text=loaded.layout_text, layout_sha256=loaded.layout_sha256,
                                 rig_path="r.yaml", rig_text="{}", simulated=True, schedule=schedule,
                                 audit=fraction)
    return store, len(schedule)


def test_the_store_freezes_the_sample_with_its_seed_and_gives_it_back(tmp_path):
    store, n = _audited_store(tmp_path, 0.5)
    try:
        sample = store.audit_sample()
    finally:
        store.close()
    assert isinstance(sample, AuditSample) and n == 6 and sample.size == 3 and sample.population == 6
    assert sample == draw_audit(0.5, 6, sample.seed) and sample.seed >= 2**64   # a fresh 128-bit seed
    with CampaignStore.open_readonly(tmp_path / "c") as reader:                  # read back by a reader
        assert reader.audit_sample() == sample
        rows = reader.conn.execute("SELECT slot, draw_rank, seed FROM audit ORDER BY draw_rank").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(s, i) for i, s in enumerate(sample.slots)]
    assert {r[2] for r in rows} == {str(sample.seed)}


def test_two_campaigns_of_one_protocol_draw_different_samples(tmp_path):
    a, _ = _audited_store(tmp_path / "a", 0.5)
    b, _ = _audited_store(tmp_path / "b", 0.5)
    try:
        assert a.audit_sample().seed != b.audit_sample().seed
    finally:
        a.close()
        b.close()


def test_no_audit_is_none_and_an_altered_sample_is_refused(tmp_path):
    plain, _ = _audited_store(tmp_path / "plain", 0)
    try:
        assert plain.audit_sample() is None
        assert plain.conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 0
    finally:
        plain.close()
    store, _ = _audited_store(tmp_path, 0.5)
    sample = store.audit_sample()
    store.close()
    outside = next(s for s in range(6) if not sample.includes(s))
    with sqlite3.connect(tmp_path / "c" / "campaign.db") as conn:   # an edit outside the tool
        conn.execute("UPDATE audit SET slot = ? WHERE draw_rank = 0", (outside,))
    conn.close()
    with pytest.raises(BadInput, match="audit slot"):                # the evidence chain names it
        CampaignStore.open_readonly(tmp_path / "c")
    with CampaignStore.open_readonly(tmp_path / "c", allow_broken_chain=True) as reader:
        with pytest.raises(BadInput, match="not the one its seed draws"):   # and the seed check too
            reader.audit_sample()
