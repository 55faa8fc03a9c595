"""Per-step overhead of the control loop at 30 Hz with two cameras recording, on the fake SO-101.

The arm is LeRobot's own SOFollower on the fake Feetech serial layer (tests/fakes/feetech.py),
the cameras are two video files played at the configured fps (rigs/so101/videocam.py) -- the same
robot for every loop measured:

  orchestrator   `episode.run_episode` (the runner's loop) with `recording.EpisodeRecorder`
                 writing both cameras to H.264 on its background thread;
  lerobot-base   LeRobot's rollout loop without recording (`BaseStrategy.run`);
  lerobot-record LeRobot's recording rollout loop (`EpisodicStrategy._policy_loop`, a
                 `LeRobotDataset` with lerobot-rollout's default writer settings).

The policy is a "hold" policy (returns the present joint positions), the same cost in every
loop. Overhead per step = time from the end of the previous sleep to the start of this step's
sleep, minus the time inside observation, policy and action; it is what the loop itself adds
(recording hand-off, processors, bookkeeping). Overruns = periods longer than 1.05 x nominal.

    uv run python bench/control_loop.py [--seconds 10] [--fps 30] [--width 640 --height 480]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Timed:
    """Wraps a callable and records its wall time per call."""

    def __init__(self, fn):
        self.fn, self.times = fn, []

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.times.append(time.perf_counter() - t0)


class SleepProbe:
    """Replaces a loop's sleep function: records when each step's work ends and sleep returns."""

    def __init__(self, sleep, absolute: bool):
        self.sleep, self.absolute = sleep, absolute
        self.called: list[float] = []
        self.returned: list[float] = []
        self.deadlines: list[float] = []

    def __call__(self, arg):
        now = time.perf_counter()
        self.called.append(now)
        self.deadlines.append(arg if self.absolute else now + max(arg, 0.0))
        self.sleep(arg)
        self.returned.append(time.perf_counter())


def stats(name: str, probe: SleepProbe, inside: list[list[float]], period: float) -> dict:
    """Overhead per step = work span - (observe + policy + act); skips the first step."""
    n = min(len(probe.called), *(len(x) for x in inside))
    spans = [probe.called[i] - probe.returned[i - 1] for i in range(1, n)]
    busy = [sum(x[i] for x in inside) for i in range(1, n)]
    overhead = np.array(spans) - np.array(busy)
    periods = np.diff(probe.returned[:n])
    late = np.array(probe.returned[1:n]) - np.array(probe.deadlines[1:n])
    return {"loop": name, "steps": n - 1, "late_p99_ms": float(np.percentile(late, 99) * 1e3),
            "overhead_p50_ms": float(np.percentile(overhead, 50) * 1e3),
            "overhead_p99_ms": float(np.percentile(overhead, 99) * 1e3),
            "overhead_max_ms": float(overhead.max() * 1e3),
            "io_policy_p50_ms": float(np.percentile(busy, 50) * 1e3),
            "period_p50_ms": float(np.percentile(periods, 50) * 1e3),
            "period_p99_ms": float(np.percentile(periods, 99) * 1e3),
            "overruns": int((periods > period * 1.05).sum())}


def build_rig(tmp: Path, width: int, height: int, fps: int):
    import pytest

    from fakes import feetech
    from fakes.rigs import write_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.so101.rig import LeRobotRig
    from support.video import write_test_video

    port = str(tmp / "ttyACM0")
    open(port, "w").close()
    arm = feetech.FakeFeetechArm(port, calibration=feetech.default_calibration())
    feetech.install(pytest.MonkeyPatch(), arm)
    feetech.write_calibration_file(tmp / "cal", "bench")
    cams = {"front": (height, width), "wrist": (height, width)}
    videos = {n: write_test_video(tmp / f"{n}.mp4", width=width, height=height, frames=60) for n in cams}
    rig_path = write_rig(tmp / "rig.yaml", port, tmp / "cal", videos, cameras=cams, fps=fps,
                         robot_id="bench", max_relative_target=10.0)
    loaded = load_rig(rig_path)
    rig = LeRobotRig(loaded, rest_speed_deg_s=600.0)
    rig.connect()
    rig.go_to_rest()
    return rig, loaded


class NoRecorder:
    """The control for `bench_orchestrator`: same loop, nothing recorded."""

    def wants_images(self, step):
        return False

    def frame(self, *args):
        pass

    def finish(self):
        return SimpleNamespace(video_frames={})


def bench_orchestrator(rig, loaded, tmp: Path, fps: int, seconds: float, record: bool = True,
                       policy=None, name: str | None = None) -> dict:
    from orchestrator.design.protocol import Cube, Mark
    from orchestrator.policies.base import EpisodeContext, Policy
    from orchestrator.rigs.base import Rig
    from orchestrator.run import control_loop as episode_mod
    from orchestrator.run.operator_protocol import AutoOperator
    from orchestrator.run.recording import EpisodeRecorder

    class Hold(Policy):
        needs_images = True

        def reset(self, context):
            pass

        def select_action(self, obs):
            return {k: v for k, v in obs.items() if k.endswith(".pos")}

        def close(self):
            pass

    policy = policy or Hold()
    observe, act, select = Timed(rig.observe), Timed(rig.act), Timed(policy.select_action)
    timed_rig = SimpleNamespace(observe=observe, act=act, realtime=True, end_episode=rig.end_episode)
    policy.select_action = select
    probe = SleepProbe(episode_mod.precise_sleep_until, absolute=True)
    episode_mod.precise_sleep_until = probe
    context = EpisodeContext(mark=Mark(id="M01", x=0.2, y=0.0), cube=Cube(), seed=0, fps=fps,
                             duration_s=seconds, task="bench")
    recorder = (EpisodeRecorder(tmp / "campaign", "benchepisode", loaded.profile.cameras, fps, round(fps * seconds),
                                realtime=True)
                if record else NoRecorder())
    try:
        # duck-typed: the timed rig has the loop's three calls, NoRecorder the recorder's
        facts, timing = episode_mod.run_episode(cast(Rig, timed_rig), policy, context, cast(EpisodeRecorder, recorder),
                                                AutoOperator(lambda s: None))
        recorded = recorder.finish()
    finally:
        episode_mod.precise_sleep_until = probe.sleep
    out = stats(name or ("orchestrator" if record else "orch. no-rec"), probe,
                [observe.times, select.times, act.times], 1 / fps)
    for key, times in (("observe", observe.times), ("policy", select.times), ("act", act.times)):
        out[f"{key}_p50_ms"] = float(np.percentile(times, 50) * 1e3)
        out[f"{key}_p99_ms"] = float(np.percentile(times, 99) * 1e3)
        out[f"{key}_total_s"] = float(sum(times))
    out["record_p99_ms"] = timing.record_p99_ms
    out["video_frames"] = recorded.video_frames
    out["inference"] = timing.inference
    return out


def lerobot_context(rig, fps: int, seconds: float, dataset=None):
    import torch
    from lerobot.rollout.inference.base import InferenceEngine
    from lerobot.rollout.robot_wrapper import ThreadSafeRobot

    robot = rig.robot
    from support.rollout import rollout_features

    teleop_p, action_p, obs_p, features, action_keys = rollout_features(robot)

    class HoldEngine(InferenceEngine):
        def start(self):
            pass

        def stop(self):
            pass

        def reset(self):
            pass

        def get_action(self, obs_frame):
            return torch.from_numpy(obs_frame["observation.state"].copy())

    engine = HoldEngine()
    engine.get_action = Timed(engine.get_action)
    wrapper = ThreadSafeRobot(robot)
    wrapper.get_observation = Timed(wrapper.get_observation)
    wrapper.send_action = Timed(wrapper.send_action)
    cfg = SimpleNamespace(fps=fps, duration=seconds, use_torch_compile=False, display_data=False,
                          interpolation_multiplier=1, return_to_initial_position=False)
    ctx = SimpleNamespace(
        runtime=SimpleNamespace(cfg=cfg, shutdown_event=__import__("threading").Event()),
        hardware=SimpleNamespace(robot_wrapper=wrapper, teleop=None, initial_position=None),
        policy=SimpleNamespace(inference=engine),
        processors=SimpleNamespace(teleop_action_processor=teleop_p, robot_action_processor=action_p,
                                   robot_observation_processor=obs_p),
        data=SimpleNamespace(dataset=dataset, dataset_features=features, hw_features={},
                             ordered_action_keys=action_keys))
    return ctx, features, engine, wrapper


def bench_lerobot_base(rig, fps: int, seconds: float) -> dict:
    from lerobot.rollout.strategies import base as base_mod

    ctx, _, engine, wrapper = lerobot_context(rig, fps, seconds)
    strategy = base_mod.BaseStrategy(SimpleNamespace())
    strategy._init_engine(ctx)
    probe = SleepProbe(base_mod.precise_sleep, absolute=False)
    base_mod.precise_sleep = probe
    try:
        strategy.run(ctx)
    finally:
        base_mod.precise_sleep = probe.sleep
    return stats("lerobot-base", probe, [wrapper.get_observation.times, engine.get_action.times,
                                          wrapper.send_action.times], 1 / fps)


def bench_lerobot_record(rig, tmp: Path, fps: int, seconds: float) -> dict:
    from lerobot.configs.dataset import DatasetRecordConfig
    from lerobot.datasets import LeRobotDataset
    from lerobot.rollout.strategies import episodic as ep_mod

    ctx, features, engine, wrapper = lerobot_context(rig, fps, seconds)
    defaults = DatasetRecordConfig()
    dataset = LeRobotDataset.create(
        "local/rollout_bench", fps, root=tmp / "dataset", robot_type=rig.robot.name, features=features,
        use_videos=True, image_writer_processes=defaults.num_image_writer_processes,
        image_writer_threads=defaults.num_image_writer_threads_per_camera * len(rig.robot.cameras),
        batch_encoding_size=defaults.video_encoding_batch_size, streaming_encoding=defaults.streaming_encoding)
    ctx.data.dataset = dataset
    strategy = ep_mod.EpisodicStrategy(SimpleNamespace())
    strategy._init_engine(ctx)
    probe = SleepProbe(ep_mod.precise_sleep, absolute=False)
    ep_mod.precise_sleep = probe
    try:
        strategy._policy_loop(ctx=ctx, robot=wrapper, events={"exit_early": False}, features=features, fps=fps,
                              control_time_s=seconds, dataset=dataset, single_task="bench")
    finally:
        ep_mod.precise_sleep = probe.sleep
    t0 = time.perf_counter()
    with quiet_stderr():  # the AV1 encoder's banner
        dataset.save_episode()
        dataset.finalize()
    out = stats("lerobot-record", probe, [wrapper.get_observation.times, engine.get_action.times,
                                            wrapper.send_action.times], 1 / fps)
    out["save_episode_s"] = time.perf_counter() - t0
    return out


class quiet_stderr:
    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--skip-lerobot", action="store_true")
    parser.add_argument("--twin", action="store_true",
                        help="the whole LeRobot stack on the rehearsal twin (hardware/so101_twin.yaml: two "
                             "320x240 cameras at 30 fps) with a tiny ACT checkpoint, recording on")
    parser.add_argument("--switch-interval-ms", type=float, default=None,
                        help="set sys.setswitchinterval (the GIL hand-over period, default 5 ms)")
    args = parser.parse_args()
    if args.switch_interval_ms:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    import logging

    logging.disable(logging.WARNING)  # LeRobot's "loop is running slower" lines
    if args.twin:
        return bench_twin(args.fps, args.seconds)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        rig, loaded = build_rig(tmp, args.width, args.height, args.fps)
        try:
            rows = [bench_orchestrator(rig, loaded, tmp, args.fps, args.seconds),
                    bench_orchestrator(rig, loaded, tmp, args.fps, args.seconds, record=False)]
            if not args.skip_lerobot:
                rows.append(bench_lerobot_base(rig, args.fps, args.seconds))
                rows.append(bench_lerobot_record(rig, tmp, args.fps, args.seconds))
        finally:
            rig.disconnect()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"control loop at {args.fps} Hz, {args.seconds:g} s, two {args.width}x{args.height} cameras, "
          f"fake SO-101 (LeRobot SOFollower on a fake serial port); {os.cpu_count()} CPUs, load {load:.1f}, "
          f"GIL switch interval {sys.getswitchinterval() * 1e3:g} ms")
    print(f"{'loop':15} {'steps':>5} {'overhead p50':>13} {'p99':>8} {'max':>8} {'io+policy p50':>14} "
          f"{'period p50':>11} {'p99':>8} {'overruns':>8} {'wake late p99':>14}")
    for r in rows:
        print(f"{r['loop']:15} {r['steps']:5d} {r['overhead_p50_ms']:11.3f}ms {r['overhead_p99_ms']:6.3f}ms "
              f"{r['overhead_max_ms']:6.2f}ms {r['io_policy_p50_ms']:12.2f}ms {r['period_p50_ms']:9.2f}ms "
              f"{r['period_p99_ms']:6.2f}ms {r['overruns']:8d} {r['late_p99_ms']:12.2f}ms")
    ours, norec = rows[0], rows[1]
    rows = [rows[0]] + rows[2:]
    print(f"orchestrator overruns: {ours['overruns']} recording vs {norec['overruns']} not recording "
          f"(same loop; the difference is what recording costs the loop on this machine)")
    print(f"orchestrator: recording hand-off p99 {ours['record_p99_ms']:.3f} ms, {ours['video_frames']} video frames "
          f"written; target p99 overhead < 2 ms: {'met' if ours['overhead_p99_ms'] < 2.0 else 'NOT met'}")
    for r in rows[1:]:
        ratio = r["overhead_p99_ms"] / ours["overhead_p99_ms"] if ours["overhead_p99_ms"] > 0 else float("nan")
        print(f"{r['loop']}: p99 overhead {ratio:.1f}x the orchestrator's"
              + (f"; save_episode after the loop {r['save_episode_s']:.1f} s" if "save_episode_s" in r else ""))


class PolicyServerProcess:
    """LeRobot's policy server (`python -m lerobot.async_inference.policy_server`) on a free local
    port, in its own process (its ./logs go to `folder`)."""

    def __init__(self, folder: Path, fps: int):
        import socket
        import subprocess

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.log = folder / "server.out"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lerobot.async_inference.policy_server", "--host=127.0.0.1",
             f"--port={self.port}", f"--fps={fps}", "--inference_latency=0", "--obs_queue_timeout=1"],
            cwd=folder, stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while "PolicyServer started" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the policy server did not start: " + self.log.read_text()[-500:])
            time.sleep(0.2)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def twin_policies(tmp: Path, shape, rig, fps: int, server: PolicyServerProcess) -> dict:
    """The policies measured on the twin: a tiny ACT (sync), a tiny SmolVLA under sync and RTC
    inference (tests/support/vla.py), and a chunk-20 ACT served by LeRobot's policy server."""
    from orchestrator.design.protocol import InferenceSettings, LeRobotPolicySpec, LeRobotServerPolicySpec
    from orchestrator.policies.lerobot import LeRobotPolicy
    from orchestrator.policies.lerobot_server import ServerPolicy
    from orchestrator.policies.rtc import EnginePolicy
    from support.act import make_act_checkpoint
    from support.vla import make_smolvla_checkpoint

    make_act_checkpoint(tmp / "act", shape)
    make_act_checkpoint(tmp / "act20", shape, chunk_size=20)
    make_smolvla_checkpoint(tmp / "vla", shape)
    rtc = InferenceSettings.model_validate({"type": "rtc", "rtc": {"execution_horizon": 5}, "queue_threshold": 4})
    served = LeRobotServerPolicySpec(type="lerobot_server", address=f"127.0.0.1:{server.port}",
                                     path=str(tmp / "act20"), policy_type="act", actions_per_chunk=20)
    return {"twin+ACT": LeRobotPolicy(LeRobotPolicySpec(type="lerobot", path=str(tmp / "act")), tmp, "bench", rig),
            "twin+VLA sync": LeRobotPolicy(LeRobotPolicySpec(type="lerobot", path=str(tmp / "vla")), tmp, "bench", rig),
            "twin+VLA rtc": EnginePolicy(LeRobotPolicySpec(type="lerobot", path=str(tmp / "vla"), inference=rtc),
                                         tmp, "bench", rig, fps=fps),
            "twin+served ACT": ServerPolicy(served, "bench", rig, fps=fps)}


