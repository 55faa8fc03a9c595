"""`orchestrator run` with the protocol's start_check on the simulator, from fresh processes:
the cubes the simulated hand places near their marks pass and every check is recorded; a hand
10 mm off fails the first trial three times and ends the unattended session with exit 1 and
the check's line, resumable (0 trials done, no episode written); `advise` runs the trials anyway.
Every `run` is a fresh process with one worker (the suite's workers already share the cores: no
pool of fresh interpreters); the first report too, the others in this process (`run_main`)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from support.campaign_files import env, two_mark_protocol
from support.cli import run_main, run_module
from support.repo import REPO

SIM = REPO / "hardware" / "sim.yaml"


def _files(tmp_path, mode: str, placement: str):
    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 12}")
    protocol.write_text(protocol.read_text() + f"start_check: {{mode: {mode}}}\n")
    rig = tmp_path / "rig.yaml"
    rig.write_text(SIM.read_text() + f"placement: {placement}\n")
    return protocol, rig


def _events(campaign, kind):
    with sqlite3.connect(campaign / "campaign.db") as db:
        return [row[0] for row in db.execute("SELECT data FROM events WHERE kind = ? ORDER BY id", (kind,))]


def garwood_per_100(k: int, trials: int) -> str:
    """The console's interval after the rate: exact Poisson (Garwood 1936) from scipy's chi2 alone."""
    from scipy.stats import chi2

    lo = 0.0 if k == 0 else chi2.ppf(0.025, 2 * k) / 2
    hi = chi2.ppf(0.975, 2 * k + 2) / 2
    return f"(exact Poisson 95% CI {100 * lo / trials:.1f} to {100 * hi / trials:.1f})"


def test_placements_near_their_marks_pass_and_every_check_is_recorded(tmp_path, capsys):
    protocol, rig = _files(tmp_path, "enforce", "{sigma_mm: 1.0, sigma_deg: 2, seed: 4}")
    out = tmp_path / "campaign"
    done = run_module("run", protocol, "--rig", rig, "--out", out, "--workers", "1", env=env(), timeout=300)
    assert done.code == 0, done.err[-2000:]
    assert "4/4 trials done" in done.out, done.out
    checks = _events(out, "start_check")
    assert len(checks) == 4 and all('"passes": true' in c for c in checks), checks
    assert len(list((out / "start_checks").glob("*.png"))) == 4
    assert (out / "camera-reference" / "reference.json").is_file()
    assert (f"operator 4 interventions in 4 trials, 100 per 100 trials {garwood_per_100(4, 4)}: placement 4, "
            "correction 0, override 0, cube lost 0, stop 0") in done.out, done.out
    # the report's placement error per policy, against the stored measurements
    report = json.loads(run_module("report", out, "--format", "json", env=env()).out)
    with sqlite3.connect(out / "campaign.db") as db:
        policy_of = dict(db.execute("SELECT slot, policy FROM trials"))
        stored = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE kind = 'start_check'")]
    placement = report["start_check"]["placement_error"]
    assert sorted(placement) == ["A", "B"] and sum(p["checked"] for p in placement.values()) == 4
    for policy, row in placement.items():
        offsets = [float(np.hypot(d["dx_mm"], d["dy_mm"])) for d in stored if policy_of[d["slot"]] == policy]
        assert len(offsets) == row["checked"] == row["measured"] == 2
        assert row["offset_p50_mm"] == round(float(np.median(offsets)), 2), (row, offsets)
        assert row["started_on_failed_check"] == 0
    assert [t["a"] + t["b"] for t in report["start_check"]["placement_tests"]] == ["AB"]
    interventions = dict(report["interventions"])
    ci95 = interventions.pop("per_100_trials_ci95")
    assert f"(exact Poisson 95% CI {ci95[0]:.1f} to {ci95[1]:.1f})" == garwood_per_100(4, 4), ci95
    assert interventions == {"total": 4, "per_100_trials": 100.0, "trials": 4,
                             "per_100_trials_ci_method": "poisson-exact (Garwood 1936)",
                             "by_cause": {"placement": 4, "correction": 0, "override": 0,
                                          "cube lost": 0, "stop": 0}}
    text = run_main(capsys, "report", out).out
    assert "Start states (the camera's start check)" in text and "Operator interventions" in text


def test_a_hand_10_mm_off_ends_the_unattended_session_with_the_line(tmp_path):
    protocol, rig = _files(tmp_path, "enforce", "{offset_mm: [10, 0]}")
    out = tmp_path / "campaign"
    done = run_module("run", protocol, "--rig", rig, "--out", out, "--workers", "1", env=env(), timeout=300)
    assert done.code == 1, (done.out, done.err[-2000:])
    last = done.err.strip().splitlines()[-1]
    assert last.startswith("orchestrator: start check failed 3 times at M0"), last
    assert "mm forward of M0" in last and "resumable" in last and "Traceback" not in done.err
    assert "0/4 trials done" in done.out or "0 trials done" in done.out or not (out / "episodes").exists()
    checks = _events(out, "start_check")
    assert len(checks) == 3 and all('"passes": false' in c for c in checks)
    assert len(_events(out, "start_correction")) == 2
    with sqlite3.connect(out / "campaign.db") as db:
        assert db.execute("SELECT count(*) FROM attempts").fetchone()[0] == 0


def test_advise_runs_the_trials_and_shows_each_failure(tmp_path, capsys):
    protocol, rig = _files(tmp_path, "advise", "{offset_mm: [10, 0]}")
    out = tmp_path / "campaign"
    done = run_module("run", protocol, "--rig", rig, "--out", out, "--stop-after", "2", "--workers", "1", env=env(), timeout=300)
    assert done.code == 0, done.err[-2000:]
    assert done.out.count("start check (advise): cube ") == 2, done.out
    assert len(_events(out, "start_check")) == 2
    report = json.loads(run_main(capsys, "report", out, "--format", "json").out)
    rows = report["start_check"]["placement_error"].values()
    assert sum(r["started_on_failed_check"] for r in rows) == 2 and sum(r["overridden"] for r in rows) == 0
    assert all(9.0 < r["offset_p50_mm"] < 11.0 for r in rows if r["checked"]), rows
    assert any("started on a failed start check (" in w and "attempt" in w and "0 by the operator's override)" in w
               for w in report["warnings"]), report["warnings"]


def test_with_reset_auto_the_arm_places_every_cube_after_the_first(tmp_path, capsys):
    """`reset: auto` (from a fresh process): the first cube is placed by the simulated hand, every
    later one by the arm, checked by the camera; each episode still starts with the arm at rest."""
    from orchestrator.rigs.profile import STATE_KEYS, load_rig
    from orchestrator.rigs.sim import DEFAULT_REST
    from orchestrator.store.episode_files import read_series

    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 12}", duration_s=8.0, fps=30)
    protocol.write_text(protocol.read_text() + "start_check: {mode: enforce}\nreset: {mode: auto, max_tries: 3}\n")
    out = tmp_path / "campaign"
    done = run_module("run", protocol, "--rig", SIM, "--out", out, "--workers", "1", env=env(), timeout=300)
    assert done.code == 0, done.err[-2000:]
    assert "4/4 trials done" in done.out
    assert (f"operator 1 intervention in 4 trials, 25 per 100 trials {garwood_per_100(1, 4)}: placement 1, "
            "correction 0, override 0, cube lost 0, stop 0") in done.out, done.out
    resets = [json.loads(d) for d in _events(out, "cube_reset")]
    assert len(resets) == 3 and all(r["passes"] and r["offset_mm"] < 5.0 for r in resets), resets
    assert len(_events(out, "start_check")) == 4 and all('"passes": true' in c for c in _events(out, "start_check"))
    with sqlite3.connect(out / "campaign.db") as db:
        series = [json.loads(f)["timeseries"] for (f,) in db.execute("SELECT files FROM episodes")]
    pose = {**DEFAULT_REST, **load_rig(SIM).profile.rest_pose}
    rest = np.array([pose[k] for k in STATE_KEYS])
    firsts = [read_series(out / rel)["state"][0] for rel in series]
    assert len(firsts) == 4 and all(np.abs(first[:5] - rest[:5]).max() < 3.0 for first in firsts), firsts
    report = json.loads(run_main(capsys, "report", out, "--format", "json").out)
    assert report["interventions"]["by_cause"]["placement"] == 1 and report["interventions"]["per_100_trials"] == 25.0


def test_reset_auto_needs_the_start_check_enforced(tmp_path):
    protocol = two_mark_protocol(tmp_path, "{type: scripted, aim_noise_mm: 12}")
    protocol.write_text(protocol.read_text() + "start_check: {mode: advise}\nreset: {mode: auto}\n")
    done = run_module("validate", protocol, env=env(), timeout=120)
    assert done.code == 2, done.out + done.err
    (line,) = done.err.strip().splitlines()
    row = protocol.read_text().splitlines().index("reset: {mode: auto}") + 1
    assert line.startswith(f"{protocol}:{row}:") and "reset mode auto needs start_check mode enforce" in line, line
    protocol.write_text(protocol.read_text().replace("mode: advise", "mode: enforce"))   # the positive control
    assert run_module("validate", protocol, env=env(), timeout=120).code == 0
