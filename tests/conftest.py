"""Shared test set-up.

The environment the tests need is set here, so `uv run --all-extras pytest` works on a clean
clone: headless MuJoCo rendering (EGL), offline Hugging Face, one rendering thread.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LP_NUM_THREADS", "1")
