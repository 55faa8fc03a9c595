"""The autonomous reset (the protocol's `reset: {mode: auto}`, design/reset_spec.py): between two
trials the arm puts the cube on the next trial's mark itself.

`CubeReset.place(trial, mark)` runs after the move to rest and before the start check
(`run/sequential.py`):
1. the fixed camera finds the cube (`StartGate.look`: the table from the fiducials, the cube by
   its colour and silhouette, `vision.cube`); a cube the camera cannot find, one off the table
   or out of the arm's reach (`PICK_REACH_MAX_M`, beyond the marks' reach) is handed to the
   operator at once, with that said;
2. a scripted top-down grasp picks it and places it on the mark (`policies.pick_place`: the
   cube let go where its lowest corner, as the pick left it in the jaws, clears the table), every
   step through `ArmMotion.follow`: announced ("ARM RESETTING"), the stop key live, the one stop
   path; the session's first pick stays `pick_place.HOVER_S` above the cube before it descends
   (a calibration error shows there as jaws beside the cube, on the twin and a real arm);
3. the arm goes back to rest and the camera measures the placement against the start check's
   tolerance; a placement outside it is picked and placed again, up to `max_tries` placements,
   each put down where the last one from nearby missed by, the other way;
4. in simulation, a cube still in the jaws when an episode ends (a success) is carried straight
   to the next trial's mark before the move to rest (`put_down_held`, let go as the seat of a
   scripted grip with the gripper turned as it is says: `pick_place.Seat.of_held`); the reset then measures
   it there and picks it only when it missed (not on the twin or a real arm, where it missed every
   time: `HELD_CARRY_ON_HARDWARE`);
5. each try aims against where its placements land (`LandingBias`): in simulation the cube
   turns and slides in the closing jaws and lags in them while carried, so a placement from
   across the sheet landed 2.7 mm beyond the mark on average and up to 7 mm aside, by how far the
   arm swung and how the cube stood (docs/benchmarks.md). The rig profile's measured model of
   that slip (`reset_slip`, rigs/reset_slip.py) aims a session's first tries, so a short
   campaign does not pay for learning; every measured placement then teaches the session its
   own miss of the kind (from far, from nearby, from the jaws) beyond the model, the median of
   its misses with the model counted as `PRIOR_WEIGHT` misses of none, which a real arm's own
   slip and sag teach it the same way (without a model: the median of its misses alone).
When it cannot, it says why in one line ("cube not found", "cube off the table", "placement off
by 9 mm after 2 tries") and leaves the cube to the start check, whose refusal asks the operator
(on the simulator: the simulated hand). Every reset is recorded (`cube_reset` events: tries,
seconds, the last measured offset; `cube_lost` when the cube could not be found or reached), and
the report counts the hand-overs among the operator's interventions.

The reset is no part of any episode: the episode starts afterwards, from rest, on a fresh clock
(`Rig.start_here`).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from orchestrator.design.protocol import REACH_MIN_M
from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.rigs.reset_slip import MODELLED_KINDS, ResetSlip
from orchestrator.run.motion import ArmMotion
from orchestrator.run.start_state import StartGate
from orchestrator.sim.holding import closed_on_cube, cube_sized_gap
from orchestrator.vision.cube import find_blobs, fit_cube

RESETTING = "resetting the cube"
# The reset picks a cube up to this far from the arm's base, beyond the marks' 0.30 m
# (`protocol.REACH_MAX_M`, which leaves a policy room around its mark): an episode pushes a cube
# on a mark 0.29 m out 10-15 mm further, and the pick's plan reaches 0.34 m with the gripper
# tilted 25 degrees. Measured (docs/benchmarks.md, "Resets that need no learning time"): 18 cubes
# 0.305-0.33 m out, each picked and put on M07 in 1-2 tries.
PICK_REACH_MAX_M = 0.32
NEAR_M = 0.02   # a pick this close to the mark is a correction of the last placement
# A miss larger than this is a cube dropped or knocked, not where a placement lands: not learned.
LEARN_MAX_M = 0.02
# Not on the twin or a real arm (yet): there 0 of 8 put-downs landed (the two measured 32 and 67 mm
# off; docs/benchmarks.md), and the reset picked each cube anyway. The likely cause, not confirmed
# on the wire log: a success holds the cube at full grip for over a second, and the STS3215 gripper
# then limits itself (overload protection, LeRobot's Overload_Torque) to a grip too weak to carry it.
HELD_CARRY_ON_HARDWARE = False
PRIOR_WEIGHT = 3   # the rig's slip model counts as this many of a session's misses (`LandingBias`)
SQUEEZE_S = 0.3   # after an episode the jaws are commanded closed this long, then read: a cube in them?


class LandingBias:
    """Where a session's placements land against where they were aimed (the camera's measured
    offset minus the aim's correction), per kind of try: `far` (picked 2 cm or more from the
    mark), `near`, and `from hand` (a cube still in the jaws after an episode, held wherever the
    policy gripped it). `slip`: the rig's measured model of that miss (rigs/reset_slip.py), or
    None. What the session learns is the miss beyond the model (`misses`); the correction of the
    next try of a kind is minus the model's miss and minus the median of the session's misses of
    the kind, the model counted as `PRIOR_WEIGHT` misses of none (a kind the model does not
    cover, or no model: the session's median alone; none yet: no correction); the median, so one
    odd landing moves it little."""

    def __init__(self, slip: ResetSlip | None = None) -> None:
        self.slip = slip
        self.misses: dict[str, list[tuple[float, float]]] = {"far": [], "near": [], "from hand": []}

    def _model(self, kind: str, pick, mark) -> tuple[tuple[float, float], int]:
        """The model's miss for this try (m, layout frame) and how many misses of none it counts as."""
        if self.slip is None or kind not in MODELLED_KINDS or pick is None or mark is None:
            return (0.0, 0.0), 0
        return self.slip.expected_m(kind, pick, mark), PRIOR_WEIGHT

    def correction(self, kind: str, pick: tuple[float, float, float] | None = None,
                   mark: tuple[float, float] | None = None) -> tuple[float, float]:
        """The aim's correction (m, layout frame) of a try of `kind` that picks the cube at `pick`
        (x, y, yaw degrees) and puts it on `mark` (x, y)."""
        (mx, my), weight = self._model(kind, pick, mark)
        misses = self.misses[kind] + [(0.0, 0.0)] * weight
        dx, dy = np.median(np.array(misses), axis=0) if misses else (0.0, 0.0)
        return (-float(dx) - mx, -float(dy) - my)

    def learn(self, kind: str, miss_m: tuple[float, float], aimed_m: tuple[float, float],
              pick: tuple[float, float, float] | None = None, mark: tuple[float, float] | None = None) -> None:
        (mx, my), _ = self._model(kind, pick, mark)
        raw = (miss_m[0] - aimed_m[0] - mx, miss_m[1] - aimed_m[1] - my)
        if math.hypot(*raw) <= LEARN_MAX_M:
            self.misses[kind].append(raw)


class CubeReset:
    """The reset of one session (see the module docstring)."""

    def __init__(self, protocol, rig: Any, gate: StartGate, motion: ArmMotion, store, say):
        self.spec = protocol.protocol.reset
        self.layout = protocol.layout
        self.fps = protocol.protocol.episode.fps
        self.rig, self.gate, self.motion, self.store, self.say = rig, gate, motion, store, say
        self.on = self.spec.mode == "auto"
        self.placed_before = False   # the session's first trial starts from a cube placed by hand
        self.landing = LandingBias(rig.profile.reset_slip)
        self.from_hand: tuple[str, tuple[float, float]] | None = None   # (mark id, aim) of a cube put down from the jaws
        self.hovered = False   # the session's first pick stayed above the cube (`pick_place.HOVER_S`)

    @property
    def arm_places(self) -> bool:
        """The arm puts the next cube on its mark (no one is asked to)."""
        return self.on and self.placed_before

    def put_cube(self, trial, mark) -> None:
        """The cube on `mark` for `trial`: by the arm (`place`, then the episode starts from the
        world as it is), or, with `reset: operator` and for a session's first trial, by the rig's
        hand or a person's (`Rig.prepare_layout`)."""
        if self.arm_places:
            self.place(trial, mark)
            self.rig.start_here(mark, trial.seed)
        else:
            self.rig.prepare_layout(mark, self.layout.cube, trial.seed)
            self.placed_before = True

    def put_down_held(self, mark) -> bool:
        """After an episode, before the move to rest: when the jaws stand at the cube's width,
        they are closed for `SQUEEZE_S` where the arm stands and read
        (`sim.holding.closed_on_cube`); a cube still in them (a success) is carried straight to
        `mark` and put down (`pick_place.place_held_path`), so the next reset only measures it.
        True when the arm put a cube down. Nothing when the reset is off, the jaws are open wider
        than the cube or shut, they hold nothing, or the lift is out of reach (the cube then goes
        to rest with the arm)."""
        from orchestrator.policies.pick_place import place_held_path
        from orchestrator.policies.scripted import CLOSED_PCT

        if not self.on or self.motion.held or (self.rig.realtime and not HELD_CARRY_ON_HARDWARE):
            return False
        here = self._joints()
        if not cube_sized_gap(here[5:6], self.layout.cube.size_m)[0]:   # open wider than the cube, or shut
            return False
        squeeze = {**dict(zip(STATE_KEYS, map(float, here), strict=True)), STATE_KEYS[5]: CLOSED_PCT}
        self.motion.follow((squeeze for _ in range(max(1, round(SQUEEZE_S * self.fps)))), RESETTING, self.fps)
        here = self._joints()
        if self.motion.held or not closed_on_cube(here[5:6], self.layout.cube.size_m, np.array([CLOSED_PCT]))[0]:
            return False
        aimed = self.landing.correction("from hand")
        path = place_held_path(here, (mark.x, mark.y, mark.yaw_deg), self.layout.cube.size_m, self.fps, aimed)
        if path is None:
            return False
        self._follow(path)
        self.from_hand = (mark.id, aimed)
        return True

    def _follow(self, path: np.ndarray) -> None:
        """The arm along `path` (rows of joint targets in `STATE_KEYS` order), as a reset motion."""
        self.motion.follow(({k: float(v) for k, v in zip(STATE_KEYS, row, strict=True)} for row in path),
                           RESETTING, self.fps)

    def _joints(self) -> np.ndarray:
        now = self.rig.observe(with_images=False)
        return np.array([float(now[k]) for k in STATE_KEYS])

    def _already_there(self, trial, mark) -> bool:
        """The cube the arm put down from its jaws after the last episode, measured on `mark`
        (learned from as a placement `from hand`); True when it passes (recorded as a reset of
        0 tries: no pick was needed)."""
        if self.from_hand is None:
            return False
        (mark_id, aimed), self.from_hand = self.from_hand, None
        if mark_id != mark.id:
            return False
        result, _, _ = self.gate.measure(mark)
        offset = result.offset_mm   # None: no cube found
        if offset is not None:
            self.landing.learn("from hand", (offset[0] / 1000.0, offset[1] / 1000.0), aimed)
        if not result.passes or offset is None:   # a check passes only with the cube found
            return False
        self.store.log_event("cube_reset", f"reset to {mark.id}: put down from the jaws after the episode",
                             slot=trial.slot, data={"mark": mark.id, "tries": 0, "seconds": 0.0, "passes": True,
                                                    "offset_mm": math.hypot(*offset),
                                                    "why": None, "from_hand": True,
                                                    "aim_correction_mm": [round(1000 * c, 2) for c in aimed]})
        return True

    def find(self) -> tuple[tuple[float, float, float] | None, str | None]:
        """Where the cube is, (x, y, yaw degrees) in the layout frame, or why it cannot be picked."""
        image, view = self.gate.look()
        if view is None:
            return None, f"camera {self.gate.spec.camera} cannot see the template's fiducials"
        table, size = self.layout.table, self.layout.cube.size_m
        blobs = find_blobs(image, view, size, ((table.x_min + table.x_max) / 2, (table.y_min + table.y_max) / 2))
        if not blobs:
            return None, "cube not found"
        if len(blobs) > 1:
            return None, f"{len(blobs)} cubes in view: the arm moves one"
        fit = fit_cube(blobs[0], view, size)
        if not (table.x_min <= fit.x <= table.x_max and table.y_min <= fit.y <= table.y_max):
            return None, f"cube off the table, at ({fit.x:.2f}, {fit.y:.2f}) m"
        reach = math.hypot(fit.x, fit.y)
        if not REACH_MIN_M <= reach <= PICK_REACH_MAX_M:
            return None, f"cube out of the arm's reach ({reach:.2f} m from its base, at ({fit.x:.2f}, {fit.y:.2f}) m)"
        return (fit.x, fit.y, fit.yaw_deg), None

    def place(self, trial, mark) -> bool:
        """Put the cube on `mark` (see the module docstring); True when the last measurement
        passes the start check, False when the operator has to."""
        from orchestrator.policies.pick_place import HOVER_S, pick_and_place_path

        put_down = self.from_hand is not None and self.from_hand[0] == mark.id
        if self._already_there(trial, mark):
            return True
        started = time.monotonic()
        line, offset = None, None
        correction: tuple[float, float] | None = None   # after a miss from nearby: the next aim
        aimed = (0.0, 0.0)
        tries = 0
        for tries in range(1, self.spec.max_tries + 1):
            where, line = self.find()
            if where is None:
                if line is not None and line.startswith("cube"):   # not found, off the table, out of reach: a lost cube
                    self.store.log_event("cube_lost", f"reset before {mark.id}: {line}", slot=trial.slot,
                                         data={"mark": mark.id, "why": line})
                break
            kind = "near" if math.hypot(where[0] - mark.x, where[1] - mark.y) < NEAR_M else "far"
            aimed = (correction if kind == "near" and correction is not None
                     else self.landing.correction(kind, where, (mark.x, mark.y)))
            path = pick_and_place_path(self._joints(), where, (mark.x, mark.y, mark.yaw_deg), self.layout.cube.size_m,
                                       self.fps, aimed, hover_s=0.0 if self.hovered else HOVER_S)
            self.hovered = True
            self._follow(path)
            self.motion.to_rest("to rest after the reset")
            result, _, _ = self.gate.measure(mark)
            found = result.offset_mm   # None: no cube found
            offset = math.hypot(*found) if found is not None else None
            if found is not None:
                miss = (found[0] / 1000.0, found[1] / 1000.0)
                self.landing.learn(kind, miss, aimed, where, (mark.x, mark.y))
                # The next try from nearby puts it down that much the other way (a miss from far
                # away says little about the next, short move: only the learned bias carries over).
                if kind == "near":
                    correction = (aimed[0] - miss[0], aimed[1] - miss[1])
            if result.passes:
                line = None
                break
            line = (f"placement off by {offset:.0f} mm after {tries} tr{'y' if tries == 1 else 'ies'}"
                    if offset is not None else result.line)
        seconds = round(time.monotonic() - started, 2)
        self.store.log_event("cube_reset", f"reset to {mark.id}: " + (line or f"placed in {tries} tries"),
                             slot=trial.slot, data={"mark": mark.id, "tries": tries, "seconds": seconds,
                                                    "passes": line is None, "offset_mm": offset, "why": line, "from_hand": put_down,
                                                    "aim_correction_mm": [round(1000 * c, 2) for c in aimed]})
        if line is not None:
            self.say(f"reset: {line}; the cube is left to the operator")
        return line is None
