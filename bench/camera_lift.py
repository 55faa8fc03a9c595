"""The front camera's lift measurement (`vision.lift.measure_lift`) against the simulator's truth.

Runs scripted picks on the simulated rig (grid20's marks, aim noise 4 mm, lifts of 36-50 mm at
the grasp point, half of them released at 6.8-7.6 s: the near-threshold campaign's spread), with
the headlight's ambient and diffuse light jittered by +-25 % per episode unless `--no-jitter`.
The front camera renders at 15 fps at each resolution asked (the shipped 320x240 of
hardware/sim.yaml and 640x480 of hardware/so101.example.yaml), the frames go through the
recorder's H.264 encode (`run.recording.video_encoding`, the simulator's preset) and back, and the
camera is located in the first decoded frame from the template's fiducials, as the rater does.

Truth per frame: the cube bottom's height from the simulator's cube pose (the physics test's
definition); the hold: the physics test's longest hold. Printed per resolution: the frames the
camera measured while the jaws were closed on the cube, the bottom-height error p50/p95 (absolute),
the band's coverage (truth within bottom +- band), the band's p50, and the hold-time error
(|the camera's longest run at or above the success height - physics'|) p50/p95; and the seat
the rater's joints assume (the grasp point's rise less the true bottom, `rater.SEAT_LOW_M`-`SEAT_HIGH_M`);
and the CPU seconds `measure_lift` took per episode.

`--frames DIR` keeps each rendered episode (its H.264 video, joints and truth) and reads it back
on the next run with the same seed, so a change to the measurement is compared on the same frames
without rendering again; `--dump FILE` writes every held frame (episode, time, bottom, band,
truth) for a calibration. The last line is that calibration: the band floor (`lift.BAND_FLOOR_M`)
that would put the truth within the band on 95 % of the frames, and the coverage of a few floors.

    MUJOCO_GL=egl uv run python bench/camera_lift.py [--episodes 24] [--sizes 320x240,640x480] [--seed 1]
        [--frames DIR] [--dump FILE]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def encode(frames: list[np.ndarray], fps: int) -> bytes:
    """The frames through the recorder's H.264 encode (PyAV): the mp4's bytes."""
    import av

    from orchestrator.run.recording import video_encoding

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = "yuv420p"
        options: dict[str, object] = dict(video_encoding(fps, "veryfast"))
        stream.options = options
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def decode(video: bytes) -> list[np.ndarray]:
    """An mp4's frames, RGB (PyAV)."""
    import av

    with av.open(io.BytesIO(video), mode="r") as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return frames


def plan(index: int, rng: np.random.Generator, jitter: bool, marks: int) -> dict:
    """One pick's random draws, in the order the bench has always drawn them (so a seed gives the
    same episodes whether they are rendered now or read from `--frames`)."""
    light = (float(rng.uniform(0.75, 1.25)), float(rng.uniform(0.75, 1.25))) if jitter else (1.0, 1.0)
    mark = int(rng.integers(marks))
    release = float(rng.uniform(6.8, 7.6)) if index % 2 else None
    lift = float(rng.uniform(0.036, 0.050))
    return {"light": light, "mark": mark, "release": release, "lift": lift, "seed": int(rng.integers(1 << 30))}


