"""Simulation cost figures: render time per frame, physics time per episode, encode time.

    uv run python bench/sim_render.py [--mesh-cells 4,2,none] [--width 320 --height 240]
    uv run python bench/sim_render.py --demo            # the demo's physics outcomes (no video)
    uv run python bench/sim_render.py --sweep 3,8,12 --reps 2   # success vs aim noise on grid20

Each render setting runs in its own process (one OpenGL context each) with one llvmpipe
thread (`LP_NUM_THREADS=1`, as in the campaign's worker processes). For each it prints the
per-frame render time of each camera, the physics time of one 12 s episode at 30 fps
(scripted pick, no rendering, CPU seconds), the H.264 encode time per frame (PyAV libx264,
veryfast, crf 23, 1 thread: the recorder's settings), and the estimated CPU seconds per
episode when both cameras are rendered and encoded at 30, 15 and 10 fps, against the
campaign target (40 episodes x 12 s at >= 5x real time on 2 workers -> <= 4.8 s per episode).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_CPU_S = 12.0 * 40 / 5 / 40 * 2   # 40 episodes x 12 s / 5x speed-up x 2 workers / 40


def measure(cell: float | None, width: int, height: int, frames: int) -> dict:
    """Worker side: all figures for one mesh setting (runs in a fresh process)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    sys.path.insert(0, str(REPO))
    import numpy as np

    from orchestrator.design.protocol import load_protocol
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.policies.scripted import ScriptedPickPolicy
    from orchestrator.rigs.profile import CameraSpec, load_rig
    from orchestrator.rigs.sim import SimRig
    from orchestrator.sim.scene import RenderSettings

    loaded = load_protocol(REPO / "protocols" / "sim_demo.yaml")
    profile = load_rig(REPO / "hardware" / "sim.yaml").profile
    cams = {name: CameraSpec(type="sim", width=width, height=height, fps=30) for name in profile.cameras}
    profile = profile.model_copy(update={
        "cameras": cams,
        "rest_pose": {"shoulder_pan.pos": 0, "shoulder_lift.pos": -100, "elbow_flex.pos": 90,
                      "wrist_flex.pos": 0, "wrist_roll.pos": 0, "gripper.pos": 0}})
    t0 = time.perf_counter()
    rig = SimRig(profile, fps=30, success=loaded.protocol.success, render=RenderSettings(mesh_cell_mm=cell))
    rig.connect()
    build_s = time.perf_counter() - t0
    mark, cube = loaded.layout.mark("M10"), loaded.layout.cube
    ctx = EpisodeContext(mark=mark, cube=cube, seed=1, fps=30, duration_s=12.0, task="")
    policy = ScriptedPickPolicy(0.0)

    # Physics only: one full episode.
    rig.prepare_layout(mark, cube, 1)
    c0 = time.process_time()
    policy.reset(ctx)
    c1 = time.process_time()
    for _ in range(360):
        rig.act(policy.select_action(rig.observe(with_images=False)))
    c2 = time.process_time()
    facts = rig.end_episode()

    # Rendering: `frames` frames per camera along the same episode (arm moving, cube lifted).
    rig.prepare_layout(mark, cube, 1)
    policy.reset(ctx)
    per_cam: dict[str, list[float]] = {name: [] for name in rig.camera_names}
    shots: dict[str, list[np.ndarray]] = {}
    every = max(1, 360 // frames)
    for step in range(360):
        obs = rig.observe(with_images=False)
        if step % every == 0:
            for name in rig.camera_names:
                r0 = time.process_time()
                img = rig.render(name)
                per_cam[name].append(time.process_time() - r0)
                shots.setdefault(name, []).append(img)
        rig.act(policy.select_action(obs))
    render_ms = {name: 1000 * float(np.median(v[1:])) for name, v in per_cam.items()}

    # Encoding (the recorder's settings), CPU per frame.
    import av

    enc = []
    for name, images in shots.items():
        path = Path(f"/tmp/sim_render_bench_{os.getpid()}_{name}.mp4")
        with av.open(str(path), "w") as container:
            stream = container.add_stream("libx264", rate=30)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"preset": "veryfast", "crf": "23", "threads": "1"}
            e0 = time.process_time()
            for img in images:
                for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
            enc.append((time.process_time() - e0) / len(images))
        path.unlink(missing_ok=True)
    rig.disconnect()
    return {"mesh_cell_mm": cell, "width": width, "height": height, "build_s": build_s,
            "render_ms": render_ms, "physics_cpu_s": c2 - c1, "plan_cpu_s": c1 - c0,
            "encode_ms": 1000 * float(np.mean(enc)), "success": facts.physics_success,
            "faces": int(rig._model.nmeshface) if rig._model is not None else None}


def _episode(rig, policy, mark, cube, seed, fps, duration_s, task=""):
    from orchestrator.policies.base import EpisodeContext

    ctx = EpisodeContext(mark=mark, cube=cube, seed=seed, fps=fps, duration_s=duration_s, task=task)
    rig.prepare_layout(mark, cube, seed)
    policy.reset(ctx)
    for _ in range(round(fps * duration_s)):
        rig.act(policy.select_action(rig.observe(with_images=False)))
    return rig.end_episode()


