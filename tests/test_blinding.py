"""Blinding: the judge's view never reaches the key; per-judge orders; nothing leaks to judges."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.errors import RuntimeFailure
from orchestrator.judging import blinding
from orchestrator.judging.blinding import CampaignSource, blinded_view, judge_order
from orchestrator.judging.bundle import write_bundle
from orchestrator.judging.tui.app import JudgeApp
from orchestrator.store import blind_view
from orchestrator.store.sqlite import CampaignStore
from support.judge_campaign import SECRET_TERMS, make_campaign, policy_of
from support.video import tag_with_policy


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("blind"))


def test_view_sql_selects_no_key_column():
    for sql in (blind_view.VIEW_SQL, blind_view.SERVER_VIEW_SQL):
        select = sql.split(" FROM ")[0].lower()
        assert "mark_id" in select          # the text read is the view's select list
        for column in ("policy", "seed", "position", "slot", "unit", "repeat"):
            assert column not in select


def test_judging_a_campaign_works_with_the_key_unreadable(campaign, tmp_path):
    """The judge's store connection is sealed: SQLite refuses the key; judging still works."""
    copy = tmp_path / "c"
    shutil.copytree(campaign, copy)
    source = CampaignSource(copy, "alice")
    for sql in ("SELECT policy FROM trials", "SELECT seed FROM trials", "SELECT position FROM trials",
                "SELECT protocol_text FROM campaign", "SELECT name FROM campaign",
                "SELECT message FROM events", "SELECT * FROM trials",
                "SELECT physics_success FROM episodes", "SELECT timing FROM episodes",
                "SELECT reason FROM attempts"):
        with pytest.raises(sqlite3.DatabaseError, match="prohibited"):
            source.store.conn.execute(sql).fetchall()
    app = JudgeApp(source, renderer="halfcell", autoplay=False)

    async def session():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("s", "f", "2", "u", "z", "s", "q")

    asyncio.run(session())
    assert [r.label for r in source.history()] == ["success", "failure", "success"]
    source.close()


def test_each_judge_keeps_own_labels(campaign, tmp_path):
    copy = tmp_path / "c"
    shutil.copytree(campaign, copy)
    alice, bob = CampaignSource(copy, "alice"), CampaignSource(copy, "bob")
    first = alice.episodes()[0].id
    alice.add(first, "success")
    bob.add(first, "failure", "missed")
    store = CampaignStore.open_readonly(copy)
    labels = {judge: {e: j.label for e, j in store.latest_labels(judge).items()}
              for judge in store.judges() if judge != "physics"}
    store.close()
    assert labels == {"alice": {first: "success"}, "bob": {first: "failure"}}
    assert [r.label for r in alice.history()] == ["success"]
    for source in (alice, bob):
        source.close()


def test_blinded_view_contents(campaign):
    store = CampaignStore.open_readonly(campaign)
    info, episodes = blinded_view(store)
    store.close()
    assert len(episodes) == 8
    assert info.success_test == "cube bottom lifted >= 4 cm, both jaws on it, held >= 1 s"
    assert info.failure_modes == ("missed", "pushed", "dropped", "collision", "other")
    for e in episodes:
        assert e.id.startswith("ep_") and len(e.id) == 19
        assert set(e.videos) == {"front", "wrist"} and all(p.is_file() for p in e.videos.values())
        assert e.mark.id.startswith("M") and e.mark.x is not None
        assert e.duration_s == 2.0 and e.frames == 30
    texts = repr(info) + repr(episodes)
    for term in SECRET_TERMS[:-1]:   # (the researcher named the directory SECRETCAMPAIGN)
        assert term not in texts


def test_two_judges_get_different_stable_orders(campaign):
    a1 = [e.id for e in CampaignSource(campaign, "alice").episodes()]
    a2 = [e.id for e in CampaignSource(campaign, "alice").episodes()]
    b = [e.id for e in CampaignSource(campaign, "bob").episodes()]
    assert a1 == a2                     # resuming keeps a judge's order
    assert a1 != b and sorted(a1) == sorted(b)


def test_orders_are_independent_of_the_policy_sequence(campaign):
    key = policy_of(campaign)
    store = CampaignStore.open_readonly(campaign)
    slot = {t.episode_id: t.slot for t in store.trials()}
    store.close()
    ids = list(key)
    first_alpha = 0
    rhos = []
    judges = [f"judge{i}" for i in range(300)]
    run_rank = {e: r for r, e in enumerate(sorted(ids, key=slot.get))}
    n = len(ids)
    for judge in judges:
        order = judge_order(ids, judge, "salt")
        first_alpha += key[order[0]] == "SECRETPOLICYALPHA"
        d2 = sum((i - run_rank[e]) ** 2 for i, e in enumerate(order))
        rhos.append(1 - 6 * d2 / (n * (n * n - 1)))      # Spearman: judge order vs run order
    # first episode's policy: a fair coin over judges (binomial 300, 1/2: sd 8.7; bounds 4.6 sd)
    assert 110 < first_alpha < 190
    # no systematic relation to the run order (mean rho sd ~0.022 under independence)
    assert abs(sum(rhos) / len(rhos)) < 0.1
    assert len({tuple(judge_order(ids, j, "salt")) for j in judges}) > 250


