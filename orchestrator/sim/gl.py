"""Choose the headless OpenGL backend before mujoco is imported."""

from __future__ import annotations

import os
import sys


def ensure_gl_backend() -> str:
    """Set `MUJOCO_GL` to `egl` unless the user chose one; return the value in effect.

    Must run before `import mujoco` anywhere in the process to have an effect; when mujoco is
    already imported the current value is returned unchanged.
    """
    if "mujoco" not in sys.modules and not os.environ.get("MUJOCO_GL"):
        os.environ["MUJOCO_GL"] = "egl"
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ.get("MUJOCO_GL", "egl"))
    return os.environ.get("MUJOCO_GL", "")
