"""The twin's cameras as USB cameras through LeRobot's OpenCVCamera semantics:
`read_latest` peeks without consuming, frames arrive `latency_ms` after exposure, the
read thread dies after repeated failures, and the `camera_slow` fault lowers a camera's rate."""

from __future__ import annotations

import time

import pytest

from support.repo import REPO

SHIPPED_TWIN_RIG = REPO / "hardware" / "so101_twin.yaml"


@pytest.fixture
def cameras(tmp_path):
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin
    from orchestrator.rigs.twin.twincamera import TwinCamera, TwinCameraConfig

    rig = tmp_path / "rig.yaml"
    rig.write_text(SHIPPED_TWIN_RIG.read_text().replace("twin: {seed: 0, faults: []}",
                                                          "twin: {seed: 0, faults: [], camera_latency_ms: 120}"))
    with start_twin(load_rig(rig)) as twin:
        specs = twin.rig.profile.cameras
        cams = {}
        for name, spec in specs.items():
            extra = spec.model_dump()
            cams[name] = TwinCamera(TwinCameraConfig(index_or_path=extra["index_or_path"], fps=spec.fps,
                                                     width=spec.width, height=spec.height,
                                                     latency_ms=extra["latency_ms"]))
            cams[name].connect()
        try:
            yield twin, cams
        finally:
            for cam in cams.values():
                if cam.is_connected:
                    cam.disconnect()


def test_read_latest_peeks_and_frames_arrive_latency_ms_after_exposure(cameras):
    twin, cams = cameras
    front = cams["front"]
    first = front.async_read(timeout_ms=1000)          # takes the new frame: the event is cleared
    deadline = time.monotonic() + 5.0                   # a new frame arrives (33 ms at 30 fps)
    while not front.new_frame_event.is_set():
        assert time.monotonic() < deadline, "no new frame in 5 s"
        time.sleep(0.005)
    peeked = front.read_latest()
    peeked_at = front.latest_timestamp
    unconsumed = front.new_frame_event.is_set()
    again = front.read_latest()
    assert again is peeked                              # the same frame until a new one arrives
    # Not consumed by read_latest: the new-frame event a consuming read clears is still set. (This
    # used to be a 5 ms async_read as the detector, which a frame arriving within those 5 ms
    # passed whatever read_latest did: 5 of every 33 ms at 30 fps.) The positive control:
    # async_read does consume it (the event is clear just after it) and returns that frame, or a
    # newer one that came meanwhile.
    got = front.async_read(timeout_ms=1000)
    consumed = not front.new_frame_event.is_set()
    assert unconsumed and consumed
    assert got is peeked or front.latest_timestamp > peeked_at
    assert first is not peeked
    lags = []
    for _ in range(5):
        front.async_read(timeout_ms=1000)
        lags.append(front.latest_timestamp - front.latest_exposure)   # one clock: CLOCK_MONOTONIC
    # The floor is the delay line's (a frame is held until exposure + latency). The bound above it,
    # 60 ms, from the measured distribution of lag - 120 ms (the read thread's wake-up late under
    # load), `MUJOCO_GL=egl nice -n 10 uv run --all-extras python bench/twin_camera_lag.py`, 600
    # frames on the 2-core machine: at load 17, p50 0.2 ms, p99 20 ms, max 27 ms; at load 31 (at
    # 97c3df9), p50 0.1 ms, p99 10.3 ms, max 27.1 ms (docs/benchmarks.md, the twin). 60 ms is
    # twice the worst seen.
    assert min(lags) >= 0.120 and max(lags) < 0.120 + 0.060, lags


def test_the_read_thread_dies_after_repeated_failures(cameras):
    """A camera gone (camera_disconnect): every read fails at once; after more than ten in a
    row the thread ends, as OpenCVCamera's does, and reads raise `read thread is not running`."""
    twin, cams = cameras
    twin.request("inject", fault={"kind": "camera_disconnect", "camera": "front"})
    deadline = time.monotonic() + 5
    while cams["front"].thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match="read thread is not running"):
        cams["front"].read_latest()
    cams["wrist"].read_latest()                          # the other camera goes on


def test_camera_slow_delivers_below_its_rate(cameras):
    twin, cams = cameras

    def rate(cam, seconds=1.5) -> float:
        n, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                cam.async_read(timeout_ms=300)
                n += 1
            except TimeoutError:
                pass
        return n / seconds

    assert rate(cams["front"]) > 20
    twin.request("inject", fault={"kind": "camera_slow", "camera": "front", "fps": 5})
    front, previous = cams["front"], cams["front"].latest_exposure
    deadline = time.monotonic() + 5.0   # the frames rendered before the fault (the delay line's) go by
    while True:
        front.async_read(timeout_ms=1000)
        if front.latest_exposure - previous > 1 / 10:   # a gap of the slowed rate's (0.2 s), not 30 fps's
            break
        previous = front.latest_exposure
        assert time.monotonic() < deadline, "camera_slow did not slow the front camera"
    slow, other = rate(cams["front"]), rate(cams["wrist"])
    assert 3 <= slow <= 7, slow
    assert other > 20, other


