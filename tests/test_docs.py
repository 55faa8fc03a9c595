"""The project's documents hold what a user needs: nothing points at files outside the
repository, every link between them resolves, the README's contents match its headings, and it
gives the CI command."""

from __future__ import annotations

import re

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
