"""The `Rig` interface is what the runner and the policies use: every member they read is declared
on `Rig` with a safe default, the registered rigs with servos override the safety-relevant ones,
and no module of `orchestrator/run` or `orchestrator/policies` probes a rig for an undeclared
member (`getattr(rig, ...)` / `hasattr(rig, ...)`, as
`grep -rn "getattr(.*rig\\|hasattr(.*rig" orchestrator/run orchestrator/policies` finds them).

The runner, the policy factory and preflight probe neither a rig nor a policy (`Policy` declares
its members: tests/test_policy_interface.py): every `getattr`/`hasattr` in `orchestrator/run` and
`policies/factory.py` reads an object listed in `NOT_A_RIG_OR_A_POLICY`, by the source text of
its first argument, with the reason it is neither."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
from pathlib import Path

import pytest

from orchestrator.rigs.base import EpisodeFacts, Rig
from orchestrator.rigs.factory import RIG_MODULES, make_rig, rig_class
from orchestrator.rigs.profile import load_rig, profile_observation_features
from support import sources
from support.fake_rig import StillRig
from support.repo import REPO

# What a rig with servos must report itself: the defaults say "nothing known", which on an arm
# with servos would hide a servo left torqued or in alarm from the operator.
SAFETY_MEMBERS = ("torque_problems", "servo_problems", "torque_enabled")
# Kinds that keep the defaults, and why that is true of them.
WITHOUT_SERVOS = {"sim": "the simulated arm has no servos: no torque to leave on, no alarm to read"}

# grep's `getattr(.*rig\|hasattr(.*rig`, line by line
PROBE = re.compile(r"getattr\(.*rig|hasattr\(.*rig")
PROBED_PACKAGES = ("orchestrator/run", "orchestrator/policies")

# The runner, the factory and preflight; every getattr/hasattr there reads one of these objects.
RUNNER = ("orchestrator/run", "orchestrator/policies/factory.py")
NOT_A_RIG_OR_A_POLICY = {
    ("orchestrator/run/bookkeeping.py", "rules"): "the protocol's `aborts` rules, read by an abort class's name",
    ("orchestrator/run/sequential.py", "exc"): "any exception that aborted a trial; a BadInput's carries a hint",
    ("orchestrator/run/parallel.py", "pool"): "the standard library's process pool: its workers, to kill them",
    ("orchestrator/policies/factory.py", "spec"): "a protocol's policy spec, or a bare type name",
}


def missing_overrides(cls: type[Rig]) -> list[str]:
    """The safety-relevant members `cls` takes from `Rig` unchanged."""
    return [name for name in SAFETY_MEMBERS
            if inspect.getattr_static(cls, name) is inspect.getattr_static(Rig, name)]


def probes(root: Path) -> list[str]:
    """`path:line: text` of every line under `root`'s run/ and policies/ that probes a rig."""
    found = []
    for package in PROBED_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if PROBE.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def runner_probes(root: Path) -> list[str]:
    """`path:line: getattr(first argument, ...)` of every getattr/hasattr call in the runner, the
    factory and preflight under `root` whose object is not in `NOT_A_RIG_OR_A_POLICY`."""
    found = []
    for top in RUNNER:
        for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else [root / top]:
            name = str(path.relative_to(root))
            for node in sources.walk(path):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("getattr", "hasattr") and node.args):
                    obj = ast.unparse(node.args[0])
                    if (name, obj) not in NOT_A_RIG_OR_A_POLICY:
                        found.append(f"{name}:{node.lineno}: {node.func.id}({obj}, ...)")
    return found


def test_every_registered_rig_with_servos_reports_them_itself():
    assert set(RIG_MODULES) == {"sim", "lerobot", "twin"}
    for kind in RIG_MODULES:
        missing = missing_overrides(rig_class(kind))
        if kind in WITHOUT_SERVOS:
            # the reason holds only while the kind reads no servos: one that starts to must say so
            assert missing == list(SAFETY_MEMBERS), (kind, WITHOUT_SERVOS[kind])
        else:
            assert missing == [], f"rig kind {kind!r} takes {missing} from Rig: a servo fault would go unreported"


def test_positive_control_a_rig_that_drops_an_override_is_caught():
    lerobot = rig_class("lerobot")
    assert missing_overrides(lerobot) == []
    # `torque_problems` removed (the class's own property back to Rig's)
    dropped = type("NoTorqueReport", (lerobot,), {"torque_problems": Rig.torque_problems})
    assert missing_overrides(dropped) == ["torque_problems"]
    assert missing_overrides(StillRig) == list(SAFETY_MEMBERS)


class IdleRig(StillRig):
    realtime = False

    def observe(self, with_images=True):
        return {}

    def act(self, action):
        return action

    def end_episode(self):
        return EpisodeFacts()


def test_the_defaults_say_nothing_is_known():
    rig = IdleRig()
    assert list(rig.torque_problems) == [] and rig.servo_problems() == []
    assert rig.camera_poses() is None and rig.calibration_path is None
    assert rig.calibrated_range("elbow_flex") is None and rig.joint_units == "degrees"
    assert rig.action_features is None and rig.robot_type is None
    assert dict(rig.last_frames) == {}
    with pytest.raises(TypeError):              # the shared default cannot be filled by one rig
        rig.last_frames["front"] = (0.0, False)   # type: ignore[index]


