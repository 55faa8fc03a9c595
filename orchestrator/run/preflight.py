"""Preflight: everything that must hold before the first trial, checked without starting anything.

Used by `orchestrator doctor --rig RIG [--protocol P]` and by the runner before the first trial.
Checks, in order (all of them run; each problem is one line):

- port: the robot's serial port exists (pyserial's port list, or the device path) -> hint
  `lerobot-find-port`;
- calibration: LeRobot's calibration file for this robot type and id exists (LeRobot's
  `connect()` would otherwise ask on stdin mid-campaign) -> the exact `lerobot-calibrate` command;
- rest pose: inside the calibrated range; the present pose (read, nothing written) next to it;
- safety: the real-arm settings that void the safety rules, refused unless their flag is given
  (`rigs.so101.hardware_checks.profile_refusals`);
- cameras: each camera opens and delivers frames at its configured fps (measured);
- policies: each LeRobot checkpoint of the protocol loads, offline, and its input/output features
  match the rig (camera names, image shapes, state and action sizes), spelled out; warnings as
  lerobot-rollout gives them; the weights of all policies together against the accelerator's
  free memory (they stay loaded for the whole campaign);
- disk: free space where the campaign is written, against an estimate of what it will need.

Port, calibration and cameras are the rig's own checks (`LeRobotRig.checks()`, in
`rigs/so101/hardware_checks.py`); this module only combines them with the protocol's and the disk's.
A simulated rig (`sim_so101`) has no port, calibration or cameras to check; its policies and disk
are checked the same way. Only the checks that need LeRobot import it (lazily).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core import disk
from orchestrator.core.errors import BadInput
from orchestrator.rigs.base import Check
from orchestrator.rigs.device_fault import one_line
from orchestrator.rigs.profile import LoadedRig
from orchestrator.run.recording import episode_bytes_estimate

if TYPE_CHECKING:
    from orchestrator.policies.lerobot import LeRobotPolicy


def check_policies(protocol: Any, rig_features: Any, robot_type: str | None = None) -> list[Check]:
    """Each LeRobot policy of the protocol loads and matches the rig; their weights fit together."""
    from orchestrator.design.protocol import LeRobotPolicySpec, deployment_label

    checks = []
    sizes: dict[str, dict[str, int]] = {}
    for label, spec in protocol.protocol.policies.items():
        if spec.type == "lerobot_server":
            checks.append(_server_check(label, spec, protocol, rig_features))
            continue
        if not isinstance(spec, LeRobotPolicySpec):
            checks.append(Check(f"policy {label}", True, f"{spec.type}"))
            continue
        from orchestrator.policies.checkpoint import parameter_bytes
        from orchestrator.policies.factory import lerobot_policy
        from orchestrator.policies.lerobot import LeRobotPolicy

        try:
            policy = lerobot_policy(spec, protocol.path.parent, protocol.protocol.task, rig_features,
                                    fps=protocol.protocol.episode.fps, robot_type=robot_type)
        except BadInput as exc:
            prefix = f"policy checkpoint {spec.path}: "
            checks.extend(Check(f"policy {label} ({spec.path})", False, line.removeprefix(prefix))
                          for line in exc.problems)
            continue
        except Exception as exc:  # noqa: BLE001
            checks.append(Check(f"policy {label}", False, f"{spec.path}: cannot load: {one_line(exc)}"))
            continue
        cfg = policy.config
        mode = "" if deployment_label(spec) == "sync" else f", {deployment_label(spec)}"
        cams = [k.removeprefix("observation.images.") for k in cfg.image_features]
        size = parameter_bytes(policy.policy)
        sizes.setdefault(str(policy.device), {})[label] = size
        checks.append(Check(f"policy {label}", True,
                            f"{spec.path} loads ({cfg.type} on {policy.device}{mode}, cameras "
                            f"{', '.join(cams) or 'none'}, {len(policy.ordered_action_keys)} actions)"))
        checks.append(Check(f"policy {label}", True, f"{size / 1e6:.0f} MB of weights; warm-up forward pass "
                                                     f"{policy.warmup_s * 1000:.0f} ms"))
        if type(policy) is LeRobotPolicy:   # synchronous; an engine's (RTC) ticks are its own
            checks.append(_step_time_check(label, policy, protocol.protocol.episode.fps))
        prefix = f"policy checkpoint {spec.path}: "
        checks.extend(Check(f"policy {label}", True, "warning: " + w.removeprefix(prefix)) for w in policy.warnings)
        policy.close()
    checks.extend(_memory_checks(sizes))
    return checks


def _step_time_check(label: str, policy: LeRobotPolicy, fps: int) -> Check:
    """The policy's measured step time against the protocol's control period: two of its action
    chunks (8 to 32 steps) on a still observation. A step slower than the period overruns on the
    arm and on the twin alike, and the steps it overruns are lost (the episode ends on time)."""
    import statistics

    chunk = policy.action_chunk_steps
    times = policy.step_times(min(max(2 * chunk, 8), 32))
    period_ms, worst_ms = 1000 / fps, 1000 * max(times)
    line = (f"step time {1000 * statistics.median(times):.0f} ms median, {worst_ms:.0f} ms worst over "
            f"{len(times)} steps, against the protocol's {period_ms:.1f} ms period ({fps} Hz)")
    if worst_ms > period_ms:
        line = (f"warning: {line}: slower than the period, so on the arm (and the twin) its slow steps overrun "
                "and the steps they overrun are lost; the report counts them")
    return Check(f"policy {label}", True, line)


def _server_check(label: str, spec: Any, protocol: Any, rig_features: Any) -> Check:
    """A served policy: the server answers and loads the checkpoint (`SendPolicyInstructions`)."""
    from orchestrator.policies.lerobot_server import ServerPolicy

    try:
        policy = ServerPolicy(spec, protocol.protocol.task, rig_features, fps=protocol.protocol.episode.fps)
    except BadInput as exc:
        return Check(f"policy {label}", False, "; ".join(exc.problems))
    policy.close()
    return Check(f"policy {label}", True, f"{spec.path} served by {spec.address} ({spec.policy_type} on "
                                          f"{spec.device}; loaded in {policy.warmup_s:.1f} s)")


def _memory_checks(sizes: dict[str, dict[str, int]]) -> list[Check]:
    from orchestrator.policies.checkpoint import memory_problem

    checks = []
    for device, by_label in sizes.items():
        free = None
        if device.startswith("cuda"):
            import torch

            free = torch.cuda.mem_get_info(torch.device(device))[0]
        problem = memory_problem(by_label, device, free)
        if problem:
            checks.append(Check(f"memory {device}", False, problem))
        elif free is not None:
            checks.append(Check(f"memory {device}", True, f"{sum(by_label.values()) / (1 << 30):.1f} GiB of "
                                                          f"weights, {free / (1 << 30):.1f} GiB free"))
    return checks


def estimate_campaign_bytes(protocol: Any, profile: Any) -> int:
    """What a campaign writes: every trial's episode (`recording.episode_bytes_estimate`)."""
    if protocol is None:
        return 0
    p = protocol.protocol
    trials = len(protocol.layout.marks) * len(p.policies) * p.trials_per_layout
    return trials * episode_bytes_estimate(profile.cameras, p.episode.duration_s)


