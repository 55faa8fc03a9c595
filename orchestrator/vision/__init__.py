"""What the fixed camera measures before a trial: the table (from the template's fiducials) and
the cube on it, against the trial's mark (`camera_model`, `table`, `cube`, `start_check`).

Pure image geometry with OpenCV and SciPy: images in, measurements out. The rigs deliver the
images; the run and the `camera check` command decide what a measurement means for a trial.
"""