def test_a_simulated_rig_gives_its_profiles_observation_features():
    loaded = load_rig(REPO / "hardware" / "sim.yaml")
    sim = make_rig(loaded)
    assert sim.observation_features == profile_observation_features(loaded.profile)
    assert set(sim.observation_features) >= {"shoulder_pan.pos", "gripper.pos"} | set(loaded.profile.cameras)


def test_run_and_policies_never_probe_a_rig():
    assert probes(REPO) == []


def test_positive_control_a_planted_probe_is_found(tmp_path):
    for package in PROBED_PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert probes(tmp_path) == []      # the copy is as clean as the tree
    motion = tmp_path / "orchestrator" / "run" / "motion.py"
    motion.write_text(motion.read_text() + '\nPROBED = getattr(self.rig, "torque_problems", [])\n')
    checkpoint = tmp_path / "orchestrator" / "policies" / "checkpoint.py"
    checkpoint.write_text(checkpoint.read_text() + '\nPROBED = hasattr(rig, "calibrated_range")\n')
    found = probes(tmp_path)
    assert len(found) == 2
    assert found[0].startswith("orchestrator/run/motion.py:") and "getattr(self.rig" in found[0]
    assert found[1].startswith("orchestrator/policies/checkpoint.py:") and "hasattr(rig" in found[1]


def test_the_runner_factory_and_preflight_never_probe_a_rig_or_a_policy():
    assert runner_probes(REPO) == []
    # each listed read is still there (a stale entry would let a probe of that name through)
    assert {entry for entry in NOT_A_RIG_OR_A_POLICY
            if f"attr({entry[1]}," in (REPO / entry[0]).read_text()} == set(NOT_A_RIG_OR_A_POLICY)


def test_positive_control_a_planted_probe_of_a_policy_is_found(tmp_path):
    shutil.copytree(REPO / "orchestrator" / "run", tmp_path / "orchestrator" / "run",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "orchestrator" / "policies").mkdir()
    shutil.copy(REPO / "orchestrator" / "policies" / "factory.py", tmp_path / "orchestrator" / "policies")
    assert runner_probes(tmp_path) == []
    plants = {
        "orchestrator/run/control_loop.py": '\nSTOP = getattr(policy, "stop", None)\n',
        "orchestrator/policies/factory.py": '\nENGINE = hasattr(cls, "runs_in_an_engine")\n',
        "orchestrator/run/preflight.py": '\nWARNINGS = getattr(p, "warnings", ())\n',      # any name
        "orchestrator/run/motion.py": '\nHINT = getattr(exc, "hint", None)\n',   # listed for another file only
    }
    for name, line in plants.items():
        path = tmp_path / name
        path.write_text(path.read_text() + line)
    found = runner_probes(tmp_path)
    assert len(found) == len(plants)
    assert {(line.split(":")[0], line.split(": ", 1)[1]) for line in found} == {
        ("orchestrator/run/control_loop.py", "getattr(policy, ...)"),
        ("orchestrator/policies/factory.py", "hasattr(cls, ...)"),
        ("orchestrator/run/preflight.py", "getattr(p, ...)"),
        ("orchestrator/run/motion.py", "getattr(exc, ...)")}


SPECIFIC = ("orchestrator.rigs.so101", "orchestrator.rigs.twin")


def generic_imports_of_specific(root: Path) -> list[str]:
    """`path:line: module` of every import, at any depth, of a specific rig's package
    (`rigs/so101`, `rigs/twin`) by a generic module of `rigs/` (the factory and the extension
    hooks name them as text, imported on first use)."""
    found = []
    for path in sorted((root / "orchestrator" / "rigs").glob("*.py")):
        for node in sources.walk(path):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.name}:{node.lineno}: {m}" for m in modules if m.startswith(SPECIFIC)]
    return found


def test_generic_rig_modules_import_no_specific_rig():
    assert len(list((REPO / "orchestrator" / "rigs").glob("*.py"))) > 8
    assert generic_imports_of_specific(REPO) == []


def test_positive_control_a_generic_module_importing_the_so101_adapter_is_found(tmp_path):
    shutil.copytree(REPO / "orchestrator" / "rigs", tmp_path / "orchestrator" / "rigs",
                    ignore=shutil.ignore_patterns("__pycache__"))
    fault = tmp_path / "orchestrator" / "rigs" / "device_fault.py"
    fault.write_text(fault.read_text() + "\nfrom orchestrator.rigs.so101.servo_alarms import motor_names\n"
                     "\ndef f():\n    import orchestrator.rigs.twin.rig\n")
    assert generic_imports_of_specific(tmp_path) == [
        f"device_fault.py:{len(fault.read_text().splitlines()) - 3}: orchestrator.rigs.so101.servo_alarms",
        f"device_fault.py:{len(fault.read_text().splitlines())}: orchestrator.rigs.twin.rig"]