def check_disk(path: Path, need_bytes: int = 0) -> Check:
    """Free space on the file system that will hold the campaign, by the runner's own rule
    (`core.disk`) applied to the whole campaign: `run` checks the same rule
    before every episode, and warns at its start when the whole campaign may not fit."""
    free, required = disk.free_bytes(path), disk.required_free_bytes(need_bytes)
    if free < required:
        return Check("disk", False, f"{disk.size_text(free)} free at {path}, the campaign needs about "
                                    f"{disk.size_text(required)}; free some space or choose another --out")
    return Check("disk", True, f"{disk.size_text(free)} free at {path} (campaign estimate "
                               f"{disk.size_text(need_bytes)})")


def run_preflight(loaded_rig: LoadedRig, protocol: Any = None, out_dir: Path | str | None = None, *,
                  rig: Any = None, camera_seconds: float = 1.0,
                  on_check: Callable[[Check], None] | None = None, allowed: Iterable[str] = ()) -> list[Check]:
    """All checks for this rig (and protocol, and campaign folder). Nothing is started: devices
    opened to be checked are closed again (a `rig` already connected is measured as it is)."""
    from orchestrator.policies.lerobot import SO101_ROBOT_TYPE, rig_observation_features

    checks: list[Check] = []

    def add(items: Iterable[Check]) -> None:
        for check in items:
            checks.append(check)
            if on_check:
                on_check(check)

    profile = loaded_rig.profile
    if profile.simulated:
        features, robot_type = rig_observation_features(profile), SO101_ROBOT_TYPE
    else:
        if rig is None:
            from orchestrator.rigs.so101.rig import LeRobotRig

            rig = LeRobotRig(loaded_rig)
        add(rig.checks(camera_seconds))
        from orchestrator.rigs.so101.hardware_checks import profile_refusals

        add(Check("safety", False, line) for line in profile_refusals(rig, allowed))
        features, robot_type = rig, None
    if protocol is not None:
        add(check_policies(protocol, features, robot_type))
    add([check_disk(Path(out_dir or "recordings"), estimate_campaign_bytes(protocol, profile))])
    return checks


def require_ready(checks: list[Check]) -> None:
    """BadInput (exit 2) with one line per failed check; nothing has been started."""
    problems = [c.line for c in checks if not c.ok]
    if problems:
        raise BadInput(problems)