def demo_outcomes(protocol_path: Path, rig_path: Path) -> None:
    """The physics outcome of every trial of a protocol exactly as `orchestrator run` draws
    them (trial seeds from the schedule module), without rendering; paired table + McNemar."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    sys.path.insert(0, str(REPO))
    from math import comb

    from orchestrator.design.protocol import load_protocol
    from orchestrator.design.schedule import trial_seed
    from orchestrator.policies.factory import make_policy
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig

    loaded = load_protocol(protocol_path)
    proto, layout = loaded.protocol, loaded.layout
    rig = make_rig(load_rig(rig_path), loaded)
    rig.connect()
    outcomes: dict[str, dict[tuple[str, int], bool]] = {}
    t0 = time.process_time()
    for label, spec in proto.policies.items():
        policy = make_policy(label, spec, loaded, rig)
        outcomes[label] = {}
        for repeat in range(proto.trials_per_layout):
            for mark in layout.marks:
                seed = trial_seed(proto.seed, mark.id, repeat, label)
                facts = _episode(rig, policy, mark, layout.cube, seed, proto.episode.fps,
                                 proto.episode.duration_s, proto.task)
                outcomes[label][(mark.id, repeat)] = bool(facts.physics_success)
        ok = sum(outcomes[label].values())
        print(f"{label} ({spec.type}, {getattr(spec, 'aim_noise_mm', '')} mm): {ok}/{len(outcomes[label])} picked; "
              f"failed at {', '.join(m for (m, r), v in outcomes[label].items() if not v) or 'none'}")
    labels = list(outcomes)
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            keys = outcomes[a].keys()
            only_a = sum(outcomes[a][k] and not outcomes[b][k] for k in keys)
            only_b = sum(outcomes[b][k] and not outcomes[a][k] for k in keys)
            n, low = only_a + only_b, min(only_a, only_b)
            exact = min(1.0, 2 * sum(comb(n, j) for j in range(low + 1)) / 2 ** n) if n else 1.0
            mid = exact - comb(n, low) / 2 ** n if n else 1.0
            print(f"{a} vs {b}: {a} only {only_a}, {b} only {only_b}; McNemar exact p {exact:.4f}, mid-p {mid:.4f}")
    print(f"({time.process_time() - t0:.0f} s CPU)")


def noise_sweep(levels: list[float], reps: int) -> None:
    """Scripted-pick success vs aim noise on the demo's layout (physics only)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    sys.path.insert(0, str(REPO))
    from orchestrator.design.protocol import load_protocol
    from orchestrator.design.schedule import trial_seed
    from orchestrator.policies.scripted import ScriptedPickPolicy
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig

    loaded = load_protocol(REPO / "protocols" / "sim_demo.yaml")
    proto, layout = loaded.protocol, loaded.layout
    rig = make_rig(load_rig(REPO / "hardware" / "sim.yaml"), loaded)
    rig.connect()
    for mm in levels:
        policy = ScriptedPickPolicy(mm)
        ok = n = 0
        for repeat in range(reps):
            for mark in layout.marks:
                seed = trial_seed(proto.seed, mark.id, repeat, f"sweep{mm:g}")
                ok += bool(_episode(rig, policy, mark, layout.cube, seed, proto.episode.fps,
                                    proto.episode.duration_s).physics_success)
                n += 1
        print(f"aim noise {mm:4.1f} mm per axis: {ok}/{n} picked ({ok / n:.0%})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh-cells", default="4,2,none", help="comma list of cells in mm, or none")
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--frames", type=int, default=60, help="frames rendered per camera")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--demo", action="store_true", help="physics outcomes of protocols/sim_demo.yaml")
    ap.add_argument("--protocol", default=str(REPO / "protocols" / "sim_demo.yaml"))
    ap.add_argument("--rig", default=str(REPO / "hardware" / "sim.yaml"))
    ap.add_argument("--sweep", help="comma list of aim noise levels (mm) to measure on grid20")
    ap.add_argument("--reps", type=int, default=1, help="repeats of the 20 marks per noise level")
    args = ap.parse_args()
    if args.demo:
        demo_outcomes(Path(args.protocol), Path(args.rig))
        return
    if args.sweep:
        noise_sweep([float(v) for v in args.sweep.split(",")], args.reps)
        return
    if args.worker is not None:
        cell = None if args.worker == "none" else float(args.worker)
        print(json.dumps(measure(cell, args.width, args.height, args.frames)))
        return
    env = {**os.environ, "LP_NUM_THREADS": os.environ.get("LP_NUM_THREADS", "1"),
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    print(f"MUJOCO_GL={env['MUJOCO_GL']} LP_NUM_THREADS={env['LP_NUM_THREADS']} "
          f"{args.width}x{args.height}, 2 cameras; target <= {TARGET_CPU_S:.1f} s CPU per 12 s episode")
    for cell in args.mesh_cells.split(","):
        proc = subprocess.run([sys.executable, __file__, "--worker", cell, "--width", str(args.width),
                               "--height", str(args.height), "--frames", str(args.frames)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"mesh cell {cell}: failed\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        render = sum(r["render_ms"].values())
        print(f"\nvisual meshes: {'full' if r['mesh_cell_mm'] is None else str(r['mesh_cell_mm']) + ' mm clusters'}"
              f" ({r['faces']} triangles), scene build {r['build_s']:.2f} s")
        print("  render ms/frame: " + ", ".join(f"{k} {v:.1f}" for k, v in r["render_ms"].items())
              + f"  (both cameras {render:.1f})")
        print(f"  encode ms/frame: {r['encode_ms']:.2f}")
        print(f"  physics: {r['physics_cpu_s']:.2f} s CPU per 12 s episode (360 control steps), "
              f"plan {r['plan_cpu_s']:.2f} s; picked: {r['success']}")
        for fps in (30, 15, 10):
            frames = 12 * fps
            cpu = r["physics_cpu_s"] + r["plan_cpu_s"] + frames * (render + 2 * r["encode_ms"]) / 1000
            print(f"  video at {fps:2d} fps: ~{cpu:5.2f} s CPU per episode -> "
                  f"{12.0 * 2 / cpu:4.1f}x real time on 2 workers "
                  f"({'meets' if cpu <= TARGET_CPU_S else 'misses'} the 5x target)")


if __name__ == "__main__":
    main()
