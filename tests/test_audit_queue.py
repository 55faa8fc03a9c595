"""The judges' queue with an audit (`judging: {auto: counted, audit: F}`; docs/judging.md "The
audit"): judges are offered every episode the `auto` rater was unsure of (or did not rate) plus
every audited one, and nothing else; nothing they are given tells the two apart (the same fields,
ids drawn alike, an order that never sees which is which); a judge's connection cannot read the
audit (a planted canary, and the same column read unsealed as the positive control); any prefix of
a judge's order leaves a uniform random part of the audit labelled. Without an audit, every
episode is offered, as before. The expected queues are computed from the store's file with
sqlite3 (the oracle), not with the project's code."""

from __future__ import annotations

import dataclasses
import random
import sqlite3
from pathlib import Path

import pytest
from scipy.stats import chi2

from orchestrator.core.errors import BadInput
from orchestrator.design.audit import draw_audit
from orchestrator.design.protocol import load_protocol
from orchestrator.design.schedule import draw_schedule
from orchestrator.judging.blinding import CampaignSource, contested, judge_order
from orchestrator.store import chain
from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id
from support.audit_protocol import audited_protocol

# the `auto` label of each trial's episode by slot (None: not rated); the tiny protocol x 2 repeats
AUTO = {0: "unsure", 1: None, 2: "success", 3: "failure", 4: "success", 5: "failure",
        6: "success", 7: "failure", 8: "success", 9: "failure", 10: "success", 11: "failure"}


def _campaign(tmp_path: Path, fraction: float) -> Path:
    """The tiny protocol with 2 repeats (12 trials) and `audit: fraction`, every trial done with
    the `auto` label of AUTO (no video files: the queue is read, not played)."""
    loaded = load_protocol(audited_protocol(tmp_path / "protocol", fraction, repeats=2))
    store = CampaignStore.create(
        tmp_path / "c", name="c", protocol_path=str(loaded.path), protocol_text=loaded.text,
        protocol_sha256=loaded.sha256, layout_text=loaded.layout_text, layout_sha256=loaded.layout_sha256,
        rig_path="r.yaml", rig_text="{}", simulated=True, schedule=draw_schedule(loaded.protocol, loaded.layout),
        audit=loaded.protocol.judging.audit)
    try:
        for trial in store.trials():
            episode_id = new_episode_id()
            label = AUTO[trial.slot]
            store.finish_attempt(store.begin_attempt(trial.slot, episode_id), EpisodeRecord(
                episode_id=episode_id, frames=50, duration_s=5.0, cameras=["front"],
                files={"front": f"episodes/{episode_id}/front.mp4"}, physics_success=trial.policy == "A",
                auto=None if label is None else (label, "why")))
    finally:
        store.close()
    return tmp_path / "c"


def _expected_queue(campaign: Path) -> tuple[set[str], set[str], set[str]]:
    """(queue, audited episodes, unsure-or-unrated episodes) read from the file with sqlite3."""
    with sqlite3.connect(campaign / "campaign.db") as conn:
        slots = dict(conn.execute("SELECT id, slot FROM episodes").fetchall())
        audited_slots = {r[0] for r in conn.execute("SELECT slot FROM audit")}
        sure = {r[0] for r in conn.execute("SELECT episode_id FROM judgments WHERE judge = 'auto'"
                                           " AND retracted_at IS NULL AND label IN ('success', 'failure')")}
    conn.close()
    audited = {e for e, s in slots.items() if s in audited_slots}
    unsure = set(slots) - sure
    return audited | unsure, audited, unsure


def _shown(campaign: Path, judge: str = "ann"):
    source = CampaignSource(campaign, judge)
    try:
        return source.episodes(), source.info.ref
    finally:
        source.close()


def test_the_queue_is_the_unsure_and_the_audited_episodes_and_nothing_else(tmp_path):
    campaign = _campaign(tmp_path, 0.25)                      # 3 of the 12 trials audited
    queue, audited, unsure = _expected_queue(campaign)
    assert len(audited) == 3 and len(unsure) == 2             # slot 0 unsure, slot 1 not rated
    shown, _ = _shown(campaign)
    assert {e.id for e in shown} == queue and len(shown) == len(queue)   # count guard
    assert 3 <= len(shown) <= 5 < 12                          # some sure, unaudited episodes are left out


def test_without_an_audit_every_episode_is_offered_as_before(tmp_path):
    campaign = _campaign(tmp_path, 0.0)
    with sqlite3.connect(campaign / "campaign.db") as conn:
        everything = {r[0] for r in conn.execute("SELECT id FROM episodes")}
        assert conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 0
    conn.close()
    shown, _ = _shown(campaign)
    assert {e.id for e in shown} == everything and len(everything) == 12


