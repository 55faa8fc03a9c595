"""MuJoCo simulation of the SO-101 (Menagerie `robotstudio_so101`): scene, kinematics, rendering.

Importing this package does not import mujoco; the submodules do. Set `MUJOCO_GL` (default
`egl` here, `osmesa` as fallback) before the first import of `orchestrator.sim.scene` or
`orchestrator.sim.kinematics` (`orchestrator.sim.gl.ensure_gl_backend()` does it).
"""