def test_the_go_to_list_holds_the_judges_own_numbers_and_labels_only(campaign, tmp_path):
    """`j` lists the episodes by their number in this judge's own order (random per judge:
    the test above) with this judge's own labels: not another judge's, not a policy, not an id."""
    from orchestrator.judging.session import JudgeSession

    directory = Path(shutil.copytree(campaign, tmp_path / "c"))
    bob = JudgeSession(CampaignSource(directory, "bob"))
    for verdict in ("success", "failure", "unsure"):
        bob.label(verdict)
    alice = JudgeSession(CampaignSource(directory, "alice"))
    listed = alice.listing()
    assert [n for n, _ in listed] == list(range(1, len(alice.order) + 1))
    assert {label for _, label in listed} == {None}                 # bob's labels are not alice's
    assert [label for _, label in bob.listing()][:3] == ["success", "failure", "unsure"]
    text = alice.listing_text() + bob.listing_text()
    assert set(text) <= set("0123456789:sfu- "), text               # numbers and labels, nothing else
    for term in SECRET_TERMS:
        assert term.lower() not in text.lower()
    bob.source.close()
    alice.source.close()


@pytest.mark.subprocess
def test_judge_package_cannot_reach_the_key():
    """Importing the judge app loads none of the modules that can read the key."""
    code = ("import sys, orchestrator.judging.tui.app, orchestrator.judging.session, orchestrator.judging.source\n"
            "bad = [m for m in ('orchestrator.store.sqlite', 'orchestrator.judging.blinding', 'orchestrator.judging.bundle',"
            " 'orchestrator.design.schedule', 'orchestrator.design.protocol', 'sqlite3') if m in sys.modules]\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _all_bytes_and_paths(root: Path) -> list[tuple[str, bytes]]:
    return [(str(p.relative_to(root)), p.read_bytes() if p.is_file() else b"") for p in root.rglob("*")]


def _leaks(files: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    """(file, term) for every secret term found in a file's name or bytes (case-insensitive)."""
    return [(rel, term) for rel, data in files for term in SECRET_TERMS
            if term.lower() in rel.lower() or term.lower().encode() in data.lower()]


def test_campaign_files_a_judge_opens_hold_no_policy_name(campaign, tmp_path):
    files = _all_bytes_and_paths(campaign / "videos")
    videos = [data for rel, data in files if rel.endswith(".mp4")]
    assert len(videos) == 16 and all(len(data) > 1000 for data in videos)   # 8 episodes x 2 cameras, all scanned
    assert _leaks(files) == []
    # Positive control: the same scan finds a policy name planted in one video's metadata.
    copy = tmp_path / "videos"
    shutil.copytree(campaign / "videos", copy)
    planted = next(copy.rglob("front.mp4"))
    tag_with_policy(planted)
    found = _leaks(_all_bytes_and_paths(copy))
    assert {term for _, term in found} >= {"SECRETPOLICYALPHA"}
    assert {rel for rel, _ in found} == {str(planted.relative_to(copy))}


def test_bundle_holds_no_policy_name_even_in_video_metadata(campaign, tmp_path):
    copy = tmp_path / "c"
    shutil.copytree(campaign, copy)
    tag_with_policy(next((copy / "videos").rglob("front.mp4")))   # the bundle must drop it
    bundle = write_bundle(copy, tmp_path / "bundle").path
    files = _all_bytes_and_paths(bundle)
    assert len([r for r, _ in files if r.endswith(".mp4")]) == 16
    assert _leaks(files) == []


def test_bundle_refuses_a_leak_it_cannot_remove(tmp_path):
    directory = make_campaign(tmp_path / "leaky", marks=1, cameras=("SECRETPOLICYALPHA_cam",))
    with pytest.raises(RuntimeFailure, match="blinding check failed"):
        write_bundle(directory, tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bundle")]   # no partial folder


def test_forbidden_terms_cover_names_paths_and_revisions(campaign):
    store = CampaignStore.open_readonly(campaign)
    text = store.campaign()["protocol_text"]
    store.close()
    terms = blinding.forbidden_terms(text)
    for term in ("SECRETPOLICYALPHA", "SECRETPOLICYBRAVO", "act_SECRETPATHALPHA",
                 "secretlab/diffusion_SECRETPATHBRAVO", "SECRETREVISION"):
        assert term in terms
