"""The automatic rater `auto`: a second opinion on each episode, never the authority.

`fk.py` is the SO-101's forward kinematics in plain numpy (constants taken once from the
MuJoCo model, checked against it by a test); `rater.py` applies the protocol's success test
to the recorded joint trajectory (and the front video where it helps); `labels.py` stores its
labels as judge `auto`. Nothing here imports mujoco or torch: judges' and reports' code paths
may use it.
"""
