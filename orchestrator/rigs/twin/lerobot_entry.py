"""Run one of LeRobot's own commands with the twin's camera type registered.

`python -m orchestrator.rigs.twin.lerobot_entry lerobot-rollout ARGS...` imports
`twincamera.py` (which registers the camera type `twin` in LeRobot's camera config registry),
then runs LeRobot's console entry point of that name (`lerobot-rollout`, `lerobot-record`,
`lerobot-calibrate`, ...) with ARGS, exactly as the `lerobot-...` executable would.

LeRobot's commands import third-party camera types only from installed distributions whose names
start with `lerobot_camera_` (`register_third_party_plugins`, which imports the module of exactly
that name). The project's `lerobot` extra installs one, `lerobot_camera_so101_twin` (packages/, a
uv workspace member), so `lerobot-rollout ...` runs as it is; this launcher is for an install that
lacks it (the orchestrator's wheel installed on its own). Commands without cameras
(`lerobot-calibrate`, `lerobot-find-joint-limits`) run as they are either way.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m orchestrator.rigs.twin.lerobot_entry LEROBOT_COMMAND [ARGS...]", file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    found = [e for e in entry_points(group="console_scripts") if e.name == command and e.value.startswith("lerobot")]
    if not found:
        print(f"no LeRobot command {command!r} (installed: lerobot-rollout, lerobot-calibrate, ...)", file=sys.stderr)
        return 2
    import orchestrator.rigs.twin.twincamera  # noqa: F401 - registers the `twin` camera type

    sys.argv = [command, *args]
    result = found[0].load()()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
