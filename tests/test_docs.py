"""The project's documents hold what a user needs: nothing points at files outside the
repository, every link between them resolves, every file path, module name and test id written
in the docs, the code, the tests, the benches and the profiles names something that exists, the
README's contents match its headings, and it gives the CI command."""

from __future__ import annotations

import re
from pathlib import Path

from support.pointers import scanned, stale
from support.repo import REPO

# Written outside this repository: a pointer to them is a pointer a user cannot follow.
OUTSIDE = re.compile(r"DESIGN(\.md| section)|\.\./shared|shared/(DESIGN|reference|seeds)|\bseeds/\d")


def documents() -> list:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "orchestrator").rglob("*.py"))]


def test_nothing_points_outside_the_repository():
    files = documents()
    assert len(files) > 100   # count guard: the package's modules and the docs were read
    found = [f"{p.relative_to(REPO)}:{n}: {line.strip()}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert found == []
    assert OUTSIDE.search("as DESIGN section 4 says") and OUTSIDE.search("see ../shared/x")   # the pattern bites


def test_links_between_the_documents_resolve():
    links = []
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if not re.match(r"[a-z]+://", target):
                links.append((doc, target))
    assert len(links) >= 8
    assert [f"{d.name} -> {t}" for d, t in links if not (d.parent / t).exists()] == []


def test_every_path_module_and_test_named_in_the_text_exists():
    files = [p for p in scanned(REPO) if p != Path(__file__)]   # this file plants stale pointers below
    assert len(files) > 300 and {p.suffix for p in files} >= {".md", ".py", ".yaml", ".sh", ".js"}   # count guard
    assert [s for p in files for s in stale(REPO, p)] == []


def test_the_pointer_check_names_each_kind_of_stale_pointer():
    """The positive control: planted in a module's text, a moved file, a module that is gone, a
    name a module does not define, a stage-relative path, a stage-dotted name and a test that
    does not exist are each named; their live counterparts are not."""
    planted = "\n".join([
        "see orchestrator/sim/twin/faults.py and orchestrator/store/chain.py",
        "the store (orchestrator.pgstore), orchestrator.store.chain.verify, orchestrator.store.chain.nothing_here",
        "run/kinematics.py beside run/motion.py",
        "`store.pgroles`, `store.chain`, `rigs.twin.client.Twin`, `sim.twin.client.Twin`",
        "tests/test_store.py::test_no_such_test and tests/test_docs.py::test_the_pointer_check_names_each_kind_of_stale_pointer",
        "the report's schema \"orchestrator.report/1\" and tests/FILE.py (a placeholder)",
    ])
    found = [s.split(": ", 1)[1] for s in stale(REPO, REPO / "orchestrator" / "cli.py", planted)]
    assert found == ["orchestrator/sim/twin/faults.py", "orchestrator.pgstore", "orchestrator.store.chain.nothing_here",
                     "run/kinematics.py", "store.pgroles", "sim.twin.client.Twin",
                     "tests/test_store.py::test_no_such_test"]


# A review's or a tracker's numbering means nothing to a reader of the code (no changelog here).
TRACKER = re.compile(r"\b(issue|finding)s? #?\d+|\bdef test_(finding\d|seed_\d{3})", re.I)


def test_no_text_names_an_issue_or_a_finding_by_number():
    files = [p for p in scanned(REPO) if p != Path(__file__)]
    assert len(files) > 300
    found = [f"{p.relative_to(REPO)}:{n}" for p in files
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if TRACKER.search(line)]
    assert found == []
    for planted in ("as issue 22 item 3 says", "(issue #15)", "finding 4", "def test_finding4_stop():",
                    "def test_seed_002_numbers():"):
        assert TRACKER.search(planted), planted
    assert not TRACKER.search("def test_seed_and_step_need_a_method(): the issue is the seed")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_contents_match_its_sections_and_it_gives_the_ci_command():
    text = (REPO / "README.md").read_text()
    headings = {anchor(h) for h in re.findall(r"^## (.+)$", text, re.M)}
    contents = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", text.split("## Contents", 1)[1].split("\n## ", 1)[0], re.M)
    assert len(contents) >= 10
    assert [c for c in contents if c not in headings] == []
    assert {"safety", "judging", "rehearsal-on-the-twin"} <= headings
    full = "uv run --all-extras pytest -n 2 --dist loadgroup -q"
    assert full in text and "uv run orchestrator demo" in text
    assert (REPO / ".ci" / "run").read_text().rstrip().splitlines()[-1] == full
