"""Test videos: a moving gradient written with OpenCV, to stand in for a camera (the `video`
camera type of a rig profile plays it back), and a recorded video tagged with the policy (a
planted leak the blinding tests must catch)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np


def write_test_video(path: str | Path, width: int = 64, height: int = 48, frames: int = 30,
                     fps: int = 30) -> Path:
    """Write a small moving-gradient MP4 (mp4v) of `frames` frames at `fps`; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    if not writer.isOpened():
        raise RuntimeError(f"cannot write {path}")
    xs = np.linspace(0, 255, width, dtype=np.float32)
    for i in range(frames):
        img = np.empty((height, width, 3), np.uint8)
        img[..., 0] = (xs[None, :] + 8 * i) % 256
        img[..., 1] = np.linspace(0, 255, height, dtype=np.float32)[:, None]
        img[..., 2] = (i * 255) // max(frames - 1, 1)
        writer.write(img)
    writer.release()
    return path


def tag_with_policy(video: Path) -> None:
    """A recorder that wrote the policy into the video's container metadata (a planted leak):
    `SECRETPOLICYALPHA` in the title, a checkpoint path in the comment, the packets unchanged."""
    import av

    tagged = video.with_suffix(".tagged.mp4")
    with av.open(str(video)) as inp, av.open(str(tagged), "w") as out:
        out.metadata["title"] = "SECRETPOLICYALPHA"
        out.metadata["comment"] = "secretlab/act_SECRETPATHALPHA"
        stream = out.add_stream_from_template(inp.streams.video[0])
        for packet in inp.demux(inp.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    tagged.replace(video)
    assert b"SECRETPOLICYALPHA" in video.read_bytes()
