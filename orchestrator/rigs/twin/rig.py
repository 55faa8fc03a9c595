"""A real-arm rig profile run on the wire-level twin (`--twin`): LeRobot's whole stack, simulated arm.

`TwinRig` is `LeRobotRig` unchanged (LeRobot's SOFollower, FeetechMotorsBus, scservo_sdk and
camera classes talk to the twin's pseudo-terminal and frames) plus what only a simulation can do:
- `prepare_layout` places the cube on the mark (the hand of the operator, with the profile's
  `placement` error, `rigs/placement.py`; the console's prompt
  is still shown unless the run is `--unattended`);
- the episode's time zero is sent to the twin at the first observation of the episode (after
  `prepare_layout`, or `start_here` when the arm's reset placed the cube);
- `end_episode` adds the scene's physical success test (recorded as `physics` labels, sealed
  from judges as on the simulated rig) and its events (`table_collision`) to LeRobot's facts.
"""

from __future__ import annotations

from orchestrator.design.protocol import Cube, Mark
from orchestrator.rigs.base import EpisodeFacts, Observation, register_rig
from orchestrator.rigs.placement import SimulatedHand
from orchestrator.rigs.profile import LoadedRig
from orchestrator.rigs.so101.rig import LeRobotRig


@register_rig("twin")
class TwinRig(LeRobotRig):
    def __init__(self, loaded: LoadedRig, **options):
        super().__init__(loaded, **options)
        self.twin = loaded.twin
        self.hand = SimulatedHand(loaded.profile.placement)
        self._begun = True

    places_the_cube = True   # the simulated hand (`rigs/placement.py`)

    def prepare_layout(self, mark: Mark, cube: Cube, seed: int) -> None:
        landed = self.hand.place(mark)   # the operator's hand, with the profile's placement error
        self.twin.request("place", mark={"id": mark.id, "x": landed.x, "y": landed.y, "yaw_deg": landed.yaw_deg},
                          cube=cube.model_dump())
        self._begun = False

    def start_here(self, mark: Mark, seed: int) -> None:
        """The arm put the cube on `mark` (the reset): the twin's episode clock, success test and
        events restart at the episode's first observation, as after `prepare_layout`; the cube
        stays where the arm left it."""
        self._begun = False

    def observe(self, with_images: bool = True) -> Observation:
        if not self._begun:
            self.twin.request("begin")
            self._begun = True
        return super().observe(with_images)

    def end_episode(self) -> EpisodeFacts:
        facts = super().end_episode()
        physics = self.twin.request("end")
        events = sorted(set(facts.safety_events) | set(physics["safety_events"]))
        return EpisodeFacts(physics_success=physics["physics_success"], max_lift_m=physics["max_lift_m"],
                            time_to_success_s=physics["time_to_success_s"], safety_events=events,
                            ladder=physics.get("ladder"), longest_hold_s=physics.get("longest_hold_s"),
                            extra={**facts.extra, "twin": physics["extra"]})