def render(drawn: dict, size: tuple[int, int], camera: str = "front") -> dict:
    """One rendered pick (`plan`'s draws): the `camera`'s video as the recorder encodes it, the frame
    times, the joints, the truth per frame (the bottom; the cube's centre and rotation) and physics'
    hold."""
    from orchestrator.design.protocol import load_protocol
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.policies.scripted import ScriptedPickPolicy
    from orchestrator.rigs.profile import CameraSpec, load_rig
    from orchestrator.rigs.sim import SimRig

    loaded = load_protocol(ROOT / "protocols" / "sim_near.yaml")
    profile = load_rig(ROOT / "hardware" / "sim.yaml").profile
    width, height = size
    profile = profile.model_copy(update={"cameras": {camera: CameraSpec(type="sim", width=width, height=height,
                                                                          fps=15)}})
    rig = SimRig(profile, fps=30, success=loaded.protocol.success)
    rig.connect()
    # the bench reaches into the compiled model: the scene has no lighting knob per episode
    light = rig._model.vis.headlight
    light.ambient[:] = np.asarray(light.ambient) * drawn["light"][0]
    light.diffuse[:] = np.asarray(light.diffuse) * drawn["light"][1]
    layout = loaded.layout
    mark = layout.marks[drawn["mark"]]
    policy = ScriptedPickPolicy(aim_noise_mm=4.0, lift_m=drawn["lift"], release_s=drawn["release"])
    rig.prepare_layout(mark, layout.cube, drawn["seed"])
    policy.reset(EpisodeContext(mark=mark, cube=layout.cube, seed=drawn["seed"], fps=30, duration_s=12.0, task=""))
    t, state, action, frames, frame_t, truth, centres, rotations = [], [], [], [], [], [], [], []
    for step in range(360):
        observation = rig.observe(with_images=False)
        if step % 2 == 0:
            frames.append(rig.render(camera))
            frame_t.append(step / 30.0)
            _, _, z, _ = rig.cube_pose()
            rot = rig._data.xmat[rig._ids["cube_body"]]
            truth.append(z - layout.cube.size_m / 2.0 * (abs(rot[6]) + abs(rot[7]) + abs(rot[8])))
            centres.append(rig._data.xpos[rig._ids["cube_body"]].copy())
            rotations.append(np.asarray(rot, float).reshape(3, 3).copy())
        command = policy.select_action(observation)
        t.append(step / 30.0)
        state.append([observation[k] for k in command])
        action.append(list(command.values()))
        rig.act(command)
    facts = rig.end_episode()
    rig.disconnect()
    return {"video": np.frombuffer(encode(frames, 15), np.uint8), "frame_t": np.array(frame_t), "t": np.array(t),
            "state": np.array(state), "action": np.array(action), "truth": np.array(truth),
            "cube_pos": np.array(centres), "cube_mat": np.array(rotations),
            "hold": facts.extra["longest_hold_s"], "success": facts.physics_success, "max_lift": facts.max_lift_m,
            "cube": layout.cube.size_m}


def rendered(index: int, size: tuple[int, int], drawn: dict, cache: Path | None, tag: str) -> dict:
    """`render`, or its copy in the `--frames` folder (written there the first time)."""
    path = None if cache is None else cache / f"{size[0]}x{size[1]}-{tag}-{index:03d}.npz"
    if path is not None and path.is_file():
        with np.load(path) as stored:
            return {key: stored[key] for key in stored.files}
    result = render(drawn, size)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **result)
    return result


def episode(result: dict) -> dict:
    """The camera's track of a rendered pick (located in its first decoded frame, as the rater
    does), with the CPU seconds `measure_lift` took, the truth and the seat."""
    import time

    from orchestrator.sim.front_camera import FRONT_CAMERA_FOVY
    from orchestrator.vision.camera_model import Intrinsics
    from orchestrator.vision.lift import Joints, measure_lift
    from orchestrator.vision.table import locate_table

    decoded = decode(result["video"].tobytes())
    height, width = decoded[0].shape[:2]
    view = locate_table(decoded[0], Intrinsics.from_fovy(FRONT_CAMERA_FOVY, width, height))
    joints = Joints(result["t"], result["state"], result["action"])
    started = time.process_time()
    track = measure_lift(decoded, result["frame_t"], view, float(result["cube"]), joints)
    cpu = time.process_time() - started
    return {"track": track, "truth": result["truth"], "hold": float(result["hold"]),
            "success": bool(result["success"]), "max_lift": float(result["max_lift"]), "cpu": cpu,
            "seat": seats(joints, list(result["frame_t"]), list(result["truth"]))}


def seats(joints, frame_t: list[float], truth: list[float]) -> list[float]:
    """How far the cube sank in the jaws (the rater's seat): the grasp point's rise since the
    squeeze began less the cube bottom's true height, at the frames held with the bottom at
    least 3 cm up (near the success height)."""
    from orchestrator.judging.auto.rater import joint_bottoms
    from orchestrator.sim import fk
    from orchestrator.sim.holding import closed_on_cube

    closed = closed_on_cube(joints.state[:, 5], 0.03, joints.action[:, 5])
    rise = joint_bottoms(closed, fk.grasp_point(joints.state)[:, 2], 0.0)
    index = np.searchsorted(joints.t, np.asarray(frame_t) - 1e-9)
    return [float(rise[i] - b) for i, b in zip(index, truth, strict=True) if closed[i] and b >= 0.03]


