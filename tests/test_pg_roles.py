"""Blinding enforced by the PostgreSQL server: a judge's role (`orchestrator store add-judge`)
reads only the blinded view and writes only its own labels; every other query is refused by
the server itself ("permission denied", or row-level security hiding other judges' rows)."""

from __future__ import annotations

import psycopg
import pytest

from support.cli import run_main, run_module
from support.pg_campaign import campaign_on_server
from support.tiny import PROTOCOL, RIG


@pytest.fixture(scope="module")
def campaign(pg_cluster, tmp_path_factory):
    """A campaign on the server with 4 committed episodes, written through the store API."""
    videos = tmp_path_factory.mktemp("videos")
    url, store = campaign_on_server(pg_cluster, videos, files_folder="episodes")
    store.close()
    for judge in ("alice", "bob"):
        made = run_module("store", "add-judge", url, judge)
        assert made.code == 0 and f"judge role {judge!r} created" in made.out, made.err
    return url, videos


def _as(pg_cluster, url: str, role: str) -> psycopg.Connection:
    database = url.split("@/")[1].split("?")[0]
    return psycopg.connect(pg_cluster.url(database, role), autocommit=True)


@pytest.mark.parametrize("query", [
    "SELECT policy FROM trials", "SELECT seed FROM trials", "SELECT * FROM trials",
    "SELECT physics_success FROM episodes", "SELECT id FROM episodes",
    "SELECT protocol_text FROM campaign", "SELECT name FROM campaign", "SELECT * FROM events",
    "SELECT reason FROM attempts", "SELECT abort_cause FROM attempts", "SELECT * FROM sessions",
    "UPDATE trials SET state = 'pending'", "DELETE FROM judgments",
])
def test_the_server_refuses_a_judge_the_key(campaign, pg_cluster, query):
    url, _ = campaign
    with _as(pg_cluster, url, "alice") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute(query)


def test_a_judge_labels_through_the_blinded_view_only(campaign, pg_cluster):
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.store.postgres import using_server

    url, videos = campaign
    database = url.split("@/")[1].split("?")[0]
    alice_url, bob_url = pg_cluster.url(database, "alice"), pg_cluster.url(database, "bob")
    with using_server(alice_url):
        source = CampaignSource(videos, "alice")
        episodes = source.episodes()
        assert len(episodes) == 4 and source.info.success_test.startswith("cube bottom lifted")
        first = source.add(episodes[0].id, "success")
        second = source.add(episodes[1].id, "failure", "dropped")
        source.retract(second.id)
        assert [r.episode_id for r in source.history()] == [episodes[0].id]
        source.close()
    with using_server(bob_url):
        bob = CampaignSource(videos, "bob")
        assert bob.history() == []          # alice's labels are invisible to bob
        bob.add(episodes[0].id, "failure")
        bob.retract(first.id)               # not bob's: the server matches no row
        bob.close()
    with _as(pg_cluster, url, "bob") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO judgments (episode_id, judge, label, created_at, source)"
                         " VALUES (%s, 'alice', 'failure', 0, 'local')", (episodes[2].id,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO judgments (episode_id, judge, label, created_at, source)"
                         " VALUES (%s, 'bob', 'success', 0, 'physics')", (episodes[2].id,))
    with psycopg.connect(url) as owner:  # the operator (owner) reads every label
        rows = owner.execute("SELECT judge, label, retracted_at IS NULL FROM judgments"
                             " WHERE judge IN ('alice', 'bob') ORDER BY id").fetchall()
    assert rows == [("alice", "success", True), ("alice", "failure", False), ("bob", "failure", True)]


def test_add_judge_errors(campaign, pg_cluster, capsys):
    """The first refusal from a fresh `orchestrator` process, the others from `main` in this one."""
    url, _ = campaign
    again = run_module("store", "add-judge", url, "alice")
    assert again.code == 2 and "already exists" in again.err and len(again.err_lines) == 1
    bad = run_main(capsys, "store", "add-judge", url, "physics")
    assert bad.code == 2 and "judge name" in bad.err
    database = url.split("@/")[1].split("?")[0]
    as_judge = run_main(capsys, "store", "add-judge", pg_cluster.url(database, "alice"), "carol")
    assert as_judge.code == 2 and "owner" in as_judge.err, as_judge.err
    report = run_main(capsys, "report", RIG.parent, "--store", pg_cluster.url(database, "alice"))
    assert report.code == 1 and "permission denied" in report.err and len(report.err_lines) == 1


