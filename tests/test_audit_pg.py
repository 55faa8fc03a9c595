"""The audit sample on a PostgreSQL store: frozen with the campaign on the server and read back by
`CampaignStore.audit_sample()` as on SQLite, and refused by the server to a judge's and an
operator's role (hidden from both; the owner, a positive control, reads it)."""

from __future__ import annotations

import psycopg
import pytest

from orchestrator.design.audit import draw_audit
from support.audit_protocol import audited_protocol
from support.cli import run_module
from support.pg_campaign import campaign_on_server


@pytest.fixture(scope="module")
def audited(pg_cluster, tmp_path_factory):
    """The tiny protocol with `audit: 0.5` (3 of its 6 trials) on the server, 4 episodes committed."""
    folder = tmp_path_factory.mktemp("protocol")
    videos = tmp_path_factory.mktemp("videos")
    url, store = campaign_on_server(pg_cluster, videos, protocol=audited_protocol(folder, 0.5))
    try:
        sample = store.audit_sample()
    finally:
        store.close()
    for kind, name in (("add-judge", "audit_alice"), ("add-operator", "audit_olga")):
        made = run_module("store", kind, url, name)
        assert made.code == 0, made.err
    return url, videos, sample


def _as(pg_cluster, url: str, role: str) -> psycopg.Connection:
    database = url.split("@/")[1].split("?")[0]
    return psycopg.connect(pg_cluster.url(database, role), autocommit=True)


def test_the_server_store_freezes_the_sample_and_gives_it_back(audited, pg_cluster):
    url, videos, sample = audited
    assert sample is not None and sample.size == 3 and sample.population == 6
    assert sample == draw_audit(0.5, 6, sample.seed)
    from orchestrator.store.postgres import using_server
    from orchestrator.store.sqlite import CampaignStore

    with using_server(url), CampaignStore.open_readonly(videos) as reader:   # a fresh reader, chain checked
        assert reader.evidence.intact and reader.audit_sample() == sample


@pytest.mark.parametrize("role", ["audit_alice", "audit_olga"])   # roles are the whole cluster's: names of their own
def test_the_server_refuses_the_audit_to_judges_and_operators(audited, pg_cluster, role):
    url, _, sample = audited
    with _as(pg_cluster, url, role) as conn:
        for query in ("SELECT * FROM audit", "SELECT slot FROM audit", "SELECT count(*) FROM audit"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                conn.execute(query)
    with psycopg.connect(url, autocommit=True) as owner:   # the positive control: the owner reads it
        assert {r[0] for r in owner.execute("SELECT slot FROM audit").fetchall()} == set(sample.slots)
