"""A campaign on a test PostgreSQL server, written through the store API as a run writes it."""

from __future__ import annotations

from pathlib import Path

from support.tiny import PROTOCOL, RIG


def campaign_on_server(pg_cluster, videos: Path, *, files_folder: str = "videos", episodes: int = 4,
                       protocol: Path = PROTOCOL):
    """A new database of `pg_cluster` holding the tiny campaign (or `protocol`'s; videos under `videos`), with its
    first `episodes` trials committed (5 s, 50 frames, a front camera; physics success: policy
    A's trials). Returns (url, the store, still open for running)."""
    from orchestrator.run.campaign import open_campaign
    from orchestrator.store.sqlite import EpisodeRecord, new_episode_id

    url = pg_cluster.new_database()
    store = open_campaign(protocol, RIG, videos, store_url=url).store
    for trial in store.trials()[:episodes]:
        episode_id = new_episode_id()
        attempt = store.begin_attempt(trial.slot, episode_id)
        store.finish_attempt(attempt, EpisodeRecord(
            episode_id=episode_id, frames=50, duration_s=5.0, cameras=["front"],
            files={"front": f"{files_folder}/{episode_id}/front.mp4"}, physics_success=trial.policy == "A"))
    return url, store


# The judges' view as the server stores before schema 7 made it (every episode: no audit yet).
SCHEMA_6_BLIND_VIEW = ("CREATE OR REPLACE VIEW blind_episodes WITH (security_barrier) AS"
                       " SELECT e.id, e.frames, e.duration_s, e.files, t.mark_id FROM episodes e"
                       " JOIN trials t ON t.slot = e.slot")


def drop_the_audit(conn) -> None:
    """A server store back to before schema 7: the judges' view as it was (its grants kept), no
    `audit` table (the upgrade makes both again)."""
    conn.execute(SCHEMA_6_BLIND_VIEW)
    conn.execute("DROP TABLE audit")
