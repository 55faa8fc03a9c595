"""A policy served from another machine: `type: lerobot_server` against LeRobot's own
policy server (`python -m lerobot.async_inference.policy_server`), started here as a separate
local process; the orchestrator runs from fresh processes too.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.campaign_files import env, one_mark_protocol
from support.cli import run_main, run_module
from support.repo import REPO
from support.stored_timing import stored_timing

SIM_RIG = REPO / "hardware" / "sim.yaml"

# One worker takes the whole file under `--dist loadgroup`, so the module's policy server (a fresh
# process that imports LeRobot's policies: seconds of CPU) starts once, not once per worker.
pytestmark = pytest.mark.xdist_group("remote_policy")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PolicyServer:
    """LeRobot's policy server in its own process (cwd `folder`: it writes ./logs there)."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.log = folder / "server.out"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lerobot.async_inference.policy_server", "--host=127.0.0.1",
             f"--port={self.port}", "--fps=15", "--inference_latency=0", "--obs_queue_timeout=1"],
            cwd=folder, env=env(), stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while "PolicyServer started" not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the policy server did not start in 120 s"
            time.sleep(0.2)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = PolicyServer(tmp_path_factory.mktemp("server"))
    yield srv
    srv.kill()


@pytest.fixture
def own_server(tmp_path):
    """A server of the test's own (the test kills it)."""
    srv = PolicyServer(tmp_path)
    yield srv
    srv.kill()


def served_protocol(folder: Path, checkpoint: Path, address: str, *, duration_s: float = 3) -> Path:
    shutil.copytree(checkpoint, folder / "act")
    spec = (f"{{type: lerobot_server, address: '{address}', path: {folder / 'act'}, policy_type: act, "
            "actions_per_chunk: 4, timeout_s: 3}")
    return one_mark_protocol(folder, "{type: scripted, aim_noise_mm: 3}", spec, duration_s=duration_s)


@pytest.mark.timeout(600)
def test_a_served_policy_runs_a_sim_campaign_against_lerobots_policy_server(server, saved_acts, tmp_path, capsys):
    protocol = served_protocol(tmp_path, saved_acts["sim"], server.address)
    out = tmp_path / "campaign"
    result = run_module("run", protocol, "--rig", SIM_RIG, "--out", out, env=env(), timeout=600)
    assert result.code == 0, result.err[-3000:]
    assert "2/2 trials done, 0 aborted" in result.out, result.out + result.err[-3000:]
    log = server.log.read_text()
    assert "Action chunk #" in log, log[-2000:]           # the server computed them
    timing = {row["policy"]: row for row in stored_timing(out)}
    served = timing["B"]["inference"]
    assert served["mode"] == "server" and served["chunks"] >= 2, served
    assert 0 < served["latency_p50_ms"] <= served["latency_max_ms"], served
    assert served["starved_steps"] < timing["B"]["steps"], served
    # every step is accounted for: a served action (its age recorded) or the last goal held
    assert served["served_steps"] + served["starved_steps"] == timing["B"]["steps"], served
    assert 0 < served["action_age_p50_ms"] <= served["action_age_max_ms"], served
    data = json.loads(run_main(capsys, "report", out, "--format", "json").out)   # `run` was the fresh process
    assert data["policies"]["B"]["deployment"] == f"server {server.address}"
    assert not (REPO / "logs").exists() and not (tmp_path / "logs" / "robot_client").exists()


