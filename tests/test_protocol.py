"""Protocol and layout models: the shipped files, identity hashes, path resolution."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import (
    REACH_MAX_M,
    REACH_MIN_M,
    LeRobotPolicySpec,
    ScriptedPolicySpec,
    load_layout,
    load_protocol,
)
from support.repo import GRID20, REPO, SIM_PROTOCOL, line_of, sim_protocol_text


def test_sim_demo_protocol():
    loaded = load_protocol(SIM_PROTOCOL)
    p = loaded.protocol
    assert p.name == "sim-demo" and list(p.policies) == ["A", "B"]
    assert all(isinstance(s, ScriptedPolicySpec) for s in p.policies.values())
    assert (p.policies["A"].aim_noise_mm, p.policies["B"].aim_noise_mm) == (3, 12)
    assert (p.episode.fps, p.episode.duration_s, p.episode.frames) == (30, 12, 360)
    assert (p.success.min_height_m, p.success.hold_s) == (0.04, 1.0)
    assert p.order == "balanced" and p.trials_per_layout == 1
    assert loaded.layout_path == GRID20.resolve()
    assert loaded.sha256 == hashlib.sha256(SIM_PROTOCOL.read_bytes()).hexdigest()
    assert loaded.layout_sha256 == hashlib.sha256(GRID20.read_bytes()).hexdigest()


def test_pick_cube_protocol_uses_lerobot_checkpoints():
    loaded = load_protocol(REPO / "protocols" / "pick_cube_ab.yaml")
    assert all(isinstance(s, LeRobotPolicySpec) for s in loaded.protocol.policies.values())
    assert len(loaded.layout.marks) == 20
    assert loaded.protocol.episode.frames == 360
    # same success test, schedule seed and layout as the simulated demo
    sim = load_protocol(SIM_PROTOCOL).protocol
    assert (loaded.protocol.success, loaded.protocol.seed, loaded.protocol.episode) == \
        (sim.success, sim.seed, sim.episode)


def test_grid20_layout():
    layout, text = load_layout(GRID20)
    assert [m.id for m in layout.marks] == [f"M{i:02d}" for i in range(1, 21)]
    assert {m.stratum for m in layout.marks} == {"centre", "edge"}
    for m in layout.marks:
        assert 0.16 <= m.x <= 0.28 and -0.08 <= m.y <= 0.08
        assert REACH_MIN_M <= (m.x ** 2 + m.y ** 2) ** 0.5 <= REACH_MAX_M
    assert layout.mark("M07").stratum == "centre"
    with pytest.raises(KeyError):
        layout.mark("M99")
    assert text == GRID20.read_text()


def test_resolve_is_relative_to_the_protocol(tmp_path, monkeypatch):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "layout.yaml").write_text(GRID20.read_text())
    (tmp_path / "p" / "protocol.yaml").write_text(sim_protocol_text())
    monkeypatch.chdir(tmp_path)
    loaded = load_protocol("p/protocol.yaml")
    assert loaded.layout_path == (tmp_path / "p" / "layout.yaml").resolve()
    assert loaded.resolve("ckpt") == (tmp_path / "p" / "ckpt").resolve()


def test_local_checkpoint_must_exist(tmp_path):
    (tmp_path / "layout.yaml").write_text(GRID20.read_text())
    text = sim_protocol_text().replace("B: {type: scripted, aim_noise_mm: 12}",
                                       "B: {type: lerobot, path: ./checkpoints/act}")
    path = tmp_path / "protocol.yaml"
    path.write_text(text)
    with pytest.raises(BadInput) as info:
        load_protocol(path)
    (line,) = info.value.problems
    assert line.startswith(f"{path}:{line_of(text, 'checkpoints/act')}:") and "not found" in line
    (tmp_path / "checkpoints" / "act").mkdir(parents=True)
    assert isinstance(load_protocol(path).protocol.policies["B"], LeRobotPolicySpec)
    # a Hub repo id is not a local path and is not checked here
    path.write_text(text.replace("./checkpoints/act", "user/act_model"))
    assert load_protocol(path).protocol.policies["B"].path == "user/act_model"


def test_models_are_frozen():
    loaded = load_protocol(SIM_PROTOCOL)
    with pytest.raises(ValidationError):
        loaded.protocol.seed = 1  # type: ignore[misc]


# ------------------------------------------------------------------ what a policy is


def _identity_protocol(tmp_path, policies: str, layout: str | None = None):
    (tmp_path / "layout.yaml").write_text(layout or GRID20.read_text())
    text = sim_protocol_text().replace("  A: {type: scripted, aim_noise_mm: 3}\n  B: {type: scripted, aim_noise_mm: 12}\n",
                                       policies)
    assert text != sim_protocol_text()
    path = tmp_path / "protocol.yaml"
    path.write_text(text)
    return path, text


def test_policies_carry_method_seed_and_step(tmp_path):
    from orchestrator.design.protocol import policy_identity

    path, _ = _identity_protocol(tmp_path, "  A: {type: scripted, method: big, training_seed: 1, step: 5000}\n"
                                           "  B: {type: scripted, method: big, training_seed: 1, step: 9000}\n"
                                           "  C: {type: scripted, aim_noise_mm: 12}\n")
    policies = load_protocol(path).protocol.policies
    assert (policies["A"].method, policies["A"].training_seed, policies["A"].step) == ("big", 1, 5000)
    assert policy_identity("B", policies["B"]) == ("big", 1, 9000)
    assert policy_identity("C", policies["C"]) == ("C", None, None)     # no method: the label is the method
    # a protocol without the keys is read as before (the shipped ones have none)
    shipped = load_protocol(SIM_PROTOCOL).protocol.policies
    assert all(s.method is None and s.training_seed is None and s.step is None for s in shipped.values())


def test_seed_and_step_need_a_method_and_one_identity_is_one_policy(tmp_path):
    path, text = _identity_protocol(tmp_path, "  A: {type: scripted, training_seed: 1}\n"
                                              "  B: {type: scripted, aim_noise_mm: 12}\n")
    with pytest.raises(BadInput) as info:
        load_protocol(path)
    (line,) = info.value.problems
    assert line.startswith(f"{path}:{line_of(text, 'training_seed: 1')}:") and "training_seed needs a method" in line
    path, _ = _identity_protocol(tmp_path, "  A: {type: scripted, method: m, training_seed: 1}\n"
                                           "  B: {type: scripted, method: m, training_seed: 1, aim_noise_mm: 12}\n")
    with pytest.raises(BadInput) as info:
        load_protocol(path)
    assert "policies A and B are both method 'm', training_seed 1" in info.value.problems[0]
    path, _ = _identity_protocol(tmp_path, "  A: {type: scripted, method: m, training_seed: 1}\n"
                                           "  B: {type: scripted, method: m, training_seed: 2, aim_noise_mm: 12}\n")
    assert load_protocol(path).protocol.policies["B"].training_seed == 2     # positive control


def test_layout_strata_can_be_held_out(tmp_path):
    layout = GRID20.read_text() + "strata:\n  centre: {held_out: true}\n"
    path, _ = _identity_protocol(tmp_path, "  A: {type: scripted}\n  B: {type: scripted, aim_noise_mm: 12}\n",
                                 layout=layout)
    loaded = load_protocol(path)
    assert loaded.layout.held_out("centre") and not loaded.layout.held_out("edge")
    assert not load_protocol(SIM_PROTOCOL).layout.held_out("centre")
    (tmp_path / "layout.yaml").write_text(GRID20.read_text() + "strata:\n  cenrte: {held_out: true}\n")
    with pytest.raises(BadInput) as info:
        load_protocol(path)
    assert "strata 'cenrte' name no mark's stratum" in info.value.problems[0]