def test_nothing_a_judge_is_given_tells_an_audited_episode_from_an_unsure_one(tmp_path):
    # The draw's seed is fresh (never the protocol's): in 10 of the C(12, 3) = 220 draws both
    # unsure slots are audited and no episode is unsure only, so the campaign is drawn again
    # until both kinds are in the queue (20 draws all missing: about 1e-27)
    for attempt in range(20):
        campaign = _campaign(tmp_path / f"draw{attempt}", 0.25)
        _, audited, unsure = _expected_queue(campaign)
        only_audited, only_unsure = audited - unsure, unsure - audited
        if only_audited and only_unsure:                      # both kinds are in the queue
            break
    assert only_audited and only_unsure
    shown, ref = _shown(campaign)
    # the order is the judge's own order of the queue's ids: a function of the ids, the judge and
    # the campaign's random id only (it is never given which episode is which)
    assert [e.id for e in shown] == judge_order([e.id for e in shown], "ann", ref)
    by_id = {e.id: e for e in shown}

    def shape(episode) -> dict:
        """Every field of a shown episode, its id and paths reduced to their form."""
        fields = dataclasses.asdict(episode)
        fields["id"] = (len(episode.id), episode.id[:3])
        fields["videos"] = {cam: str(path).replace(episode.id, "ID").replace(str(campaign), "C")
                            for cam, path in episode.videos.items()}
        fields["mark"] = type(episode.mark).__name__
        return fields

    shapes = {repr(shape(by_id[e])) for e in only_audited | only_unsure}
    assert len(shapes) == 1, shapes                           # one form for both kinds
    assert "audit" not in repr(shown).lower() and "unsure" not in repr(shown).lower()


def test_a_judges_connection_never_reads_the_audit_planted_canary(tmp_path):
    campaign = _campaign(tmp_path, 0.25)
    canary = "777000777000777000777"
    with CampaignStore.open_for_run(campaign) as store, store.transaction() as conn:   # planted, chained
        for (slot,) in conn.execute("SELECT slot FROM audit").fetchall():
            with chain.change(conn, "audit", slot):
                conn.execute("UPDATE audit SET seed = ? WHERE slot = ?", (canary, slot))
    source = CampaignSource(campaign, "ann")
    try:
        shown = source.episodes()
        assert len(shown) >= 3 and canary not in repr(shown) and canary not in repr(source.info)
        for query in ("SELECT slot FROM audit", "SELECT * FROM audit", "SELECT seed FROM audit",
                      "SELECT count(*) FROM audit"):
            with pytest.raises(sqlite3.DatabaseError, match="prohibited|not authorized"):
                source.store.conn.execute(query).fetchall()
    finally:
        source.close()
    with CampaignStore.open_readonly(campaign) as store:      # the positive control: read unsealed
        assert [r[0] for r in store.conn.execute("SELECT seed FROM audit")] == [canary] * 3


def test_contested_first_is_refused_with_an_audit_because_it_would_tell_them_apart(tmp_path):
    campaign = _campaign(tmp_path, 0.25)
    with pytest.raises(BadInput, match="--contested-first would put the episodes") as refused:
        CampaignSource(campaign, "ann", contested_first=True)
    assert "\n" not in str(refused.value)
    with CampaignStore.open_readonly(campaign) as store:      # the ordering it would have used
        first = contested(store, "ann")
    _, audited, unsure = _expected_queue(campaign)
    assert first and first <= unsure and not first & (audited - unsure)   # it would split them


# ------------------------------------------------------------ an interrupted session

RUNS = 3000


def _uniform_p(counts: list[int]) -> float:
    """Chi-square goodness of fit of counts against equal expected counts (k - 1 degrees of freedom)."""
    expected = sum(counts) / len(counts)
    return float(chi2.sf(sum((c - expected) ** 2 / expected for c in counts), len(counts) - 1))


def _prefix_counts(order_of, m: int = 4) -> tuple[list[int], list[int], list[int]]:
    """Over RUNS campaigns of 20 trials (audit 0.25, trials 0-4 unsure) with fresh random episode
    ids: how often each audited trial is labelled when a judge stops after `m` episodes of the
    queue ordered by `order_of(ids, unsure_ids)`; how often each queue position holds an audited
    and an unsure-only episode."""
    rng = random.Random(3)
    audit = draw_audit(0.25, 20, seed=99)
    audited = sorted(audit.slots)
    unsure = set(range(5)) - set(audited)
    labelled = [0] * len(audited)
    first_audited, first_unsure = 0, 0
    for _ in range(RUNS):
        ids = {slot: f"ep_{rng.getrandbits(64):016x}" for slot in range(20)}
        queue = [ids[s] for s in sorted(set(audited) | unsure)]
        order = order_of(queue, {ids[s] for s in unsure})
        done = set(order[:m])
        for i, slot in enumerate(audited):
            labelled[i] += ids[slot] in done
        first_audited += sum(ids[s] in done for s in audited)
        first_unsure += sum(ids[s] in done for s in unsure)
    return labelled, [first_audited, len(audited)], [first_unsure, len(unsure)]


def test_a_session_stopped_early_leaves_a_uniform_random_part_of_the_audit_and_no_pattern():
    def judges_order(queue, _unsure):
        return judge_order(queue, "ann", "campaign-ref")

    labelled, (audited_first, k), (unsure_first, u) = _prefix_counts(judges_order)
    assert sum(labelled) == audited_first > 0 and k == 5 and u >= 1      # count guard
    assert _uniform_p(labelled) > 1e-3         # every audited trial equally likely to be labelled first
    # the share of the first 4 places audited episodes get is their share of the queue (no pattern)
    share = audited_first / (audited_first + unsure_first)
    assert abs(share - k / (k + u)) < 0.03, (share, k / (k + u))
    # the positive control: an order that puts the unsure episodes first (as --contested-first
    # would) shows the pattern the check looks for
    def unsure_first_order(queue, unsure):
        return sorted(queue, key=lambda e: (e not in unsure, e))   # ids are random: random within each

    _, (audited_first, _), (unsure_first, _) = _prefix_counts(unsure_first_order)
    assert abs(audited_first / (audited_first + unsure_first) - k / (k + u)) > 0.1
