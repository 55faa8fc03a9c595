"""Report additions from a campaign store: control-loop timing per policy, run sessions, and
whether the operator was also a judge (none of which an outcomes CSV has)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sqlite3
from pathlib import Path

import pytest

from orchestrator.analysis.outcomes import LoopTiming, OutcomeSet, TrialOutcome
from orchestrator.analysis.report import OVERRUN_WARN_FRACTION, build_report, render, to_dict
from orchestrator.analysis.sessions import session_counts
from orchestrator.cli import main
from support.evidence import accept_edits

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
PROTOCOL = DATA / "tiny_protocol.yaml"
RIG = DATA / "tiny_sim.yaml"


def run_cli(out: Path, *extra: str, protocol: Path = PROTOCOL) -> int:
    return main(["run", str(protocol), "--rig", str(RIG), "--out", str(out), "--workers", "1", *extra])


def report(directory: Path, capsys, fmt: str = "json"):
    capsys.readouterr()
    assert main(["report", str(directory), "--format", fmt]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if fmt == "json" else out


@pytest.fixture(scope="module")
def campaign(tiny_resumed):
    """The tiny simulated campaign, run in two sessions (2 trials, then the rest: `tiny_resumed`,
    shared with test_ladder_campaign.py); the JSON report after each session."""
    out, first = tiny_resumed
    return out, _json_report(first), _json_report(out)


def _json_report(directory: Path) -> dict:
    from orchestrator.analysis.outcomes import outcomes_from_store
    from orchestrator.store.sqlite import CampaignStore

    with CampaignStore.open_readonly(directory) as store:
        data = outcomes_from_store(store)
    return json.loads(render(build_report(data), "json"))


def test_threshold_matches_the_runner():
    from orchestrator.run.bookkeeping import OVERRUN_WARN_FRACTION as RUNNER

    assert OVERRUN_WARN_FRACTION == RUNNER


def test_timing_per_policy_from_a_simulated_campaign(campaign):
    _, _, doc = campaign
    assert doc["schema"] == "orchestrator.report/1"
    assert doc["campaign"]["simulated"] is True and doc["campaign"]["complete"] is True
    assert doc["campaign"]["fps"] == 10
    assert set(doc["timing"]) == {"A", "B"}
    for label in ("A", "B"):
        t = doc["timing"][label]
        assert t["episodes"] == 3 and t["episodes_with_timing"] == 3
        assert t["steps"] == 50
        assert t["paced"] is False
        assert t["overrun_steps"] is None and t["episodes_over_5pct_overruns"] is None
        assert t["policy_p50_ms"] >= 0 and t["policy_p99_ms"] >= t["policy_p50_ms"]
        assert t["policy_p99_max_ms"] >= t["policy_p99_ms"]
        assert 0 <= t["period_p50_ms"] <= t["period_p99_ms"] < 10_000
    assert not any("could not keep" in w for w in doc["warnings"])


def test_sessions_count_one_then_two_after_resume(campaign):
    _, first, second = campaign
    assert first["sessions"]["count"] == 1 and first["campaign"]["complete"] is False
    assert second["sessions"]["count"] == 2
    for doc in (first, second):
        s = doc["sessions"]
        assert (s["interrupted"], s["killed"], s["failed"], s["running"]) == (0, 0, 0, 0)
        assert s["ended"] == s["count"]
    # the first session ran 2 of 6 trials, so timing then covers 2 episodes (one per policy)
    assert sum(t["episodes_with_timing"] for t in first["timing"].values()) == 2


def test_text_and_markdown_show_timing_sessions_and_operator(campaign, capsys):
    directory, _, _ = campaign
    for fmt in ("text", "md"):
        out = report(directory, capsys, fmt)
        assert "Control-loop timing (10 Hz, 100.0 ms period)" in out
        assert "simulated: not paced in real time" in out
        assert "overrun steps" not in out
        assert "Run sessions: 2 (0 interrupted, 0 killed, 0 failed)" in out
        assert "Operator also a judge: no" in out
        # the header carries the operator line, before the first section
        assert out.index("Operator also a judge") < out.index("Success per policy")


def test_operator_is_judge_from_the_protocol(tmp_path, capsys):
    shutil.copy(DATA / "tiny_layout.yaml", tmp_path / "tiny_layout.yaml")
    text = PROTOCOL.read_text()
    old = "judging: {judges: 1, "
    assert old in text
    protocol = tmp_path / "tiny_protocol.yaml"
    protocol.write_text(text.replace(old, "judging: {operator_is_judge: true, judges: 1, "))
    out = tmp_path / "camp"
    assert run_cli(out, "--stop-after", "0", protocol=protocol) == 0
    doc = report(out, capsys)
    assert doc["campaign"]["operator_is_judge"] is True
    assert doc["sessions"]["count"] == 1
    # no episode yet: timing rows exist but are empty
    assert all(t["episodes_with_timing"] == 0 and t["policy_p50_ms"] is None for t in doc["timing"].values())
    assert "Operator also a judge: yes" in report(out, capsys, "text")


def test_overruns_on_a_paced_campaign_warn(campaign, tmp_path, capsys):
    source, _, _ = campaign
    copy = tmp_path / "paced"
    shutil.copytree(source, copy)
    db = copy / "campaign.db"
    conn = sqlite3.connect(db)
    try:
        conn.execute("UPDATE campaign SET simulated = 0")
        rows = conn.execute("SELECT e.id, t.policy, e.timing FROM episodes e JOIN trials t ON t.slot = e.slot").fetchall()
        worst_a, b_seen = 0.0, 0
        for i, (ep, policy, timing) in enumerate(rows):
            t = json.loads(timing)
            if policy == "A":
                # 10 of 50 steps overran in every A episode
                t.update(period_p50_ms=100.5, period_p99_ms=150.0 + 10 * i, overruns=10)
                worst_a = max(worst_a, 150.0 + 10 * i)
            else:
                # B overran twice in its first episode: 4 % is under the threshold
                t.update(period_p50_ms=100.0, period_p99_ms=104.0, overruns=2 if b_seen == 0 else 0)
                b_seen += 1
            conn.execute("UPDATE episodes SET timing = ? WHERE id = ?", (json.dumps(t), ep))
        # sessions the campaign might also have had: one killed, one interrupted, one failed
        conn.executemany("INSERT INTO sessions (started_at, ended_at, host, pid, tool_version, outcome)"
                         " VALUES (?,?,?,?,?,?)",
                         [(1.0, None, "elsewhere", 1, "x", None), (2.0, 3.0, "h", 2, "x", "interrupted"),
                          (4.0, 5.0, "h", 3, "x", "failed: OSError: disk full")])
        conn.commit()
    finally:
        conn.close()
    accept_edits(copy)   # a paced campaign as the tool would have written it
    doc = report(copy, capsys)
    a, b = doc["timing"]["A"], doc["timing"]["B"]
    assert a["paced"] is True and a["overrun_steps"] == 30 and a["episodes_over_5pct_overruns"] == 3
    assert a["period_p50_ms"] == pytest.approx(100.5)
    assert a["period_p99_ms"] == pytest.approx(worst_a)
    assert b["overrun_steps"] == 2 and b["episodes_over_5pct_overruns"] == 0
    warn = [w for w in doc["warnings"] if "could not keep" in w]
    assert len(warn) == 1 and warn[0].startswith("policy A could not keep 10 Hz in 3 episodes of 3")
    assert doc["sessions"] == {"count": 5, "interrupted": 1, "killed": 1, "failed": 1, "ended": 2, "running": 0}
    text = report(copy, capsys, "text")
    assert "policy A could not keep 10 Hz in 3 episodes" in text
    assert "overrun steps" in text and "simulated: not paced" not in text
    assert "Run sessions: 5 (1 interrupted, 1 killed, 1 failed)" in text


def test_a_slow_policy_on_the_twin_shows_its_overruns_and_lost_steps(campaign, tmp_path, capsys):
    """A twin campaign is stored as `--twin` stores it (simulated, with the real-arm profile that
    ran on the twin: robot type so101_follower); policy B is planted slow, as the issue's tiny ACT
    was on the twin: 16 of its 53 run steps overran and 127 of its 180 planned steps were lost.
    The report must show the loop figures and the warning a real arm gets (it said "simulated:
    not paced in real time" before)."""
    source, _, _ = campaign
    copy = tmp_path / "twin"
    shutil.copytree(source, copy)
    conn = sqlite3.connect(copy / "campaign.db")
    try:
        simulated, = conn.execute("SELECT simulated FROM campaign").fetchone()
        assert simulated == 1
        conn.execute("UPDATE campaign SET rig_text = ?", ((ROOT / "hardware" / "so101_twin.yaml").read_text(),))
        rows = conn.execute("SELECT e.id, t.policy, e.timing FROM episodes e JOIN trials t ON t.slot = e.slot").fetchall()
        for ep, policy, timing in rows:
            t = json.loads(timing)
            if policy == "B":   # the slow one: a third of its steps ran
                t.update(period_p50_ms=330.0, period_p99_ms=421.0, overruns=16, steps=53, planned_steps=180,
                         lost_steps=127)
            else:               # the scripted pick: 4 steps lost, no overrun over the threshold
                t.update(period_p50_ms=100.2, period_p99_ms=104.0, overruns=1, steps=176, planned_steps=180,
                         lost_steps=4)
            conn.execute("UPDATE episodes SET timing = ? WHERE id = ?", (json.dumps(t), ep))
        conn.commit()
    finally:
        conn.close()
    accept_edits(copy)
    doc = report(copy, capsys)
    assert doc["campaign"]["rig_kind"] == "twin" and doc["campaign"]["simulated"] is True
    a, b = doc["timing"]["A"], doc["timing"]["B"]
    assert a["paced"] is True and b["paced"] is True
    assert (b["overrun_steps"], b["lost_steps"], b["episodes_over_5pct_overruns"]) == (48, 381, 3)
    assert (a["overrun_steps"], a["lost_steps"], a["episodes_over_5pct_overruns"]) == (3, 12, 0)
    warn = [w for w in doc["warnings"] if "could not keep" in w]
    assert warn == ["policy B could not keep 10 Hz on the twin (a real arm would see the same loop) in 3 "
                    "episodes of 3 (more than 5% of the steps overran the control period; 48 overrun steps and "
                    "381 lost steps in all): its outcomes may reflect a slow loop"]
    for fmt in ("text", "html"):
        out = report(copy, capsys, fmt)
        assert "not paced in real time" not in out
        assert "Rig: rehearsal twin" in out and "could not keep 10 Hz on the twin" in out
        assert "lost steps" in out and "episodes that lost steps" in out
    # the same store with the simulated rig's profile is not paced (no overrun figures)
    conn = sqlite3.connect(copy / "campaign.db")
    conn.execute("UPDATE campaign SET rig_text = ?", (RIG.read_text(),))
    conn.commit()
    conn.close()
    accept_edits(copy)
    doc = report(copy, capsys)
    assert doc["campaign"]["rig_kind"] == "simulated" and doc["timing"]["B"]["paced"] is False
    assert doc["timing"]["B"]["lost_steps"] is None and not any("could not keep" in w for w in doc["warnings"])


def outcome(layout: str, policy: str, slot: int, timing: LoopTiming | None, success: bool = True) -> TrialOutcome:
    return TrialOutcome(layout=layout, repeat=0, policy=policy, success=success, slot=slot,
                        position=slot % 2, episode_id=f"ep_{slot:04d}", timing=timing)


def test_timing_summary_from_a_constructed_outcome_set():
    def lt(p50: float, p99: float, over: int, pol50: float, pol99: float) -> LoopTiming:
        return LoopTiming(period_p50_ms=p50, period_p99_ms=p99, overruns=over, policy_p50_ms=pol50,
                          policy_p99_ms=pol99, steps=900)

    outcomes = (
        outcome("M1", "A", 0, lt(33.4, 40.0, 100, 20.0, 30.0)),   # 11 % overruns
        outcome("M1", "B", 1, lt(33.3, 34.0, 0, 5.0, 6.0)),
        outcome("M2", "B", 2, lt(33.3, 35.0, 45, 5.0, 8.0)),      # exactly 5 %: not over
        outcome("M2", "A", 3, lt(33.6, 90.0, 300, 25.0, 60.0)),
        outcome("M3", "A", 4, lt(33.5, 41.0, 10, 22.0, 31.0)),
        outcome("M3", "B", 5, None),                               # an old store without timing
    )
    data = OutcomeSet(outcomes=outcomes, policies=("A", "B"), source="x", label_source="test",
                      campaign_id="c1", fps=30, operator_is_judge=True)
    r = build_report(data)
    a, b = r.timing
    assert (a.with_timing, a.episodes, a.overrun_steps, a.episodes_over) == (3, 3, 410, 2)
    assert a.period_p50_ms == pytest.approx(33.5) and a.period_p99_ms == pytest.approx(90.0)
    assert a.policy_p50_ms == pytest.approx(22.0) and a.policy_p99_ms == pytest.approx(31.0)
    assert a.policy_p99_max_ms == pytest.approx(60.0)
    assert (b.with_timing, b.episodes, b.overrun_steps, b.episodes_over) == (2, 3, 45, 0)
    assert b.period_p50_ms == pytest.approx(33.3) and b.policy_p99_ms == pytest.approx(7.0)
    assert [w for w in r.warnings if "could not keep" in w] == [
        "policy A could not keep 30 Hz in 2 episodes of 3 (more than 5% of the steps overran the control "
        "period; 410 overrun steps in all): its outcomes may reflect a slow loop"]
    doc = to_dict(r)
    assert doc["campaign"]["operator_is_judge"] is True and doc["sessions"] is None
    assert doc["timing"]["B"]["episodes_with_timing"] == 2
    html = render(r, "html")
    assert "Control-loop timing (30 Hz, 33.3 ms period)" in html and "Operator also a judge: yes" in html


def test_csv_report_has_none_of_it(tmp_path, capsys):
    path = tmp_path / "o.csv"
    path.write_text("layout,policy,success\nM1,A,1\nM1,B,0\nM2,A,1\nM2,B,1\n")
    assert main(["report", "--outcomes", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["timing"] is None and doc["sessions"] is None
    assert doc["campaign"]["operator_is_judge"] is None and doc["campaign"]["fps"] is None
    assert main(["report", "--outcomes", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Control-loop timing" not in text and "Run sessions" not in text and "Operator also" not in text


def test_session_classification():
    alive = {"started_at": 9.0, "ended_at": None, "host": platform.node(), "pid": os.getpid(), "outcome": None}
    dead = {**alive, "host": "another-host"}
    ended = {"started_at": 1.0, "ended_at": 2.0, "host": "h", "pid": 5, "outcome": "ended"}
    # the last session, alive on this host: a run in progress, not a killed one
    assert session_counts([ended, alive]).running == 1 and session_counts([ended, alive]).killed == 0
    # the same process recorded earlier than the last session cannot still be that run
    assert session_counts([alive, ended]).killed == 1
    assert session_counts([ended, dead]).killed == 1
    assert session_counts([]).count == 0


def test_loop_timing_ignores_missing_or_bad_records():
    assert LoopTiming.from_dict({}) is None
    assert LoopTiming.from_dict(None) is None
    assert LoopTiming.from_dict({"period_p50_ms": "x"}) is None
    good = {"period_p50_ms": 1, "period_p99_ms": 2, "overruns": 0, "policy_p50_ms": 0.1,
            "policy_p99_ms": 0.2, "steps": 50, "video_frames": {"front": 25}}
    assert LoopTiming.from_dict(good).steps == 50
    assert LoopTiming.from_dict({**good, "period_p99_ms": float("nan")}) is None
    assert LoopTiming.from_dict({**good, "overruns": float("inf")}) is None
    assert LoopTiming.from_dict({**good, "steps": 0}) is None


def test_the_text_report_says_where_its_plots_are(campaign, capsys):
    """Pictures first: a text or Markdown report names the command that writes the plots; the HTML
    report itself and the JSON do not repeat it."""
    directory, _, _ = campaign
    for fmt, said in (("text", True), ("md", True), ("json", False)):
        capsys.readouterr()
        assert main(["report", str(directory), "--format", fmt]) == 0
        err = capsys.readouterr().err
        assert (f"are in the HTML report: orchestrator report {directory} --format html --out report.html" in err) is said