def test_an_operator_sees_no_human_label_before_judging_is_complete(pg_cluster, tmp_path, capsys):
    """`judging.hide_labels_from_operator`: the operator's role runs trials but the server
    filters every human label out of its queries until the campaign has ended and each episode
    has its judges' labels; the physics labels stay visible."""
    from orchestrator.run.campaign import open_campaign
    from orchestrator.store.postgres import using_server
    from orchestrator.store.sqlite import CampaignStore, EpisodeRecord, new_episode_id

    (tmp_path / "tiny_layout.yaml").write_text((PROTOCOL.parent / "tiny_layout.yaml").read_text())
    protocol = tmp_path / "hidden.yaml"
    protocol.write_text(PROTOCOL.read_text().replace(
        "judging: {judges: 1,", "judging: {judges: 1, hide_labels_from_operator: true,"))
    assert "hide_labels_from_operator: true" in protocol.read_text()
    owner_url = pg_cluster.new_database(owner="labadmin")
    database = owner_url.split("@/")[1].split("?")[0]
    made = run_module("store", "init", owner_url, protocol, "--rig", RIG, "--out", tmp_path / "videos")
    assert made.code == 0 and "6 trials scheduled" in made.out, made.err
    for verb, name in (("add-operator", "oper1"), ("add-judge", "jo1")):
        added = run_main(capsys, "store", verb, owner_url, name)   # `store init` was the fresh process
        assert added.code == 0, added.err
    op_url, judge_url = pg_cluster.url(database, "oper1"), pg_cluster.url(database, "jo1")
    opened = open_campaign(protocol, RIG, tmp_path / "videos", store_url=op_url)  # the operator runs trials
    episodes = []
    for trial in opened.store.trials()[:2]:
        episode_id = new_episode_id()
        attempt = opened.store.begin_attempt(trial.slot, episode_id)
        opened.store.finish_attempt(attempt, EpisodeRecord(
            episode_id=episode_id, frames=50, duration_s=5.0, cameras=["front"], files={},
            physics_success=True))
        episodes.append(episode_id)
    opened.store.close()
    with using_server(judge_url):
        judge = CampaignStore.open_for_labels(tmp_path / "videos")
        for episode_id in episodes:
            judge.add_judgment(episode_id, "jo1", "failure")
        judge.close()

    def visible(url):
        with psycopg.connect(url) as conn:
            return sorted(conn.execute("SELECT judge FROM judgments WHERE retracted_at IS NULL").fetchall())

    assert visible(op_url) == [("physics",), ("physics",)]             # jo1's labels are withheld
    assert visible(owner_url) == [("jo1",), ("jo1",), ("physics",), ("physics",)]
    report = run_module("report", tmp_path / "videos", "--store", op_url, "--judge", "jo1")
    assert report.code == 2 and "judge 'jo1' has no labels" in report.err
    with using_server(op_url):                     # the operator can still undo an episode
        store = CampaignStore.open_for_run(tmp_path / "videos")
        store.invalidate_episode(episodes[1], "files lost")
        store.mark_finished("stopped by the test")
        store.close()
    assert visible(op_url) == [("jo1",), ("physics",)]                 # judging complete: shown


def test_a_judge_sends_an_invalid_start_back_through_the_server(campaign, pg_cluster):
    """The judge's role has no right on trials, attempts or episodes (refused above), yet an
    invalid start must send the trial back for a re-run: the server's security-definer
    `invalid_start` does it, and nothing of the schedule comes back to the judge."""
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.store.postgres import using_server

    url, videos = campaign
    database = url.split("@/")[1].split("?")[0]
    with using_server(pg_cluster.url(database, "alice")):
        source = CampaignSource(videos, "alice")
        before = [e.id for e in source.episodes()]
        victim = before[-1]
        source.invalidate(victim, "cube not on its mark")
        assert victim not in [e.id for e in source.episodes()]
        source.close()
    with psycopg.connect(url) as owner:
        assert owner.execute("SELECT count(*) FROM episodes WHERE id = %s", (victim,)).fetchone()[0] == 0
        states = owner.execute("SELECT state, episode_id FROM trials WHERE state = 'aborted'").fetchall()
        assert states == [("aborted", None)]
        reason, cls = owner.execute("SELECT reason, abort_class FROM attempts WHERE status = 'aborted'").fetchone()
        assert reason == "invalid start (judge alice): cube not on its mark"
        assert cls == "invalid_start"     # classed as on a SQLite store (reported per policy, re-run)
        cause = owner.execute("SELECT abort_cause FROM attempts WHERE status = 'aborted'").fetchone()[0]
        assert cause == "invalid start"   # and its cause recorded, as on a SQLite store
        kinds = [k for (k,) in owner.execute("SELECT kind FROM events WHERE kind = 'invalid_start'")]
        assert kinds == ["invalid_start"]
    with _as(pg_cluster, url, "alice") as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="not in this campaign"):
            conn.execute("SELECT invalid_start(%s, 'again')", (victim,))


def test_a_judge_on_the_server_is_told_the_protocols_success_height(pg_cluster, tmp_path):
    """The judge's guide on a server store is drawn at the frozen protocol's height (it was the
    default 4 cm whatever the protocol said); the positive control: the same campaign read by
    its owner on the server gives the same facts."""
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.store.postgres import using_server

    (tmp_path / "tiny_layout.yaml").write_text((PROTOCOL.parent / "tiny_layout.yaml").read_text())
    protocol = tmp_path / "higher.yaml"
    protocol.write_text(PROTOCOL.read_text().replace("min_height_m: 0.04", "min_height_m: 0.065"))
    assert "min_height_m: 0.065" in protocol.read_text()
    url, store = campaign_on_server(pg_cluster, tmp_path / "videos", protocol=protocol)
    store.close()
    assert run_module("store", "add-judge", url, "height_judge").code == 0
    database = url.split("@/")[1].split("?")[0]
    seen = []
    for who in (pg_cluster.url(database, "height_judge"), url):
        with using_server(who):
            source = CampaignSource(tmp_path / "videos", "height_judge")
            seen.append((source.info.min_height_m, source.info.success_test))
            source.close()
    assert seen[0] == seen[1] == (0.065, "cube bottom lifted >= 6.5 cm, both jaws on it, held >= 1 s")