def camera_hold(track, height: float) -> float:
    """The camera's own hold: the longest run of measured frames at or above `height` (within
    1e-9 m, as the rater compares: the measured heights are steps of 0.5 mm, and one on the height
    must not fall either side of it by the last bit of its sum)."""
    above = np.where(np.isnan(track.bottom_m), False, track.bottom_m >= height - 1e-9)   # the rater's tolerance
    best, start = 0.0, None
    for k, inside in enumerate(above):
        start = (track.times_s[k] if start is None else start) if inside else None
        if start is not None:
            best = max(best, float(track.times_s[k] - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--sizes", default="320x240,640x480")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-jitter", action="store_true")
    parser.add_argument("--frames", type=Path, help="keep the rendered episodes here and read them back next time")
    parser.add_argument("--dump", type=Path, help="write every held frame (episode, time, bottom, band, truth) here (.npz)")
    args = parser.parse_args()
    from orchestrator.design.protocol import load_protocol
    from orchestrator.vision.lift import BAND_FLOOR_M

    marks = len(load_protocol(ROOT / "protocols" / "sim_near.yaml").layout.marks)
    tag = f"seed{args.seed}" + ("-nojitter" if args.no_jitter else "")
    for text in args.sizes.split(","):
        width, height = (int(v) for v in text.split("x"))
        size = (width, height)
        rng = np.random.default_rng(args.seed)
        errors, bands, covered, holds, held, measured, seat, cpu, short = [], [], [], [], 0, 0, [], [], []
        rows: dict[str, list] = {"episode": [], "t": [], "bottom": [], "band": [], "truth": []}
        for index in range(args.episodes):
            drawn = plan(index, rng, not args.no_jitter, marks)
            result = episode(rendered(index, size, drawn, args.frames, tag))
            track, truth = result["track"], result["truth"]
            cpu.append(result["cpu"])
            closed = np.array([not r.startswith("not in the jaws") for r in track.reasons])
            held += int(closed.sum())
            ok = track.visible
            measured += int(ok.sum())
            error = np.abs(track.bottom_m[ok] - truth[ok])
            errors.extend(error)
            bands.extend(track.band_m[ok])
            covered.extend(error <= track.band_m[ok])
            short.extend(error - (track.band_m[ok] - BAND_FLOOR_M))   # what the fit's own interval leaves out
            holds.append(abs(camera_hold(track, 0.04) - result["hold"]))
            seat.extend(result["seat"])
            for key, values in (("episode", np.full(int(closed.sum()), index)), ("t", track.times_s[closed]),
                                ("bottom", track.bottom_m[closed]), ("band", track.band_m[closed]),
                                ("truth", truth[closed])):
                rows[key].extend(values)
            print(f"{text} episode {index}: physics {'success' if result['success'] else 'failure'}, lift "
                  f"{result['max_lift'] * 1000:.1f} mm, hold {result['hold']:.2f} s; camera {int(ok.sum())} of "
                  f"{int(closed.sum())} held frames, error p95 {np.percentile(error, 95) * 1000 if len(error) else np.nan:.2f} mm, "
                  f"hold {camera_hold(track, 0.04):.2f} s; {result['cpu']:.2f} s of CPU", flush=True)
        errors_mm = 1000 * np.array(errors)
        print(f"{text}: {args.episodes} episodes, measured {measured} of {held} frames with the jaws closed "
              f"({100 * measured / max(held, 1):.0f} %); bottom error p50 {np.percentile(errors_mm, 50):.2f} mm, "
              f"p95 {np.percentile(errors_mm, 95):.2f} mm, max {errors_mm.max():.2f} mm; band p50 "
              f"{1000 * np.median(bands):.2f} mm, covers {100 * np.mean(covered):.1f} % of frames; hold error p50 "
              f"{np.percentile(holds, 50):.3f} s, p95 {np.percentile(holds, 95):.3f} s; the seat (grasp point's rise - "
              f"true bottom, held >= 3 cm up) min {1000 * min(seat):.1f}, p5 {1000 * np.percentile(seat, 5):.1f}, "
              f"p50 {1000 * np.percentile(seat, 50):.1f}, p95 {1000 * np.percentile(seat, 95):.1f}, max "
              f"{1000 * max(seat):.1f} mm; measure_lift's CPU per episode p50 {np.median(cpu):.2f} s, "
              f"mean {np.mean(cpu):.2f} s", flush=True)
        need = max(0.0, float(np.percentile(short, 95)))
        print(f"{text}: the band floor covering 95 % of these frames (the p95 of the error less the fit's own "
              f"half-interval): {1000 * need:.2f} mm (lift.BAND_FLOOR_M is {1000 * BAND_FLOOR_M:g} mm); "
              + ", ".join(f"floor {f:g} mm covers {100 * np.mean(np.array(short) <= f / 1000 + 1e-12):.1f} %"
                          for f in (1.5, 2.0, 2.5, 3.0, 3.5)), flush=True)
        if args.dump:
            arrays: dict[str, Any] = {k: np.asarray(v) for k, v in rows.items()}
            np.savez(args.dump.with_name(f"{args.dump.stem}-{text}.npz"), **arrays)


if __name__ == "__main__":
    main()
