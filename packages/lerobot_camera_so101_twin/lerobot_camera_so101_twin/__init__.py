"""The twin's camera type `twin`, registered for LeRobot's own commands.

LeRobot's commands call `register_third_party_plugins()` before they parse their flags: it imports
the module named like each installed distribution whose name starts with `lerobot_camera_`. This
module is imported that way; importing the twin's camera module registers `TwinCameraConfig` as
the camera type `twin` in LeRobot's camera config registry, and LeRobot finds `TwinCamera` beside
it (`make_device_from_device_class`). So `lerobot-rollout` with the flags `orchestrator twin`
prints drives the twin exactly as it drives a real arm, with no launcher.
"""

from orchestrator.rigs.twin.twincamera import TwinCamera, TwinCameraConfig

__all__ = ["TwinCamera", "TwinCameraConfig"]
