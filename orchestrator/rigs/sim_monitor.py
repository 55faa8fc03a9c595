"""What a simulated episode records, watched every physics step (`rigs.sim.SimRig`): the physical
success test and its progress ladder (`success.LiftHoldTracker`, fed the cube's bottom, which
jaws touch it, the grasp point and the cube's centre), the cube's maximum lift, and the safety
events: `table_collision` (a robot geom pressing on the
table with more than `TABLE_FORCE_N`; the first one's time, force and geom are kept) and
`joint_limit:<joint>` (counted by the rig when it clips an action target).

One `EpisodeMonitor` per episode: the rig makes a new one wherever an episode's record starts
(a new scene, a new layout, the episode clock restarted)."""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.design.protocol import Success
from orchestrator.rigs.base import EpisodeFacts
from orchestrator.sim.success import LiftHoldTracker

# A robot geom pushing on the table harder than this (normal force, N) is a table collision.
# Light brushes of the jaw tips (a few tenths of a newton) are not.
TABLE_FORCE_N = 1.0


class EpisodeMonitor:
    """One episode's success test, control-step count and safety events (the module docstring)."""

    def __init__(self, mujoco: Any, model: Any, ids: dict[str, Any], cube_size_m: float, success: Success):
        """`ids`: `sim.scene.scene_ids` of `model`."""
        self._mj, self._model, self._ids = mujoco, model, ids
        self._robot_set = frozenset(ids["robot_geoms"].tolist())
        self._fixed_set = frozenset(ids["fixed_jaw"].tolist())
        self._moving_set = frozenset(ids["moving_jaw"].tolist())
        self._half = cube_size_m / 2.0
        self.tracker = LiftHoldTracker(success.min_height_m, success.hold_s, cube_size_m)
        self.events: dict[str, int] = {}
        self.table_steps = 0
        self.control_steps = 0
        self.first_table: dict[str, Any] | None = None

    def count(self, event: str) -> None:
        self.events[event] = self.events.get(event, 0) + 1

    def step(self, data: Any) -> None:
        """Per physics step: feed the success test, watch for table collisions.

        Plain Python over the few contacts of a step (cheaper than numpy on tiny arrays).
        """
        d, ids = data, self._ids
        rot = d.xmat[ids["cube_body"]].tolist()
        bottom = float(d.qpos[ids["cube_qpos"] + 2]) - self._half * (abs(rot[6]) + abs(rot[7]) + abs(rot[8]))
        fixed = moving = False
        ncon = d.ncon
        if ncon:
            cube, table = ids["cube_geom"], ids["table"]
            fixed_set, moving_set, robot_set = self._fixed_set, self._moving_set, self._robot_set
            hits = None
            for i, (a, b) in enumerate(d.contact.geom[:ncon].tolist()):
                if a == cube or b == cube:
                    other = b if a == cube else a
                    if other in fixed_set:
                        fixed = True
                    elif other in moving_set:
                        moving = True
                elif a == table or b == table:
                    other = b if a == table else a
                    if other in robot_set:
                        hits = hits or []
                        hits.append((i, other))
            if hits:
                self._table_contact(d, hits)
        adr = ids["cube_qpos"]
        self.tracker.update(float(d.time), bottom, fixed, moving, d.site_xpos[ids["grasp_site"]], d.qpos[adr:adr + 3])

    def _table_contact(self, d: Any, hits: list[tuple[int, int]]) -> None:
        m = self._model
        force = np.zeros(6)
        worst, worst_geom = 0.0, -1
        for i, geom in hits:
            self._mj.mj_contactForce(m, d, i, force)
            if abs(float(force[0])) > worst:
                worst, worst_geom = abs(float(force[0])), geom
        if worst <= TABLE_FORCE_N:
            return
        self.table_steps += 1
        if "table_collision" not in self.events:
            self.first_table = {"t_s": round(float(d.time), 4), "force_n": round(worst, 2),
                                "geom": m.geom(worst_geom).name or f"geom{worst_geom}",
                                "body": m.body(m.geom_bodyid[worst_geom]).name}
        self.count("table_collision")

    def facts(self, data: Any, substeps: int, extra: dict[str, Any]) -> EpisodeFacts:
        """The episode's `EpisodeFacts`; `extra`: the rig's own fields (cube, mark, seed)."""
        tr = self.tracker
        timestep = float(self._model.opt.timestep)
        return EpisodeFacts(physics_success=bool(tr.success), max_lift_m=float(tr.max_lift_m),
                            time_to_success_s=tr.time_to_success_s, ladder=tr.ladder(),
                            longest_hold_s=float(tr.longest_hold_s),
                            safety_events=sorted(self.events),
                            extra={"sim_time_s": float(data.time), "control_steps": self.control_steps,
                                   "physics_steps_per_control": substeps, "physics_timestep_s": timestep,
                                   "longest_hold_s": tr.longest_hold_s, "event_counts": dict(self.events),
                                   "table_collision_s": self.table_steps * timestep,
                                   "first_table_collision": self.first_table, **extra})