def _hog(seconds: float) -> list:
    """One busy process per core and one more, at the lowest priority (nice 19). The renderer
    holds a real-time priority, which preempts any ordinary process whatever its nice value, so
    for the renderer these are every core busy; the other pytest worker's tests (nice 0) keep
    most of their CPU (at ordinary priority this hog took it from them for 6 s: the browser
    tests' playback timing beside it)."""
    import os
    import subprocess
    import sys

    loop = f"import os, time\nos.nice(19)\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range((os.cpu_count() or 2) + 1)]


def _cpu_s(pid: int) -> float:
    """CPU seconds used so far by process `pid` (/proc/PID/stat utime + stime)."""
    import os

    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_camera_process_keeps_its_frame_rate_on_a_busy_machine():
    """Real cameras are their own hardware: the twin's render process takes a real-time priority
    below the servos' (so a servo reply preempts a render) and holds its configured rate while
    every core is busy (an ordinary renderer fell to 12.9 of 15 fps on a busy 2-core runner)."""
    import os

    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin
    from orchestrator.rigs.twin.render import RENDER_PRIORITY
    from orchestrator.rigs.twin.server import REALTIME_PRIORITY
    from orchestrator.rigs.twin.twincamera import TwinCamera, TwinCameraConfig

    assert RENDER_PRIORITY < REALTIME_PRIORITY
    with start_twin(load_rig(SHIPPED_TWIN_RIG)) as twin:
        assert (twin.priority, twin.render_priority) == ("realtime", "realtime"), (
            "the twin could not take real-time priorities: run the tests as root, or give python "
            "CAP_SYS_NICE (setcap cap_sys_nice+ep $(readlink -f .venv/bin/python))")
        assert os.sched_getscheduler(twin.render_pid) == os.SCHED_RR
        assert os.sched_getparam(twin.render_pid).sched_priority == RENDER_PRIORITY
        assert os.sched_getparam(twin.proc.pid).sched_priority == REALTIME_PRIORITY
        specs = twin.rig.profile.cameras
        cams = {name: TwinCamera(TwinCameraConfig(index_or_path=spec.model_dump()["index_or_path"],
                                                  fps=spec.fps, width=spec.width, height=spec.height))
                for name, spec in specs.items()}
        assert len(cams) == 2
        for cam in cams.values():
            cam.connect()
        hogs = _hog(30.0)
        try:
            deadline = time.monotonic() + 10.0   # every hog busy: each has had 0.1 s of CPU
            while min(_cpu_s(hog.pid) for hog in hogs) < 0.1:
                assert time.monotonic() < deadline, "the hogs did not start"
                time.sleep(0.05)
            before = {name: cam.frames_delivered for name, cam in cams.items()}
            start = time.monotonic()
            # the rate over 3 s worth of frames at the configured rate (90 at 30 fps), however
            # long they take to come (a starved renderer: longer, and a lower rate)
            while min(cam.frames_delivered - before[name] - 3 * specs[name].fps for name, cam in cams.items()) < 0:
                assert time.monotonic() < start + 20.0, "the cameras delivered under a third of their rate"
                time.sleep(0.05)
            rates = {name: (cam.frames_delivered - before[name]) / (time.monotonic() - start)
                     for name, cam in cams.items()}
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
            for cam in cams.values():
                cam.disconnect()
    for name, rate in rates.items():
        assert rate >= 0.95 * specs[name].fps, (name, rate, specs[name].fps)


def test_the_preflight_refuses_a_slow_camera_but_not_a_dip():
    """The frame-rate check on the twin's cameras through LeRobot: the wrist camera slowed to a
    third of its rate fails, named, with what to do, while the front one passes; the front camera
    (measured first) slow for its first 0.6 s only passes (the check measures again, for
    `CONFIRM_SECONDS`, before it fails), and so does the wrist one at its rate again (the
    positive control of the first: a check of both as they are, before, added 2 s and nothing
    these two do not show)."""
    import threading

    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.so101 import hardware_checks
    from orchestrator.rigs.twin.client import start_twin

    with start_twin(load_rig(SHIPPED_TWIN_RIG)) as twin:
        rig = make_rig(twin.rig)
        fps = {name: spec.fps for name, spec in twin.rig.profile.cameras.items()}

        def slow(camera, rate):
            twin.request("inject", fault={"kind": "camera_slow", "camera": camera, "fps": rate})

        slow("wrist", fps["wrist"] / 3)
        slowed = hardware_checks.check_cameras(rig)
        slow("wrist", fps["wrist"])
        slow("front", fps["front"] / 3)
        threading.Timer(0.6, slow, args=("front", fps["front"])).start()
        dipped = hardware_checks.check_cameras(rig)
    assert list(fps) == ["front", "wrist"]
    assert [(c.name, c.ok) for c in slowed] == [("camera front", True), ("camera wrist", False)], slowed
    assert f"fps, configured {fps['wrist']} fps" in slowed[1].detail
    assert "lower the resolution" in slowed[1].detail
    assert [(c.name, c.ok) for c in dipped] == [("camera front", True), ("camera wrist", True)], dipped
