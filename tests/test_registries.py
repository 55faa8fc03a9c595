"""Policy types and rig kinds are registered by name (as LeRobot registers robots and cameras):
the protocol's list of policy types is the only list, every name has its class, and the
interfaces are abstract base classes that refuse an incomplete implementation."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import POLICY_SPECS, ScriptedPolicySpec
from orchestrator.policies import base as policies
from orchestrator.policies.factory import make_policy
from orchestrator.rigs import base as rigs
from orchestrator.rigs.factory import RIG_MODULES, make_rig, rig_class, rig_kind
from orchestrator.rigs.profile import load_rig
from support.repo import REPO


def test_every_policy_type_of_the_protocol_has_its_registered_class():
    classes = {name: policies.policy_class(name) for name in POLICY_SPECS}
    assert len(classes) == 3   # count guard: scripted, lerobot and lerobot_server
    for name, cls in classes.items():
        assert issubclass(cls, policies.Policy) and cls.type_name == name
    assert set(policies.POLICY_TYPES) == set(POLICY_SPECS)   # nothing registered the protocol cannot name


def test_make_policy_builds_the_registered_class_and_refuses_an_unknown_type():
    policy = make_policy("A", ScriptedPolicySpec(type="scripted", aim_noise_mm=3))
    assert type(policy) is policies.policy_class("scripted") and policy.aim_noise_mm == 3
    with pytest.raises(BadInput, match="policy C: unknown policy type 'rl_magic'"):
        make_policy("C", "rl_magic")
    with pytest.raises(KeyError):
        policies.policy_class("rl_magic")


def test_registering_checks_the_class_and_refuses_a_second_class_for_a_name():
    class Incomplete(policies.Policy):
        def reset(self, context): ...

    with pytest.raises(TypeError):      # an ABC: select_action and close are missing
        Incomplete()
    with pytest.raises(TypeError, match="is not a Policy"):
        policies.register_policy("scripted")(object)
    with pytest.raises(ValueError, match="already registered by ScriptedPickPolicy"):
        policies.register_policy("scripted")(Incomplete)
    assert policies.POLICY_TYPES["scripted"].__name__ == "ScriptedPickPolicy"


def test_every_rig_kind_has_its_registered_class_and_profiles_pick_theirs():
    for kind in RIG_MODULES:
        cls = rig_class(kind)
        assert issubclass(cls, rigs.Rig) and cls.kind == kind
    assert set(rigs.RIG_KINDS) == set(RIG_MODULES)
    sim = load_rig(REPO / "hardware" / "sim.yaml")
    real = load_rig(REPO / "hardware" / "so101.example.yaml")
    assert (rig_kind(sim), rig_kind(real)) == ("sim", "lerobot")
    # a real-arm profile whose `twin:` section holds the twin's settings is still a real arm until
    # a running twin is attached (`--twin`): the section is not the twin
    sectioned = real.profile.model_copy(update={"twin": {"seed": 1}})
    assert rig_kind(sectioned) == "lerobot" and rig_kind(dataclasses.replace(real, profile=sectioned)) == "lerobot"
    paired = dataclasses.replace(real, kind="twin", twin=object())   # as `swap_sources` pairs them
    assert rig_kind(paired) == "twin"
    # the kind is stated with the device, never half: a twin kind with no twin, or a twin with
    # the profile's own kind, is refused when the pair is made
    for half in ({"kind": "twin"}, {"twin": object()}):
        with pytest.raises(ValueError, match="running twin"):
            dataclasses.replace(real, **half)
    assert type(make_rig(sim)) is rig_class("sim")
    with pytest.raises(ValueError, match="already registered"):
        rigs.register_rig("sim")(rig_class("lerobot"))


def test_a_rig_missing_a_safety_method_cannot_be_built():
    assert {"safe_stop", "disconnect", "go_to_rest", "act", "observe"} <= rigs.Rig.__abstractmethods__
    methods = {name: (lambda self, *args, **kwargs: None) for name in rigs.Rig.__abstractmethods__}
    without = {name: method for name, method in methods.items() if name != "safe_stop"}
    with pytest.raises(TypeError, match="safe_stop"):
        type("NoSafeStop", (rigs.Rig,), without)()
    type("Complete", (rigs.Rig,), methods)()     # positive control: with every method it builds
