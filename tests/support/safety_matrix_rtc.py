"""The safety matrix under real-time chunking: both policies of the campaign are the tiny SmolVLA
(`support/vla.py`) run through LeRobot's `RTCInferenceEngine` (`inference: {type: rtc}`,
`orchestrator/policies/rtc.py`): its chunks are computed in LeRobot's background thread
("RTCInference") while the control loop takes actions from LeRobot's `ActionQueue`.

On top of the matrix's invariants (`support/safety_matrix.py`), two that only asynchronous
inference can break:
- stale: no action computed before a stop reaches the arm after it. Every chunk merged into
  LeRobot's queue is tagged with the time its computation started (the preprocessor call, as
  LeRobot's `LatencyTracker` times it) and every row of it (the post-processed actions, exactly the
  floats `send_next_action` hands on); every action given to the rig's `act` (the last step before
  the bus write) is looked up there. After a stop (the stop event's firing, else the start of
  `ArmMotion.stop`), an action from a chunk that started before the stop ended is a violation.
  Actions that match no chunk are the policy's hold (the observed joints, before the first chunk).
- joined: no "RTCInference" thread alive when the arm is stopped or moved (`ArmMotion.stop`,
  `ArmMotion.to_rest`), nor when the campaign has returned or raised (every way out).

The events fire where an asynchronous policy meets them: `nan_action` makes the next chunk merged
into the queue non-finite on one joint (a policy that produced NaN, seen by the control loop a
step or two later); `policy_exception` is raised by the policy's next `select_action` on the
control thread, as under sync (an exception inside LeRobot's thread is retried by LeRobot 10 times
0.5 s apart, longer than a matrix episode).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from support.act import TWIN_CAMERA as CAMERA  # (height, width): the `saved_vla` fixture's cameras

THREAD_NAME = "RTCInference"   # LeRobot's RTCInferenceEngine.start
RTC = {"type": "rtc", "rtc": {"execution_horizon": 5}, "queue_threshold": 4}


def rtc_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive()]


def policies(checkpoint: Path) -> dict:
    """A and B: the same tiny SmolVLA under RTC, with different execution horizons."""
    def spec(horizon: int) -> dict:
        return {"type": "lerobot", "path": str(Path(checkpoint).resolve()),
                "inference": {**RTC, "rtc": {"execution_horizon": horizon}}}
    return {"A": spec(5), "B": spec(8)}


def camera_line() -> str:
    return f"width: {CAMERA[1]}, height: {CAMERA[0]}, fps: 30"


def checkpoint(folder: Path) -> Path:
    """The tiny SmolVLA for the matrix's cameras, saved into `folder/vla` by this process (0.1 s
    once LeRobot and transformers are imported, which the RTC runs import anyway; the fresh-process
    tests use the `saved_vla` fixture, saved by a separate interpreter)."""
    from support.vla import make_smolvla_checkpoint

    return make_smolvla_checkpoint(Path(folder) / "vla", {"front": CAMERA, "wrist": CAMERA})


@dataclass
class RtcRecord:
    """What the RTC hooks saw: the chunks' rows, the actions acted, the threads alive at moves."""

    rows: dict[tuple, float] = field(default_factory=dict)    # row -> its chunk's start time
    acts: list[tuple[float, float | None]] = field(default_factory=list)   # (t, chunk start or None)
    alive_at_moves: list[str] = field(default_factory=list)
    nan_next_chunk: bool = False
    before: set[int] = field(default_factory=set)              # RTC threads alive before the run


def _row_key(values) -> tuple:
    return tuple(np.float32(v).item() for v in values)


def install(monkeypatch, tap) -> RtcRecord:
    """The RTC hooks (after `safety_matrix._install`): chunk tags, acts, threads at moves."""
    from orchestrator.policies.rtc import EnginePolicy
    from orchestrator.rigs.so101.rig import LeRobotRig
    from orchestrator.run import motion

    record = RtcRecord(before={id(t) for t in rtc_threads()})
    tap.rtc = record
    real_reset, real_act = EnginePolicy.reset, LeRobotRig.act

    def reset(self, context=None):
        real_reset(self, context)
        queue, timer = self._engine.action_queue, self._timer
        merge = queue.merge

        def tagged_merge(original, processed, real_delay, *args, **kwargs):
            if record.nan_next_chunk:
                record.nan_next_chunk = False
                processed = processed.clone()
                processed[:, self.ordered_action_keys.index("elbow_flex.pos")] = float("nan")
            started = timer._started if timer._started is not None else time.perf_counter()
            for row in processed.detach().cpu().numpy().reshape(len(processed), -1):
                record.rows[_row_key(row)] = started
            return merge(original, processed, real_delay, *args, **kwargs)

        queue.merge = tagged_merge

    def act(self, action):
        keys = [f"{j}.pos" for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex",
                                     "wrist_roll", "gripper")]
        origin = record.rows.get(_row_key(action[k] for k in keys)) if all(k in action for k in keys) else None
        record.acts.append((time.perf_counter(), origin))
        return real_act(self, action)

    def watched(name, fn):
        def wrapper(*args, **kwargs):
            if any(id(t) not in record.before for t in rtc_threads()):
                record.alive_at_moves.append(f"{name} ({tap.phase[-1]})")
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(EnginePolicy, "reset", reset)
    monkeypatch.setattr(LeRobotRig, "act", act)
    monkeypatch.setattr(motion.ArmMotion, "stop", watched("ArmMotion.stop", motion.ArmMotion.stop))
    monkeypatch.setattr(motion.ArmMotion, "to_rest", watched("ArmMotion.to_rest", motion.ArmMotion.to_rest))
    return record


def check(outcome, tap, stop_events: tuple[str, ...]) -> None:
    """The two RTC invariants (module docstring), appended to `outcome.violations`."""
    record: RtcRecord = tap.rtc
    bad = outcome.violations
    previous_end = float("-inf")
    for start, end in tap.stops:
        moment = start
        if (outcome.case.event in stop_events and tap.fired_at is not None
                and previous_end < tap.fired_at < start):
            moment = tap.fired_at
        stale = [(t, origin) for t, origin in record.acts if t > moment and origin is not None and origin < end]
        if stale:
            t, origin = stale[0]
            bad.append(f"stale: an action computed {1000 * (moment - origin):.0f} ms before a stop was sent "
                       f"{1000 * (t - moment):.0f} ms after it ({len(stale)} such actions)")
        previous_end = end
    bad.extend(f"joined: LeRobot's RTC thread alive at {where}" for where in record.alive_at_moves[:3])
    left = [t for t in rtc_threads() if id(t) not in record.before]
    if left:
        bad.append(f"joined: {len(left)} RTC inference thread(s) alive after the campaign's way out")
