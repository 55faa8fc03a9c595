"""Test lanes: which markers each test file carries, and the guards that keep the fast lane fast.

Every test file is listed once in `FILE_MARKERS` with the markers all its tests carry (an empty
tuple: the file's tests are in the fast lane unless a test carries a heavy marker of its own).
`tests/conftest.py` applies them at collection, adds the markers implied by a fixture
(`FIXTURE_MARKERS`), and marks `fast` every test that ends up with no heavy marker:

    uv run --all-extras pytest -m fast -n 2 -q # pure and in-process tests, two workers, under a minute
    uv run --all-extras pytest -q              # every test (the CI command)

A fast test must not import torch or LeRobot and must not start a process: `heavy_guard` fails
it if it does (tests/test_lanes.py checks the table, the guard, and that collecting the fast
files imports no torch).
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing.process
import subprocess
import sys
from collections.abc import Iterator

import pytest

# The registered markers (pyproject.toml [tool.pytest.ini_options] markers).
HEAVY = ("slow", "lerobot", "subprocess", "postgres", "twin", "browser")
FAST = "fast"

# Imported by a fast test, torch costs seconds (LeRobot's policies import it): such a test belongs in
# the `lerobot` lane. LeRobot's motor and robot classes alone import no torch and stay allowed.
HEAVY_MODULES = ("torch",)

FIXTURE_MARKERS: dict[str, tuple[str, ...]] = {
    "pg_cluster": ("postgres",),
    "saved_acts": ("lerobot", "subprocess"),
    "saved_vla": ("lerobot", "subprocess"),
    "tiny_reference": ("subprocess",),
}

FILE_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("test_abort_answers.py", ()),
    ("test_abort_causes.py", ()),
    ("test_aborts.py", ()),
    ("test_architecture.py", ()),
    ("test_arm_fit.py", ()),
    ("test_arm_fit_twin.py", ("twin", "lerobot", "subprocess")),
    ("test_arm_safety.py", ("lerobot",)),
    ("test_arm_pacing.py", ("lerobot",)),   # test_arm_safety's wall-clock intervals, in the real-time group
    ("test_stop_reasons.py", ("lerobot",)),
    ("test_stale_at_end.py", ()),   # a camera that stops in the episode's last half second
    ("test_audit_campaign.py", ("subprocess",)),
    ("test_audit_pg.py", ("postgres",)),
    ("test_audit_queue.py", ()),
    ("test_audit_sample.py", ()),
    ("test_auto_rater.py", ()),
    ("test_camera_lift.py", ()),
    ("test_two_senses.py", ()),
    ("test_wrist_camera.py", ()),
    ("test_wrist_calibration.py", ()),
    ("test_calibrate_wrist_cli.py", ("subprocess",)),
    ("test_jaws_open.py", ()),
    ("test_blinding.py", ()),
    ("test_bundle.py", ()),
    ("test_clean_media.py", ()),
    ("test_console.py", ()),
    ("test_control_loop_time.py", ("slow",)),   # real-time episodes: seconds of wall clock
    ("test_core_import.py", ("subprocess",)),
    ("test_demo_wheel.py", ("subprocess",)),
    ("test_evidence_chain.py", ()),
    ("test_evidence_cli.py", ("subprocess",)),
    ("test_exit_freeze.py", ("subprocess",)),   # run's and doctor's exit: fresh processes refusing, about 1 s each
    ("test_export.py", ("lerobot",)),
    ("test_docs.py", ()),
    ("test_episode_rules.py", ()),
    ("test_export_helpers.py", ("lerobot", "subprocess")),
    ("test_export_kill.py", ("lerobot", "subprocess")),
    ("test_export_remux.py", ("lerobot",)),
    ("test_export_import.py", ("lerobot", "subprocess")),
    ("test_export_train.py", ("lerobot", "subprocess", "slow")),
    ("test_fuzz_bundles.py", ("slow",)),   # fuzzing: hundreds of damaged bundles (the full run, not the fast lane)
    ("test_fuzz_inputs.py", ("slow",)),   # fuzzing: damaged stores and CSVs (the full run, not the fast lane)
    ("test_judge_app.py", ()),
    ("test_judge_audit.py", ("subprocess",)),
    ("test_judge_keys.py", ()),
    ("test_judge_overlay.py", ()),
    ("test_judge_playback.py", ()),
    ("test_judge_session.py", ()),
    ("test_judge_tmux.py", ("subprocess",)),
    ("test_judge_web.py", ("browser", "subprocess")),
    ("test_judge_web_security.py", ("browser", "subprocess")),
    ("test_judge_web_stores.py", ("browser", "subprocess")),
    ("test_language_policy.py", ("lerobot",)),
    ("test_lanes.py", ()),
    ("test_layout_print.py", ()),
    ("test_first_hour.py", ()),
    ("test_start_check.py", ()),
    ("test_start_gate.py", ()),
    ("test_start_report.py", ()),
    ("test_reset.py", ()),
    ("test_reset_slip.py", ()),
    ("test_start_check_run.py", ("subprocess",)),
    ("test_fiducials.py", ()),
    ("test_camera_cli.py", ("subprocess",)),
    ("test_lint.py", ("subprocess",)),   # ruff and mypy in their own processes
    ("test_lerobot_campaign.py", ("lerobot",)),
    ("test_lerobot_cli_fresh.py", ("lerobot", "subprocess")),
    ("test_lerobot_policy.py", ("lerobot",)),
    ("test_lerobot_rig.py", ("lerobot",)),
    ("test_operator_flow.py", ("lerobot",)),
    ("test_outcomes.py", ()),
    ("test_pg_abort_causes.py", ("postgres",)),
    ("test_pg_evidence.py", ("postgres", "subprocess")),
    ("test_pg_roles.py", ("postgres",)),
    ("test_pg_store.py", ("postgres",)),
    ("test_plan.py", ()),
    ("test_preflight.py", ("lerobot",)),
    ("test_doctor_faults.py", ("twin", "lerobot", "subprocess")),
    ("test_progress.py", ()),
    ("test_protocol.py", ()),
    ("test_protocol_fuzz.py", ("slow",)),   # fuzzing: hundreds of mutated files (the full run, not the fast lane)
    ("test_reliability.py", ("subprocess",)),
    ("test_remux_probe.py", ()),
    ("test_remote_policy.py", ("lerobot", "subprocess")),
    ("test_rest_move.py", ()),
    ("test_rest_move_sag.py", ()),
    ("test_rest_clearance.py", ()),   # MuJoCo and the twin's servo model, simulated time
    ("test_reply_lengths.py", ("lerobot",)),   # LeRobot's stack on the twin's servos in this process, simulated time
    ("test_guarded_motion.py", ("lerobot",)),   # LeRobot's stack on the twin's servos, simulated time
    ("test_motion_paths.py", ()),
    ("test_arm_motion.py", ()),
    ("test_guarded_loop.py", ()),
    ("test_report.py", ()),
    ("test_report_judge_flags.py", ()),
    ("test_report_wording.py", ()),
    ("test_report_html.py", ("browser", "subprocess")),
    ("test_report_intervals.py", ()),
    ("test_report_one_decision.py", ()),
    ("test_report_type1.py", ()),
    ("test_report_stations.py", ()),
    ("test_report_stats.py", ()),
    ("test_registries.py", ()),
    ("test_report_timing.py", ()),
    ("test_rig_interface.py", ()),
    ("test_test_sleeps.py", ()),
    ("test_policy_interface.py", ()),
    ("test_rig_profile.py", ()),
    ("test_rtc.py", ("twin", "lerobot", "subprocess")),
    ("test_rtc_engine.py", ("lerobot", "subprocess")),
    ("test_rtc_stop.py", ("twin", "lerobot", "subprocess")),
    ("test_run_cli_hardware.py", ("lerobot",)),
    ("test_runner.py", ()),
    ("test_safety_matrix.py", ("twin", "lerobot", "subprocess")),
    ("test_schedule.py", ()),
    ("test_scripted.py", ()),
    ("test_security.py", ()),
    ("test_sim_rig.py", ()),
    ("test_stations.py", ("postgres", "subprocess")),
    ("test_stats.py", ()),
    ("test_stats_clustered.py", ()),
    ("test_stats_compare.py", ()),
    ("test_compare.py", ()),
    ("test_compare_cli.py", ("subprocess",)),
    ("test_compare_html.py", ("browser", "subprocess")),
    ("test_compare_pg.py", ("postgres", "subprocess")),
    ("test_compare_sims.py", ("slow",)),   # Monte-Carlo level and coverage: seconds each (the full run, not the fast lane)
    ("test_compare_seed_pairing.py", ()),      # its fresh-process test carries `subprocess` itself
    ("test_stats_clustered_rate.py", ()),
    ("test_stats_ppi.py", ()),
    ("test_report_corrected.py", ()),
    ("test_report_corrected_cli.py", ("subprocess",)),
    ("test_stats_evalue_rule.py", ()),
    ("test_stats_homogeneity.py", ()),
    ("test_stats_kappa.py", ()),
    ("test_stats_sequence.py", ()),
    ("test_store.py", ()),
    ("test_store_sql.py", ()),
    ("test_store_backend.py", ()),
    ("test_ladder.py", ()),
    ("test_ladder_campaign.py", ()),   # its report test: a fresh process (marked subprocess)
    ("test_success.py", ()),
    ("test_twin.py", ("twin", "subprocess")),
    ("test_twin_camera.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_campaign.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_faults.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_grasp.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_model.py", ()),   # the twin's servo model stepped in simulated time (no process)
    ("test_twin_restart.py", ()),   # the twin server's `restart` op in this process (no process, no camera)
    ("test_twin_hand_guide.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_calibrate_wrist.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_safety.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_servo.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_sigterm.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_start_check.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_reset.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_standalone.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_unclean_start.py", ("twin", "lerobot", "subprocess")),
    ("test_twin_wire_log.py", ("twin", "lerobot", "subprocess")),
    ("test_view.py", ("subprocess",)),
    ("test_validate.py", ()),
    ("test_xdist_grouping.py", ("subprocess",)),
    ("test_xdist_sample.py", ()),   # the group's scheduling sample (GROUP_SAMPLE below), milliseconds
)


# The real-time tests: a twin stepped to the wall clock, stop-to-hold latencies, real-time episode
# loops. They carry one xdist group, so that `pytest -n 3 --dist loadgroup` (the CI command) runs
# them one after another on one worker, while the other workers take the rest of the suite (this
# needs `XdistGroupIds` below under pytest 9.2). Every file with the `twin` marker is in the
# group, and these besides:
# A test of such a file that starts no twin and no real-time loop (a refusal, a validate) carries
# `@pytest.mark.off_clock` and leaves the group, so it does not lengthen the one worker's queue.
REALTIME_GROUP = "realtime"
OFF_CLOCK = "off_clock"
# (test_rest_move.py and test_rest_move_sag.py are not: they run on a simulated clock.)
# (test_arm_safety.py and test_operator_flow.py are not: their assertions are on what the fake
# servos were written in which order and the words shown beside the registers, not on
# intervals, and they wait more than they compute; their one test of intervals is
# test_arm_pacing.py.)
REALTIME_FILES = frozenset({"test_control_loop_time.py", "test_arm_pacing.py"})
# The sample that test_xdist_grouping.py schedules in a nested pytest (itself out of the group):
# in the group by name, not a real-time test, so the check runs in milliseconds and REALTIME_FILES
# holds only wall-clock tests.
GROUP_SAMPLE = "test_xdist_sample.py"


def xdist_group_of(name: str, markers: tuple[str, ...], off_clock: bool = False) -> str | None:
    """The xdist group of a test of file `name` with `markers` (`off_clock`: the test carries the
    `off_clock` mark): `REALTIME_GROUP` or None."""
    if off_clock:
        return None
    return REALTIME_GROUP if "twin" in markers or name in REALTIME_FILES or name == GROUP_SAMPLE else None


class XdistGroupIds:
    """A plugin (registered by tests/conftest.py) that makes pytest-xdist's group marks visible.

    Under `--dist loadgroup`, pytest-xdist 3.8 appends `@<group>` to each grouped item's
    `item._nodeid` on the worker, and its scheduler groups the ids the worker reports. pytest 9.2
    keeps the node id in `item._id` (a `NodeId`) and never reads `_nodeid`, so the suffix was
    lost and the real-time tests ran on both workers, beside each other (seen with `-v`:
    test_rest_move.py's tests on gw0 and gw1). This hook runs after xdist's and carries the
    suffixed id into `item._id`; tests/test_xdist_grouping.py checks that one worker gets the
    group, with a positive control that blocks this plugin."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from _pytest.nodeid import NodeId

        for item in items:
            suffixed = item.__dict__.get("_nodeid")
            if isinstance(suffixed, str) and suffixed != item.nodeid:
                item._id = NodeId.parse(suffixed)


# What a lane needs installed beyond the core package: a file carrying the marker is checked at
# collection (tests/conftest.py), so a missing extra fails with the command that installs it,
# and a file deselected by `-m` is never imported (`-m "not lerobot"` collects on a core install).
MARKER_REQUIRES: dict[str, tuple[str, ...]] = {"lerobot": ("lerobot",), "twin": ("lerobot",), "postgres": ("psycopg",)}
# Needs of single files that no marker states.
FILE_REQUIRES: dict[str, tuple[str, ...]] = {"test_remote_policy.py": ("grpc",)}


def requirements_of(name: str) -> tuple[str, ...]:
    """The modules the tests of file `name` need (by its markers and its own entry)."""
    needs = [m for marker in markers_of_file(name) or () for m in MARKER_REQUIRES.get(marker, ())]
    return tuple(dict.fromkeys(needs + list(FILE_REQUIRES.get(name, ()))))


def deselects_file(markexpr: str, markers: tuple[str, ...]) -> bool:
    """Whether `-m markexpr` deselects every test of a file whose tests all carry `markers`,
    whatever markers a test adds of its own (every combination of the other lane markers is
    tried; `fast` only where no heavy marker is present, as the lanes give it)."""
    from itertools import combinations

    from _pytest.mark.expression import Expression

    expression = Expression.compile(markexpr)
    others = [m for m in (*HEAVY, FAST) if m not in markers]
    for k in range(len(others) + 1):
        for extra in combinations(others, k):
            names = set(markers) | set(extra)
            if FAST in names and names & set(HEAVY):
                continue
            if expression.evaluate(lambda name, _names=names, **_: name in _names):
                return False
    return True


# A test file missing from FILE_MARKERS: kept out of the fast lane until it is listed.
UNLISTED = ("slow",)


def markers_of_file(name: str) -> tuple[str, ...] | None:
    """The markers every test in `name` carries; None for a file not in the table."""
    return dict(FILE_MARKERS).get(name)


def warm_library_caches() -> list[str]:
    """Build the caches a library builds once per HOME, outside any test: matplotlib's font list
    (its first `import matplotlib.font_manager` runs `fc-list` where ~/.cache/matplotlib has no
    font cache yet; seen on a fresh machine as a fast-lane test "starting a process"). Returns
    the names of the caches warmed. Each is warmed here by name, not exempted in the guard: a
    test that itself starts `fc-list` still fails."""
    warmed = []
    if importlib.util.find_spec("matplotlib") is not None:
        import matplotlib.font_manager  # noqa: F401  (builds ~/.cache/matplotlib/fontlist-*.json)
        warmed.append("matplotlib font cache")
    return warmed


class HeavyInFastLane(AssertionError):
    """A fast-lane test imported a heavy module or started a process."""


@contextlib.contextmanager
def heavy_guard(modules: tuple[str, ...] = HEAVY_MODULES) -> Iterator[list[str]]:
    """Within the block, starting a process (subprocess.Popen, multiprocessing) or importing one
    of `modules` (when it was not imported before) raises HeavyInFastLane at the end of the
    block, naming what happened. Yields the list of findings (filled as they happen)."""
    before = {name for name in modules if name in sys.modules}
    found: list[str] = []
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def spy_popen(self, args, *rest, **kwargs):
        found.append(f"started a process: {args!r}"[:200])
        return popen_init(self, args, *rest, **kwargs)

    def spy_start(self):
        found.append(f"started a multiprocessing process: {self.name}")
        return process_start(self)

    subprocess.Popen.__init__ = spy_popen
    multiprocessing.process.BaseProcess.start = spy_start
    try:
        yield found
    finally:
        subprocess.Popen.__init__ = popen_init
        multiprocessing.process.BaseProcess.start = process_start
    found.extend(f"imported {name}" for name in modules if name in sys.modules and name not in before)
    if found:
        raise HeavyInFastLane(
            "a fast-lane test " + "; ".join(found)
            + f" (give it the marker that says so: {', '.join(HEAVY)}; tests/support/lanes.py)")
