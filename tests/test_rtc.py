"""Policies as lerobot-rollout deploys them: real-time chunking through LeRobot's own
RTC engine, from fresh processes, on the twin.

A tiny SmolVLA (tests/support/vla.py: a random SmolVLM backbone from a small config saved locally,
a tiny tokenizer) is saved by one interpreter; `orchestrator run --twin` then runs it as A under
sync inference and as B under `inference: {type: rtc}` in another, through the real LeRobot
stack above the twin's servo bytes.
"""

from __future__ import annotations

import json
import shutil

import pytest

from support.campaign_files import env, one_mark_protocol, twin_rig
from support.cli import run_module
from support.repo import REPO
from support.stored_timing import stored_timing

RTC_B = "{type: lerobot, path: ./vla, inference: {type: rtc, rtc: {execution_horizon: 5}, queue_threshold: 4}}"


@pytest.mark.timeout(600)
def test_tiny_vla_runs_sync_and_rtc_on_the_twin_from_fresh_processes(saved_vla, tmp_path, cli):
    shutil.copytree(saved_vla, tmp_path / "vla")
    protocol = one_mark_protocol(tmp_path, "{type: lerobot, path: ./vla}", RTC_B)
    rig = twin_rig(tmp_path)
    out = tmp_path / "campaign"
    # the tiny VLA's statistics (action mean 0, std 20; test_rtc_stop.py's canary needs them) make its first
    # action the all-zero pose, far from the rest pose: accepted here, where only the plumbing is tested
    result = run_module("run", protocol, "--rig", rig, "--twin", "--unattended", "--out", out,
                        "--allow-far-first-action", env=env(), timeout=600)
    assert result.code == 0, result.err[-3000:]
    assert "2/2 trials done, 0 aborted" in result.out, result.out + result.err[-3000:]
    timing = {row["policy"]: row for row in stored_timing(out)}
    assert set(timing) == {"A", "B"}
    assert "inference" not in timing["A"]                    # sync: computed on the control thread
    rtc = timing["B"]["inference"]
    assert rtc["mode"] == "rtc" and rtc["chunks"] >= 3, rtc  # chunks computed by LeRobot's thread
    assert 0 < rtc["latency_p50_ms"] <= rtc["latency_p99_ms"] <= rtc["latency_max_ms"], rtc
    assert rtc["starved_steps"] < timing["B"]["steps"] / 2, rtc
    assert "Indexes diff" not in result.err and rtc["delay_mismatches"] >= 0   # counted, off the terminal
    # the reports in this process (they read the store; their fresh-process path is test_evidence_cli's)
    report = cli("report", out, "--format", "json")
    assert report.code == 0, report.err
    data = json.loads(report.out)
    assert data["policies"]["A"]["deployment"] == "sync"
    assert data["policies"]["B"]["deployment"] == "rtc (horizon 5)"
    text = cli("report", out)
    assert "deployment: A: sync, B: rtc (horizon 5)" in text.out, text.out
    assert "inference latency per chunk (RTC thread or policy server, median over the episodes): B p50" in text.out


@pytest.mark.off_clock
def test_a_policy_without_rtc_is_refused_with_lerobots_reason(saved_acts, tmp_path, cli):
    """`run` refuses it in a fresh process (the path a user takes); `validate` and `doctor`, the
    same refusal from the same policy factory, in this process, where LeRobot's policies are
    imported once (each fresh process imports them again: 7-10 s)."""
    shutil.copytree(saved_acts["sim"], tmp_path / "act")
    protocol = one_mark_protocol(tmp_path, "{type: scripted}",
                                 "{type: lerobot, path: ./act, inference: {type: rtc}}")
    results = {"run": run_module("run", protocol, "--rig", REPO / "hardware" / "sim.yaml", "--out", tmp_path / "c",
                                 env=env(), timeout=300),
               "validate": cli("validate", protocol),
               "doctor": cli("doctor", "--rig", REPO / "hardware" / "sim.yaml", "--protocol", protocol)}
    for verb, result in results.items():
        assert result.code == 2, (verb, result.out, result.err)
        said = result.err + result.out
        assert "RTC inference is not supported by policy type 'act'" in said, (verb, said)
        assert "Traceback" not in said
    assert len(results) == 3
    assert not (tmp_path / "c" / "episodes").exists() or not any((tmp_path / "c" / "episodes").iterdir())


@pytest.mark.off_clock
def test_validate_reads_a_hub_ids_config_from_the_local_cache_never_downloading(saved_acts, tmp_path):
    """A: a Hub id whose config.json (an ACT's) is in the local Hugging Face cache: refused with
    LeRobot's reason, as for a local folder. B: a Hub id not in the cache: validate says the check
    happens at doctor/run (and downloads nothing: HF_HUB_OFFLINE is off here)."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "models--tester--act-sim"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(saved_acts["sim"] / "config.json", repo / "snapshots" / commit / "config.json")
    protocol = one_mark_protocol(tmp_path, "{type: lerobot, path: tester/act-sim, inference: {type: rtc}}",
                                 "{type: lerobot, path: tester/not-cached, inference: {type: rtc}}")
    offline_off = {k: v for k, v in env().items() if k != "HF_HUB_OFFLINE"}
    result = run_module("validate", protocol, env={**offline_off, "HF_HOME": str(tmp_path / "hf"),
                                                   "HF_HUB_DISABLE_TELEMETRY": "1", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert result.code == 2, (result.out, result.err)
    assert len(result.err_lines) == 1, result.err
    assert "policy A: policy checkpoint tester/act-sim: RTC inference is not supported by policy type 'act'" in result.err
    assert ("policy B: RTC support not checked here: tester/not-cached is not in the local Hugging Face cache "
            "(validate never downloads); doctor and run check it when they load it") in result.out, result.out
    assert "Traceback" not in result.err + result.out
    assert sorted(p.name for p in (tmp_path / "hf" / "hub").iterdir()) == ["models--tester--act-sim"]


@pytest.mark.off_clock
def test_rtc_settings_for_a_sync_policy_are_refused_at_validate(tmp_path):
    protocol = one_mark_protocol(tmp_path, "{type: scripted}",
                                 "{type: lerobot, path: ./ckpt, inference: {queue_threshold: 3}}")
    (tmp_path / "ckpt").mkdir()
    result = run_module("validate", protocol)
    assert result.code == 2
    assert len(result.err_lines) == 1, result.err
    assert "queue_threshold applies only with type: rtc" in result.err