@pytest.mark.timeout(600)
def test_losing_the_server_mid_episode_aborts_the_trial_and_the_campaign_stays_resumable(own_server, saved_acts,
                                                                                         tmp_path):
    server = own_server
    protocol = served_protocol(tmp_path, saved_acts["sim"], server.address, duration_s=4)
    out = tmp_path / "campaign"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(SIM_RIG),
                             "--out", str(out)], cwd=REPO, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while server.log.read_text().count("Action chunk #") < 2:   # mid-episode: chunks are flowing
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    server.kill()
    killed_at = time.time()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stdout + stderr
    line = [ln for ln in stderr.splitlines() if "policy server" in ln]
    assert line and f"policy server {server.address}" in line[-1], stderr[-2000:]
    assert "Traceback" not in stderr
    assert "the arm was made safe and the campaign is resumable" in stderr
    from orchestrator.store.sqlite import CampaignStore

    with CampaignStore.open_readonly(out) as store:
        attempts = store.attempts()
    aborted = [a for a in attempts if a["status"] == "aborted"]
    assert len(aborted) == 1 and f"policy server {server.address}" in aborted[0]["reason"], attempts
    assert aborted[0]["abort_class"] == "rig"       # the evidence rules' class of a lost device
    assert time.time() - killed_at < 30   # timeout_s 3: the loss is noticed within seconds


def test_doctor_loads_the_served_policy_and_refuses_an_unreachable_server_in_one_line(server, saved_acts, tmp_path,
                                                                                     cli):
    """The served policy loads in a fresh `doctor` (the path a user takes); the unreachable
    server's refusal, the same doctor's check, in this process (a fresh one imports LeRobot's
    policies again: 7-10 s)."""
    protocol = served_protocol(tmp_path, saved_acts["sim"], server.address)
    result = run_module("doctor", "--rig", SIM_RIG, "--protocol", protocol, env=env(), timeout=300)
    assert result.code == 0, result.out + result.err
    assert f"policy B: {tmp_path / 'act'} served by {server.address} (act on cpu; loaded in" in result.out
    closed = free_port()
    protocol.write_text(protocol.read_text().replace(server.address, f"127.0.0.1:{closed}"))
    result = cli("doctor", "--rig", SIM_RIG, "--protocol", protocol)
    assert result.code == 2, result.out + result.err
    bad = [line for line in result.out.splitlines() + result.err_lines if f"127.0.0.1:{closed}" in line]
    assert len(bad) == 1 and "UNAVAILABLE" in bad[0], result.out + result.err
    assert "Traceback" not in result.out + result.err


def test_a_stop_drops_the_served_queue_and_joins_the_receiver(server, saved_acts, tmp_path):
    """In one process against the server: chunks queued and a GetActions call in flight when the
    episode stops; the receiver thread is joined, the queue dropped with the client, and the next
    episode starts from an empty queue (its first step holds the pose it observes)."""
    import threading

    import numpy as np

    from orchestrator.design.protocol import LeRobotServerPolicySpec
    from orchestrator.policies.lerobot_server import ServerPolicy
    from orchestrator.rigs.profile import STATE_KEYS
    from support.act import SIM_CAMERA

    features = {k: float for k in STATE_KEYS} | {"front": (*SIM_CAMERA, 3), "wrist": (*SIM_CAMERA, 3)}
    spec = LeRobotServerPolicySpec(type="lerobot_server", address=server.address, path=str(saved_acts["sim"]),
                                   policy_type="act", actions_per_chunk=4, timeout_s=3)
    policy = ServerPolicy(spec, "", features, fps=15)
    obs = {k: 5.0 for k in STATE_KEYS} | {n: np.zeros((*SIM_CAMERA, 3), np.uint8) for n in ("front", "wrist")}
    try:
        policy.reset()
        deadline = time.monotonic() + 60
        while policy._client.action_queue.qsize() == 0:      # a chunk arrived and is queued
            policy.select_action(obs)
            assert time.monotonic() < deadline
            time.sleep(1 / 15)
        client, receiver = policy._client, policy._receiver
        assert receiver.is_alive()
        policy.stop()
        assert not receiver.is_alive() and policy._client is None
        assert client.channel is not None and not client.running
        policy.reset()
        first = policy.select_action({**obs, **{k: 7.0 for k in STATE_KEYS}})
        assert first == {k: 7.0 for k in STATE_KEYS}           # nothing from before the stop
        assert policy._client is not client
    finally:
        policy.close()
    assert [t for t in threading.enumerate() if t.name == "PolicyServerReceiver" and t.is_alive()] == []
