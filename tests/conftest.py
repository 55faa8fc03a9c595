"""Shared fixtures: running the CLI in-process, and a self-contained copy of the shipped
simulated protocol in a temporary folder. Plain helpers live in `tests/support/`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# As .ci/run does: many tests start `orchestrator` (or the twin) in a fresh process that imports
# torch, LeRobot or MuJoCo; where PYTHONDONTWRITEBYTECODE is set nothing is cached and each such
# process compiles them from source again (21 s instead of 7.6 s on the 2-core machine). The
# first import writes the caches into .venv, so `uv run --all-extras pytest` run directly is as
# fast as CI's run.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from support import lanes, pilot_idle
from support.cli import CliResult, run_module  # noqa: F401  (re-exported for older imports)
from support.repo import GRID20, LOCATED, REPO, SIM_PROTOCOL, line_of, sim_protocol_text  # noqa: F401
from support.requires import require_module


def pytest_sessionstart(session):
    """Warm the one-time caches that libraries build on their first use in a new HOME, before any
    test runs, so a fast-lane test that first imports such a library is not taken for starting a
    process (the heavy guard below). The caches warmed, by name (tests/support/lanes.py,
    `warm_library_caches`): matplotlib's font cache (built with `fc-list` on a machine where
    matplotlib has never run)."""
    lanes.warm_library_caches()


def pytest_configure(config):
    """Make `--dist loadgroup` group the real-time tests under pytest 9.2 (`lanes.XdistGroupIds`)."""
    config.pluginmanager.register(lanes.XdistGroupIds(), "xdist-group-ids")
    pilot_idle.shorten_idle_wait()


def pytest_ignore_collect(collection_path, config):
    """A file whose every test the `-m` expression deselects is not imported at all, so a lane
    runs where another lane's extras are not installed (`-m "not lerobot"` on a core install)."""
    markexpr = config.getoption("markexpr", "")
    markers = lanes.markers_of_file(collection_path.name)
    if markexpr and markers is not None and collection_path.suffix == ".py":
        if lanes.deselects_file(markexpr, markers):
            return True
    return None


