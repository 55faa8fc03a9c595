"""Several arms, one campaign: three station processes on the sim rig share a PostgreSQL store;
one is SIGKILLed in the middle of an episode and restarted. Every trial is done exactly once,
the interrupted attempt is on record, the outcomes equal a single-station SQLite run of the same
protocol and seed, and judging and the report work on the same store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import psycopg
import pytest

from support.cli import run_main, run_module
from support.repo import REPO
from support.tiny import DATA, RIG

LEASE_S = 3


def _protocol(tmp_path):
    """The tiny protocol (3 blocks of 2 trials) with a short station lease."""
    text = (DATA / "tiny_protocol.yaml").read_text() + f"stations: {{lease_s: {LEASE_S}}}\n"
    (tmp_path / "tiny_layout.yaml").write_text((DATA / "tiny_layout.yaml").read_text())
    path = tmp_path / "stations.yaml"
    path.write_text(text)
    return path


def _station(protocol, url, videos, name, log, rig=RIG):
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(rig), "--store", url,
         "--out", str(videos), "--station", name], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def _running_attempt_of(conn, station):
    return conn.execute(
        "SELECT a.id FROM attempts a JOIN trials t ON t.slot = a.slot JOIN blocks b ON b.unit = t.unit"
        " WHERE a.status = 'running' AND b.station = %s AND b.state = 'claimed'", (station,)).fetchone()


@pytest.mark.slow
def test_three_stations_one_killed_mid_episode(pg_cluster, tmp_path, tiny_reference, capsys):
    protocol = _protocol(tmp_path)
    url = pg_cluster.new_database()
    videos = tmp_path / "shared"
    logs = {n: open(tmp_path / f"{n}.log", "w+") for n in ("s1", "s2", "s3", "s2b")}
    procs = {n: _station(protocol, url, videos, n, logs[n]) for n in ("s1", "s2", "s3")}
    try:
        deadline = time.monotonic() + 240
        with psycopg.connect(url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                try:
                    if _running_attempt_of(conn, "s2"):
                        break
                except psycopg.errors.UndefinedTable:
                    pass  # the stations have not created their tables yet
                assert procs["s2"].poll() is None, (tmp_path / "s2.log").read_text()
                time.sleep(0.02)
            else:
                pytest.fail("station s2 never started an episode")
        procs["s2"].send_signal(signal.SIGKILL)
        procs["s2"].wait(timeout=30)
        procs["s2b"] = _station(protocol, url, videos, "s2", logs["s2b"])
        for name in ("s1", "s3", "s2b"):
            assert procs[name].wait(timeout=400) == 0, (tmp_path / f"{name}.log").read_text()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    with psycopg.connect(url) as conn:
        trials = conn.execute("SELECT slot, state FROM trials ORDER BY slot").fetchall()
        done = dict(conn.execute("SELECT slot, count(*) FROM attempts WHERE status = 'done'"
                                 " GROUP BY slot").fetchall())
        interrupted = conn.execute("SELECT reason FROM attempts WHERE status = 'aborted'").fetchall()
        physics = dict(conn.execute("SELECT slot, physics_success FROM episodes").fetchall())
        blocks = conn.execute("SELECT count(DISTINCT station), bool_and(state = 'done') FROM blocks").fetchone()
        stations = conn.execute("SELECT name, rig_sha256 FROM stations ORDER BY name").fetchall()
        finished = conn.execute("SELECT stop_reason FROM campaign").fetchone()[0]
    assert len(trials) == 6 and all(state == "done" for _, state in trials)
    assert done == {slot: 1 for slot, _ in trials}                 # every trial done exactly once
    assert any("interrupted" in reason for (reason,) in interrupted), interrupted
    assert blocks[1] and blocks[0] >= 2 and [n for n, _ in stations] == ["s1", "s2", "s3"]
    assert finished == "complete"

    with sqlite3.connect(tiny_reference / "campaign.db") as conn:  # same seed, one station, SQLite
        assert physics == dict(conn.execute("SELECT slot, physics_success FROM episodes"))

    report = run_module("report", videos, "--store", url, "--format", "json")
    assert report.code == 0, report.err
    data = json.loads(report.out)
    assert data["sessions"]["killed"] >= 1                       # the SIGKILLed station's session
    assert data["campaign"]["aborted"] >= 1                      # its interrupted attempt
    per_station = data["stations"]["per_station"]
    assert sum(row["pairs"] for row in per_station.values()) == 3 and set(per_station) <= {"s1", "s2", "s3"}
    assert all(row["median_block_s"] > 0 for row in per_station.values())
    made = run_module("store", "add-judge", url, "judy")
    assert made.code == 0, made.err
    from orchestrator.judging.blinding import CampaignSource
    from orchestrator.store.postgres import using_server

    database = url.split("@/")[1].split("?")[0]
    with using_server(pg_cluster.url(database, "judy")):
        source = CampaignSource(videos, "judy")
        for episode in source.episodes():
            assert all(p.is_file() for p in episode.videos.values())
            source.add(episode.id, "success")
        source.close()
    judged = run_main(capsys, "report", videos, "--store", url, "--judge", "judy", "--format", "json")   # in this process
    assert judged.code == 0 and json.loads(judged.out)["policies"]["A"]["successes"] == 3, judged.err


def test_the_stopping_rule_is_global_across_stations(pg_cluster, tmp_path):
    """max_layouts: 1 pre-registered: after the first block the rule says stop on the whole
    campaign; the station stops claiming and a second station started later runs nothing."""
    from orchestrator.commands.referees import campaign_referees
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.stations import run_station

    protocol = _protocol(tmp_path)
    text = protocol.read_text().replace("stopping: none", "stopping: {kind: evalue, max_layouts: 1}")
    assert "max_layouts: 1" in text
    protocol.write_text(text)
    url = pg_cluster.new_database()
    lines: list[str] = []
    for station in ("first", "second"):
        opened = open_campaign(protocol, RIG, tmp_path / "videos", store_url=url, station=station)
        try:
            summary = run_station(opened, station, say=lines.append, referees=campaign_referees())
        finally:
            opened.store.close()
        assert summary.stopped_early and "reached max_layouts = 1" in summary.stopped_early
    with psycopg.connect(url) as conn:
        done = conn.execute("SELECT count(*) FROM trials WHERE state = 'done'").fetchone()[0]
        blocks = conn.execute("SELECT station, state FROM blocks WHERE state <> 'pending'").fetchall()
    assert done == 2 and blocks == [("first", "done")]
    assert lines[-1].startswith("campaign is complete (reached max_layouts")   # the second station


@pytest.mark.slow
def test_a_station_runs_the_autonomous_reset(pg_cluster, tmp_path, capsys):
    # reset: auto on the station path (the same sequential runner, its queue refilled block by
    # block): the first cube of the session by hand, every later one by the arm, and the counts
    # of the report's interventions from the server store
    protocol = _protocol(tmp_path)
    protocol.write_text(protocol.read_text() + "start_check: {mode: enforce}\nreset: {mode: auto, max_tries: 3}\n")
    url = pg_cluster.new_database()
    videos = tmp_path / "shared"
    with open(tmp_path / "s1.log", "w+") as log:
        station = _station(protocol, url, videos, "s1", log, rig=REPO / "hardware" / "sim.yaml")   # its 320x240 front camera
        assert station.wait(timeout=400) == 0, (tmp_path / "s1.log").read_text()
    with psycopg.connect(url) as conn:
        states = [s for (s,) in conn.execute("SELECT state FROM trials")]
        resets = [d for (d,) in conn.execute("SELECT data FROM events WHERE kind = 'cube_reset' ORDER BY id")]
        checks = [d for (d,) in conn.execute("SELECT data FROM events WHERE kind = 'start_check'")]
    assert states == ["done"] * 6
    resets = [json.loads(d) if isinstance(d, str) else d for d in resets]
    assert len(resets) == 5, resets     # trials 2-6: the arm
    # Most resets place the cube. Not all on every machine: the same seeded simulation lands the
    # cube differently on another CPU (floating point), and on one machine the two resets to M20,
    # 29 cm out near the 30 cm reach limit, left it 40 mm beyond, out of reach. A reset that
    # misses is handed to the operator, which the report must then count, one by one, by cause.
    placed = [r for r in resets if r["passes"]]
    assert len(placed) >= 3, resets
    lost = sum(1 for r in resets if not r["passes"] and (r["why"] or "").startswith("cube"))
    corrected = len(resets) - len(placed) - lost
    assert len(checks) >= 6
    report = run_main(capsys, "report", videos, "--store", url, "--format", "json")   # fresh: the first test's
    assert report.code == 0, report.err
    interventions = json.loads(report.out)["interventions"]
    causes = {k: n for k, n in interventions["by_cause"].items() if n}
    expected = {"placement": 1, "cube lost": lost, "correction": corrected}
    assert causes == {k: n for k, n in expected.items() if n}, (interventions, resets)
    assert interventions["total"] == 1 + lost + corrected, interventions



@pytest.mark.slow
@pytest.mark.parametrize("killed", [False, True], ids=["ended", "killed"])
def test_a_station_asks_about_the_unanswered_stops_of_its_own_sessions_before_it_claims(pg_cluster, tmp_path,
                                                                                         monkeypatch, killed):
    """Station `first`'s operator stops an episode and leaves the reason unanswered (the console
    closed; `killed`: then the process dies before its session's end is written, as a SIGKILL
    leaves it). Station `second`'s next session is not asked about it (another arm's stop);
    `first`'s next session is, before it claims a block, and the answer is recorded beside the abort."""
    from orchestrator.rigs.base import EmergencyStop
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.operator_protocol import AutoOperator, StopRequested
    from orchestrator.run.stations import run_station
    from orchestrator.store.run_sessions import SessionRows

    class StopsAndLeaves(AutoOperator):
        def poll(self, elapsed_s):
            if elapsed_s > 0.2:
                raise EmergencyStop("emergency stop by operator")

        def episode_ended(self, cue, aborted_reason):
            raise StopRequested("the console closed")

    class Answers(AutoOperator):
        def __init__(self):
            super().__init__(say=lambda s: None)
            self.asked: list[str] = []

        def question(self, line):
            self.asked.append(line)
            return "1 it swung"

    protocol, url = _protocol(tmp_path), pg_cluster.new_database()

    def session(station, operator, stop_after):
        opened = open_campaign(protocol, RIG, tmp_path / "videos", store_url=url, station=station)
        try:
            run_station(opened, station, operator=operator, say=lambda s: None, stop_after=stop_after)
        except StopRequested:
            pass
        finally:
            opened.store.close()

    with monkeypatch.context() as patch:
        if killed:
            patch.setattr(SessionRows, "end_session", lambda *args: None)
        session("first", StopsAndLeaves(say=lambda s: None), 1)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM sessions WHERE ended_at IS NULL").fetchone() == (int(killed),)
    with psycopg.connect(url) as conn:
        ((attempt, answer),) = conn.execute("SELECT id, operator_answer FROM attempts"
                                            " WHERE abort_class = 'operator_unanswered'").fetchall()
    assert answer is None
    second, first = Answers(), Answers()
    session("second", second, 0)
    assert second.asked == []
    session("first", first, 0)
    assert len(first.asked) == 1 and "no reason was given for the stop" in first.asked[0], first.asked
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT operator_answer FROM attempts WHERE id = %s", (attempt,)).fetchone() == (
            "unsafe motion: it swung",)