def bench_twin(fps: int, seconds: float) -> None:
    """The runner's loop through LeRobot's SOFollower / FeetechMotorsBus / scservo_sdk / twin
    cameras on the twin, recording on, with each policy of `twin_policies` (LeRobot's rollout
    pipeline; RTC through LeRobot's RTC engine; the served one through LeRobot's policy server).
    Inside LeRobot = get_observation + the policy call + send_action; the orchestrator's own
    share = the rest of each step's work (loop, recording hand-off, bookkeeping)."""
    import torch

    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    loaded = load_rig(ROOT / "hardware" / "so101_twin.yaml")
    shape = {n: (c.height, c.width) for n, c in loaded.profile.cameras.items()}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        server = PolicyServerProcess(tmp, fps)
        twin = start_twin(loaded)
        try:
            rig = make_rig(twin.rig)
            policies = twin_policies(tmp, shape, rig, fps, server)
            rig.connect()
            rig.go_to_rest()
            rows = [bench_orchestrator(rig, twin.rig, tmp, fps, seconds, name="twin+hold")]
            for name, policy in policies.items():
                policy.reset(None)
                rows.append(bench_orchestrator(rig, twin.rig, tmp / name.replace(" ", "_"), fps, seconds,
                                               policy=policy, name=name))
                policy.close()
            state = twin.request("state")
            rig.disconnect()
        finally:
            twin.close()
            server.close()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cams = ", ".join(f"{n} {w}x{h}" for n, (h, w) in shape.items())
    print(f"twin: {fps} Hz, {seconds:g} s, cameras {cams} at {loaded.profile.cameras['front'].fps} fps, "
          f"tiny ACT (chunk 4), tiny SmolVLA (chunk 20, RTC horizon 5), served ACT (chunk 20), recording on; {os.cpu_count()} CPUs, load {load:.1f}, torch threads "
          f"{torch.get_num_threads()}; twin priority {twin.priority}, physics lag {state['lag_s']:.3f} s "
          f"over {state['wall_s']:.0f} s")
    for row in rows:
        steps = row["steps"]
        lerobot_s = row["observe_total_s"] + row["policy_total_s"] + row["act_total_s"]
        print(f"{row['loop']}: steps {steps}, overruns {row['overruns']} "
              f"({100 * row['overruns'] / max(steps, 1):.0f} %), period p50 {row['period_p50_ms']:.2f} ms "
              f"p99 {row['period_p99_ms']:.2f} ms")
        print(f"  orchestrator overhead per step p50 {row['overhead_p50_ms']:.3f} ms, p99 "
              f"{row['overhead_p99_ms']:.3f} ms, max {row['overhead_max_ms']:.2f} ms; recording hand-off p99 "
              f"{row['record_p99_ms']:.3f} ms")
        print(f"  inside LeRobot p50: observe {row['observe_p50_ms']:.2f} ms, policy {row['policy_p50_ms']:.2f} ms "
              f"(p99 {row['policy_p99_ms']:.2f} ms), "
              f"act {row['act_p50_ms']:.2f} ms; in total {lerobot_s:.2f} s inside LeRobot vs "
              f"{row['overhead_p50_ms'] * steps / 1e3:.2f} s (p50 x steps) in the orchestrator's loop")
        inf = row.get("inference")
        if inf:
            print(f"  {inf['mode']} inference: {inf['chunks']} chunks, latency p50 {inf.get('latency_p50_ms', 0):.1f} ms "
                  f"p99 {inf.get('latency_p99_ms', 0):.1f} ms max {inf.get('latency_max_ms', 0):.1f} ms, "
                  f"{inf['starved_steps']} steps with no action ready (the last goal sent again)")


if __name__ == "__main__":
    main()
