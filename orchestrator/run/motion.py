"""Every move the arm makes by itself (to rest), stoppable by the operator's stop key.

The runner moves the arm on its own at three moments: to rest after connecting, to rest after
each trial, and to rest before torque goes off at the end of a session (normal end, fault,
Ctrl-C, SIGTERM: what lerobot-rollout does at teardown). `ArmMotion` makes each of them
stoppable (docs/design.md section 12):

- before a move the operator is told the arm is about to move (`Operator.arm_moving`), and the
  stop key is live for its whole length (`Operator.check_stop`, called before every step);
- a stop (during an episode or during a move) holds the arm, or releases torque if the rig
  profile says `on_stop: release` (`Rig.safe_stop`), and the arm does not move again until the
  operator confirms (`Operator.confirm_move`); ending the session instead leaves it held until
  torque goes off.
"""

from __future__ import annotations

import logging

from orchestrator.run.operator_protocol import Operator
from orchestrator.rigs.base import EmergencyStop
from orchestrator.rigs.base import Rig

logger = logging.getLogger(__name__)


class ArmMotion:
    def __init__(self, rig: Rig, operator: Operator):
        self.rig = rig
        self.operator = operator
        self.held = False  # stopped by the operator and not yet confirmed

    def stop(self) -> None:
        """The stop key (or a fault) during an episode: hold or release; nothing moves until
        the operator confirms."""
        self.rig.safe_stop()
        self.held = True

    def to_rest(self, what: str = "to rest") -> None:
        """Move to rest; after a stop, first wait for the operator's confirmation. Raises what
        `confirm_move` raises (StopRequested: the operator ends the session, arm held)."""
        while True:
            if self.held:
                self.operator.confirm_move(what)
                self.held = False
            self.operator.arm_moving(what)
            try:
                self.rig.go_to_rest(check=self.operator.check_stop)
            except EmergencyStop:
                self.stop()
                self.operator.message(f"arm stopped on its way {what}: it holds until you confirm")
                continue
            except BaseException:
                self.rig.safe_stop()
                raise
            finally:
                self.operator.arm_moving(None)
            return

    def leave(self) -> None:
        """End of session: to rest (stoppable; after a stop only if the operator confirms), then
        torque off through `disconnect`. Never raises."""
        try:
            self.to_rest("to rest before torque goes off")
        except BaseException as exc:  # noqa: BLE001 - torque goes off whatever happened
            logger.warning("arm left where it is: %s", exc or type(exc).__name__)
        finally:
            self.rig.disconnect()
