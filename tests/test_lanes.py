"""The test lanes (tests/support/lanes.py): every test file is in the table exactly once, the
markers are the registered ones, collecting the fast files imports no torch, and the guard that
fails a fast test which starts a process or imports torch does catch both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections import Counter

import pytest

from support import lanes
from support.repo import REPO

TESTS = REPO / "tests"


def test_every_test_file_is_in_exactly_one_row_of_the_lane_table():
    listed = Counter(name for name, _ in lanes.FILE_MARKERS)
    assert [name for name, count in listed.items() if count > 1] == []
    on_disk = {p.name for p in TESTS.glob("test_*.py")}
    assert sorted(on_disk - set(listed)) == [], "add these files to FILE_MARKERS in tests/support/lanes.py"
    assert sorted(set(listed) - on_disk) == [], "these rows name files that no longer exist"


def test_the_lanes_are_the_registered_markers():
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.split(":", 1)[0].strip() for line in options["markers"]}
    assert registered == {lanes.FAST, *lanes.HEAVY, lanes.OFF_CLOCK}
    used = {m for _, markers in lanes.FILE_MARKERS for m in markers}
    used |= {m for implied in lanes.FIXTURE_MARKERS.values() for m in implied}
    assert used <= set(lanes.HEAVY)   # `fast` is never listed: it is what is left over


def test_this_test_is_in_the_fast_lane(request):
    """The conftest hook applied the lanes: a test of a file with no markers is `fast` and
    carries no heavy marker."""
    assert request.node.get_closest_marker(lanes.FAST) is not None
    assert [m for m in lanes.HEAVY if request.node.get_closest_marker(m)] == []


def test_the_guard_fails_a_fast_test_that_imports_a_heavy_module(tmp_path, monkeypatch):
    (tmp_path / "heavy_canary_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "heavy_canary_module", raising=False)
    with pytest.raises(lanes.HeavyInFastLane, match="imported heavy_canary_module"):
        with lanes.heavy_guard(modules=("heavy_canary_module",)):
            __import__("heavy_canary_module")
    with lanes.heavy_guard(modules=("heavy_canary_module",)):   # already imported: not new
        __import__("heavy_canary_module")


@pytest.mark.subprocess
def test_the_guard_fails_a_fast_test_that_starts_a_process():
    with pytest.raises(lanes.HeavyInFastLane, match="started a process: \\['true'\\]"):
        with lanes.heavy_guard(modules=()):
            subprocess.run(["true"], check=True)
    with lanes.heavy_guard(modules=()):   # nothing started, nothing found
        sum(range(10))


PROBE = """
import importlib, os, sys
sys.path.insert(0, {tests!r})
os.chdir({tests!r})
importlib.import_module("conftest")
for name in sys.argv[1:]:
    importlib.import_module(name)
print(sorted(m for m in ("torch", "transformers", "diffusers") if m in sys.modules))
"""


def _heavy_modules_after_importing(*modules: str) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE.format(tests=str(TESTS)), *modules],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.subprocess
def test_collecting_the_fast_files_imports_no_torch():
    fast_files = [name.removesuffix(".py") for name, markers in lanes.FILE_MARKERS if not markers]
    assert len(fast_files) >= 30   # count guard: the probe imports every fast file
    assert _heavy_modules_after_importing(*fast_files) == "[]"
    # Positive control: the same probe sees torch when a module imports it.
    assert "torch" in _heavy_modules_after_importing("torch")


@pytest.mark.subprocess
def test_the_fast_lane_holds_no_test_with_a_heavy_marker():
    """What `-m fast` selects (collected by pytest itself): many tests, none from a file with
    markers and none that carries a heavy marker of its own."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "--collect-only", "-q", "-p",
                          "no:cacheprovider"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert len(ids) >= 300, out.stdout[-1000:]
    heavy_files = {name for name, markers in lanes.FILE_MARKERS if markers}
    assert [i for i in ids if i.split("::")[0].removeprefix("tests/") in heavy_files] == []
    assert not any("test_the_guard_fails_a_fast_test_that_starts_a_process" in i for i in ids)


# A core install, imitated: a sitecustomize that makes the extras' packages unimportable (as if
# `uv sync` had installed no extra).
NO_EXTRAS = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""
EXTRAS = ("lerobot", "torch", "psycopg", "grpc", "rerun", "transformers", "diffusers")


