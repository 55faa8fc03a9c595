"""One media rule for both faces of judging (`judging.clean_media`): what a bundle's judge and a
browser's judge receive of a recorded video or start still is its pictures, nothing a recorder
wrote beside them. Canaries are planted where a careless recorder would put them: the video's
container metadata, a JPEG comment and an EXIF block of the start still. Both paths (a bundle on
disk, the web judge's prepared media) are audited, and each canary is shown to be in the
campaign's own files first (the positive control), so a scan that found nothing proves
something."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.bundle import write_bundle
from orchestrator.judging.clean_media import clean_copy, clean_still, clean_video
from orchestrator.judging.web.media import prepare
from support.judge_campaign import make_campaign
from support.judge_web import dress_campaign
from support.video import tag_with_policy

VIDEO_CANARY = b"SECRETPOLICYALPHA"      # tag_with_policy's title (a policy name)
COMMENT_CANARY = b"CANARYJPEGCOMMENT7f3a"  # not a policy name: the bundle's term scan cannot catch it
EXIF_CANARY = "CANARYEXIFDESCRIPTION91b2"
CANARIES = (VIDEO_CANARY, COMMENT_CANARY, EXIF_CANARY.encode())


def plant_in_still(still: Path) -> None:
    """An EXIF block (ImageDescription, and the time it was taken) and a JPEG comment."""
    from PIL import Image

    image = Image.open(still)
    exif = Image.Exif()
    exif[0x010E] = EXIF_CANARY
    exif[0x0132] = "2026:12:02 18:00:00"
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=exif.tobytes(), quality=95)
    data = buffer.getvalue()
    still.write_bytes(data[:2] + b"\xff\xfe" + (len(COMMENT_CANARY) + 2).to_bytes(2, "big")
                      + COMMENT_CANARY + data[2:])


@pytest.fixture
def planted(tmp_path) -> Path:
    directory = make_campaign(tmp_path / "c", marks=2)
    dress_campaign(directory)
    for video in directory.glob("videos/*/*.mp4"):
        tag_with_policy(video)
    for still in directory.glob("videos/*/*.start.jpg"):
        plant_in_still(still)
    return directory


def found(data: bytes) -> set[bytes]:
    return {c for c in CANARIES if c.lower() in data.lower()}


def test_a_still_keeps_its_pixels_and_loses_its_comment_and_exif(planted):
    import cv2
    import numpy as np

    still = next(planted.glob("videos/*/front.start.jpg"))
    assert found(still.read_bytes()) == {COMMENT_CANARY, EXIF_CANARY.encode()}   # positive control
    clean = clean_still(still)
    assert found(clean) == set() and b"Exif" not in clean and b"\xff\xfe" not in clean[:64]
    before = cv2.imdecode(np.fromfile(str(still), np.uint8), cv2.IMREAD_COLOR)
    after = cv2.imdecode(np.frombuffer(clean, np.uint8), cv2.IMREAD_COLOR)
    assert before.shape == after.shape and float(np.abs(before.astype(int) - after).mean()) < 3.0


def test_a_video_keeps_its_frames_and_loses_its_metadata(planted):
    import av

    video = next(planted.glob("videos/*/front.mp4"))
    assert found(video.read_bytes()) == {VIDEO_CANARY}                           # positive control
    clean = clean_video(video)
    assert found(clean.data) == set()
    with av.open(str(video)) as inp:
        packets = [p.pts for p in inp.demux(inp.streams.video[0]) if p.dts is not None]
    with av.open(io.BytesIO(clean.data)) as out:
        assert [p.pts for p in out.demux(out.streams.video[0]) if p.dts is not None] == packets
    assert len(clean.times) == len(packets) > 5 and clean.times == sorted(clean.times)


def test_bundle_and_browser_judge_get_the_same_clean_bytes(planted, tmp_path):
    """Every file a bundle holds and every medium the web judge serves is free of all three
    canaries, and the two paths hand on byte-identical files: one rule, not two."""
    source = CampaignSource(planted, "alice")
    try:
        episodes = source.episodes()
    finally:
        source.close()
    assert len(episodes) == 4
    originals = b"".join(p.read_bytes() for e in episodes for p in [*e.videos.values(), *e.stills.values()])
    assert found(originals) == set(CANARIES)                                     # positive control
    bundle = write_bundle(planted, tmp_path / "bundle").path
    files = [p for p in bundle.rglob("*") if p.is_file()]
    assert len([p for p in files if p.suffix in (".mp4", ".jpg")]) == 4 * 2 + 4   # 2 cameras, 1 still each
    assert [p for p in files if found(p.read_bytes())] == []
    compared = 0
    for episode in episodes:
        media = prepare(episode)
        assert media.errors == {}
        for camera, video in media.videos.items():
            assert found(video.data) == set()
            assert (bundle / "videos" / episode.id / f"{camera}.mp4").read_bytes() == video.data
            compared += 1
        for camera, still in media.stills.items():
            assert found(still) == set()
            assert (bundle / "videos" / episode.id / f"{camera}.start.jpg").read_bytes() == still
            compared += 1
    assert compared == 12


def test_clean_copy_writes_what_the_web_judge_would_serve(planted, tmp_path):
    still = next(planted.glob("videos/*/front.start.jpg"))
    video = still.with_name("front.mp4")
    assert clean_copy(still, tmp_path / "s.jpg") == len(clean_still(still))
    assert (tmp_path / "s.jpg").read_bytes() == clean_still(still)
    assert clean_copy(video, tmp_path / "v.mp4") == len(clean_video(video).data)
    assert found((tmp_path / "v.mp4").read_bytes()) == set()
