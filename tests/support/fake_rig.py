"""`StillRig`: the base of the tests' own rigs. It subclasses `Rig`, so a fake rig has every member
the runner reads (`last_frames`, `torque_problems`, ...) with the interface's defaults, and it
holds nothing: connect, rest, layout, stop and disconnect do nothing. A fake gives `observe`, `act`
and `end_episode` (what an episode drives) and `realtime`."""

from __future__ import annotations

from orchestrator.design.protocol import Cube, Mark
from orchestrator.rigs.base import Rig


class StillRig(Rig):
    camera_names: tuple[str, ...] = ()

    def connect(self) -> None:
        pass

    def preflight(self) -> list[str]:
        return []

    def go_to_rest(self, check=None) -> None:
        pass

    def prepare_layout(self, mark: Mark, cube: Cube, seed: int) -> None:
        pass

    def safe_stop(self) -> None:
        pass

    def disconnect(self) -> None:
        pass