def _collect_without_extras(tmp_path, markexpr: str):
    (tmp_path / "sitecustomize.py").write_text(NO_EXTRAS.format(blocked=EXTRAS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-m", markexpr, "--collect-only", "-q", "-p",
                           "no:cacheprovider"], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


def test_a_file_is_deselected_only_when_no_test_of_it_can_be_selected():
    assert lanes.deselects_file("not lerobot", ("twin", "lerobot"))
    assert lanes.deselects_file("fast", ("subprocess",))
    assert not lanes.deselects_file("not lerobot", ())
    assert not lanes.deselects_file("slow", ("lerobot",))      # a test of it may carry `slow` itself
    assert not lanes.deselects_file("fast", ())
    assert lanes.requirements_of("test_twin_safety.py") == ("lerobot",)
    assert lanes.requirements_of("test_remote_policy.py") == ("lerobot", "grpc")
    assert lanes.requirements_of("test_stats.py") == ()


@pytest.mark.subprocess
def test_the_lanes_without_extras_collect_where_no_extra_is_installed(tmp_path):
    """`-m "not lerobot and not twin and not postgres"` on a core install: every other file is
    collected, none fails to import; the positive control: `-m lerobot` there fails at
    collection with the command that installs the extras, and the blocker really blocks."""
    out = _collect_without_extras(tmp_path, "not lerobot and not twin and not postgres")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert len(ids) >= 400, out.stdout[-1000:]
    assert not any(i.split("::")[0].endswith(("test_twin_safety.py", "test_pg_store.py")) for i in ids)
    wanting = _collect_without_extras(tmp_path, "lerobot")
    assert wanting.returncode != 0
    assert "lerobot is not installed" in wanting.stdout and "uv sync --all-extras" in wanting.stdout
    assert "Traceback" not in wanting.stdout


FONT_TEST = """
from support import lanes

def test_first_matplotlib_import(tmp_path):
    with lanes.heavy_guard(modules=()):
        import matplotlib.font_manager  # noqa: F401
"""


@pytest.mark.subprocess
def test_a_library_cache_built_on_a_fresh_home_is_not_taken_for_a_test_starting_a_process(tmp_path):
    """On a machine where matplotlib never ran, its first import runs `fc-list` to build the font
    cache. The session hook builds it before any test (`lanes.warm_library_caches`), so a fast test
    that imports matplotlib passes in a new, empty HOME. Positive control: the same import under
    the guard, without the session hook's warm-up, is caught as starting `fc-list`."""
    if shutil.which("fc-list") is None:
        pytest.fail("fc-list is missing: apt-get install fontconfig (matplotlib's font cache uses it)")
    suite = tmp_path / "suite"
    shutil.copytree(TESTS / "support", suite / "support")
    shutil.copy(TESTS / "conftest.py", suite / "conftest.py")
    (suite / "test_font.py").write_text(FONT_TEST)

    def run(home_name: str, *args: str) -> subprocess.CompletedProcess:
        home = tmp_path / home_name
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME")}
        env["HOME"] = str(home)
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                               str(suite), *args, str(suite / "test_font.py")],
                              capture_output=True, text=True, timeout=300, cwd=suite, env=env)

    warmed = run("home_warmed")
    assert warmed.returncode == 0, warmed.stdout[-2000:]
    assert "1 passed" in warmed.stdout
    assert list((tmp_path / "home_warmed").glob(".cache/matplotlib/fontlist-*.json")), "the hook built no cache"
    cold = subprocess.run([sys.executable, "-c", (
        f"import sys; sys.path.insert(0, {str(suite)!r})\n"
        "from support import lanes\n"
        "try:\n"
        "    with lanes.heavy_guard(modules=()):\n"
        "        import matplotlib.font_manager\n"
        "except lanes.HeavyInFastLane as e:\n"
        "    print('CAUGHT', e)\n")],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "HOME": str(tmp_path / "home_cold")})
    assert "CAUGHT" in cold.stdout and "fc-list" in cold.stdout, cold.stdout[-2000:] + cold.stderr[-2000:]


def test_the_real_time_tests_share_one_xdist_group(request):
    """Every twin file and the listed real-time files are in the `realtime` group (run one after
    another on one worker under `--dist loadgroup`); a pure file is in none."""
    grouped = [name for name, markers in lanes.FILE_MARKERS if lanes.xdist_group_of(name, markers)]
    twins = [name for name, markers in lanes.FILE_MARKERS if "twin" in markers]
    assert len(twins) >= 10 and set(twins) <= set(grouped)
    assert lanes.REALTIME_FILES <= set(grouped) and lanes.GROUP_SAMPLE in grouped
    assert lanes.xdist_group_of("test_rest_move.py", ()) is None   # a simulated clock: out of the group
    assert lanes.xdist_group_of("test_stats.py", ()) is None
    assert lanes.xdist_group_of("test_rtc.py", ("twin",), off_clock=True) is None
    # the conftest hook applied it: this pure test carries no group, a twin test would
    assert request.node.get_closest_marker("xdist_group") is None


def test_every_twin_file_carries_the_subprocess_marker():
    """The twin is a process of its own (`rigs/twin/client.start_twin` starts it): a file that
    drives it starts a process, and says so."""
    twin_files = [name for name, markers in lanes.FILE_MARKERS if "twin" in markers]
    assert len(twin_files) >= 12
    assert [name for name, markers in lanes.FILE_MARKERS if "twin" in markers and "subprocess" not in markers] == []