class RequiringModule(pytest.Module):
    """A test file whose lane needs an extra (`lanes.requirements_of`): checked before the file
    is imported, so a missing one fails collection with the command that installs it."""

    def collect(self):
        for name in lanes.requirements_of(self.path.name):
            require_module(name)
        return super().collect()


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    if lanes.requirements_of(module_path.name):
        return RequiringModule.from_parent(parent, path=module_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The lanes (tests/support/lanes.py): each file's markers, the markers a fixture implies,
    `fast` for every test left with no heavy marker, and the real-time tests' xdist group (first,
    so that pytest-xdist's own hook, which reads the group marks, sees them)."""
    for item in items:
        # A file not in the table stays out of the fast lane (tests/test_lanes.py fails, naming it).
        markers = lanes.markers_of_file(item.path.name)
        if markers is None:
            markers = lanes.UNLISTED
        for fixture, implied in lanes.FIXTURE_MARKERS.items():
            if fixture in item.fixturenames:
                markers += implied
        for name in dict.fromkeys(markers):
            item.add_marker(name)
        group = lanes.xdist_group_of(item.path.name, markers, item.get_closest_marker(lanes.OFF_CLOCK) is not None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if not any(item.get_closest_marker(name) for name in lanes.HEAVY):
            item.add_marker(lanes.FAST)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker(lanes.FAST) is None:
        return (yield)
    with lanes.heavy_guard():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if item.get_closest_marker(lanes.FAST) is None:
        return (yield)
    with lanes.heavy_guard():
        return (yield)


@pytest.fixture
def cli(capsys):
    """Run `orchestrator.cli.main(argv)` in-process; returns a CliResult (code, out, err)."""
    from orchestrator.cli import main

    def run(*argv: str | os.PathLike) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def protocol_dir(tmp_path) -> Path:
    """A folder with `protocol.yaml` (the sim demo) and its `layout.yaml` (grid20)."""
    (tmp_path / "protocol.yaml").write_text(sim_protocol_text())
    (tmp_path / "layout.yaml").write_text(GRID20.read_text())
    return tmp_path


@pytest.fixture(scope="session")
def pg_cluster():
    """A private PostgreSQL server for the whole test session (tests/support/postgres.py);
    missing PostgreSQL fails with the install line, never skips."""
    from support.postgres import PgCluster

    try:
        cluster = PgCluster()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        cluster.start()
    except RuntimeError as exc:
        cluster.stop()
        pytest.fail(str(exc), pytrace=False)
    yield cluster
    cluster.stop()


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A folder `name` that `build(folder)` fills once for the whole run: under pytest-xdist the
    workers share the parent of their temporary folders, and the first worker to take the lock
    builds while the other waits, then reuses it (each worker built the tiny checkpoints itself
    before, a fresh interpreter importing LeRobot's policies each time). The tests read what is
    built, or copy it beside their protocol; none writes into it."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def saved_acts(tmp_path_factory) -> dict[str, Path]:
    """The tiny ACT checkpoints of the fresh-process tests (support/act.py `SAVED_ACT_CAMERAS`:
    `sim` for hardware/sim.yaml's cameras, `twin` for the twin tests'), saved once by one separate
    interpreter; a test copies the one it needs beside its protocol."""
    from support.act import SAVED_ACT_CAMERAS, save_acts_in_subprocess

    root = built_once(tmp_path_factory, "saved_acts", lambda root: save_acts_in_subprocess(
        {root / name: cameras for name, cameras in SAVED_ACT_CAMERAS.items()}))
    return {name: root / name for name in SAVED_ACT_CAMERAS}


@pytest.fixture(scope="session")
def saved_vla(tmp_path_factory) -> Path:
    """A tiny SmolVLA (support/vla.py) for the twin tests' cameras, saved by a separate interpreter."""
    from support.act import TWIN_CAMERA
    from support.vla import save_vla_in_subprocess

    root = built_once(tmp_path_factory, "saved_vla", lambda root: save_vla_in_subprocess(
        root / "vla", {"front": TWIN_CAMERA, "wrist": TWIN_CAMERA}))
    return root / "vla"


@pytest.fixture(scope="session")
def tiny_reference(tmp_path_factory) -> Path:
    """The tiny protocol run once on SQLite by a fresh process, one episode at a time: the
    single-station reference the shared-store tests compare outcomes with."""
    from support.tiny import PROTOCOL, RIG

    local = tmp_path_factory.mktemp("reference") / "campaign"
    done = run_module("run", PROTOCOL, "--rig", RIG, "--out", local, "--workers", "1", timeout=400)
    assert done.code == 0, done.err
    return local


@pytest.fixture(scope="session")
def tiny_resumed(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny protocol run in this process in two sessions, one episode at a time: 2 trials,
    stopped, then resumed to its end (`resumed`); `first` is a copy taken between the sessions.
    Built once for the run (`built_once`: about a second of CPU, and test_report_timing.py and
    test_ladder_campaign.py each ran the same campaign); the tests read both, or copy them."""
    import shutil

    from support.tiny import run_cli

    def build(folder: Path) -> None:
        assert run_cli(folder / "camp", "--workers", "1", "--stop-after", "2") == 0
        shutil.copytree(folder / "camp", folder / "first")
        assert run_cli(folder / "camp", "--workers", "1") == 0

    folder = built_once(tmp_path_factory, "tiny_resumed", build)
    return folder / "camp", folder / "first"


@pytest.fixture(scope="module")
def hf_env(tmp_path_factory):
    """Offline Hugging Face with its caches in a temporary folder, no token (for the export
    tests; before LeRobot is imported). Yields the folder."""
    home = tmp_path_factory.mktemp("hf")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HOME", str(home / "hf"))
        mp.setenv("HF_LEROBOT_HOME", str(home / "lerobot"))
        mp.delenv("HF_TOKEN", raising=False)
        yield home
