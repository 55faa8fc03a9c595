"""The real SO-101 through LeRobot: the rig (`rig.LeRobotRig`) and its LeRobot config
(`config.py`), the Feetech servos' alarms, torque and calibrated range, the closed-loop move to
rest, the pre-flight checks, the cameras (threaded reads, a video file as a camera)."""
