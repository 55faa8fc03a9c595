"""The project's documents hold what a user needs: nothing points at files outside the
repository, every link between them resolves to a file and a heading, every `orchestrator`
command they write parses, every file path, module name and test id written in the docs, the
code, the tests, the benches and the profiles names something that exists, the README's contents
match its headings, and it gives the CI command."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.cli import build_parser
from support import doc_links
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


def markdown() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_links_between_the_documents_resolve_to_a_file_and_a_heading():
    """Every relative link in the README and docs/ names a file that exists and, with an
    `#anchor`, a heading of that file (GitHub's anchors)."""
    docs = markdown()
    found = [link for doc in docs for link in doc_links.links(doc.read_text())]
    assert len(docs) >= 10 and len(found) >= 150   # count guard: the README's and the docs' links were read
    assert sum("#" in target for _, target in found) >= 60
    assert [bad for doc in docs for bad in doc_links.broken_links(REPO, doc)] == []


def test_the_link_check_names_a_missing_file_and_a_missing_heading():
    """The positive control: planted in the README's text, a missing file, a missing heading of
    another document and of the same one are named; live links, a link in a code span or a code
    block, and a web address are not."""
    planted = "\n".join([
        "# Planted", "",
        "[ok](docs/safety.md#the-stop-key) [gone](docs/nothing.md) [bad](docs/safety.md#no-such-rule)",
        "[self](#planted) [self bad](#nope) `[code](docs/nothing.md)` [web](https://example.org/#x)",
        "```", "[block](docs/nothing.md)", "```",
    ])
    assert doc_links.broken_links(REPO, REPO / "README.md", planted) == [
        "README.md:3: docs/nothing.md (no such file)", "README.md:3: docs/safety.md#no-such-rule (no such heading)",
        "README.md:4: #nope (no such heading)"]
    assert doc_links.anchors("# A `b`: c?\n## A b c\n```\n# not a heading\n```\n") == {"a-b-c", "a-b-c-1"}


def test_every_orchestrator_command_in_the_readme_and_docs_parses():
    """Every `orchestrator ...` command written in the README and docs/ is accepted by the
    command's own parser (`orchestrator.cli.build_parser`, options spelled out): a line of a code
    block as written, with its required arguments; a command in the prose by its verb and
    options. The README's quick start, campaign and rehearsal blocks are among them."""
    parser = doc_links.spelled_out(build_parser())
    commands = [(doc, *c) for doc in markdown() for c in doc_links.command_lines(doc.read_text())]
    readme = [c for c in commands if c[0].name == "README.md"]
    assert len(commands) >= 60 and len(readme) >= 20 and sum(whole for *_, whole in readme) >= 12   # count guard
    assert {args.split()[0] for _, _, args, _ in readme} >= {"demo", "validate", "run", "judge", "report", "export"}
    problems = [f"{doc.relative_to(REPO)}:{line}: orchestrator {args}: {problem}" for doc, line, args, whole in commands
                if (problem := doc_links.command_problem(parser, args, whole))]
    assert problems == []


def test_the_command_check_names_an_unknown_verb_option_or_missing_argument():
    """The positive control: planted command lines with an option `report` does not have, a
    verb that does not exist, a `run` without its `--rig`, an abbreviated option and, in the
    prose, an unknown option are each refused; their correct counterparts, a continued line and
    the documents' notation (`[--push]`, `A|B`, `...`) are not."""
    planted = "\n".join([
        "```bash",
        "uv run orchestrator report recordings/ab1 --colour red     # report has no --colour",
        "uv run orchestrator frobnicate x",
        "uv run --extra lerobot orchestrator run protocols/x.yaml --out r",
        "uv run orchestrator view recordings/ab1 --unblind",
        "uv run orchestrator report recordings/ab1 --format text|md --out r.md   # a comment",
        "uv run --extra lerobot orchestrator export recordings/ab1 --repo-id you/ab1 [--push] [--private]",
        "uv run orchestrator judge C --judge a \\", "    --web --port 8765",
        "```",
        "In prose: `orchestrator view --trial-number 3`, `orchestrator run ...`, `orchestrator judge CAMPAIGN --web`.",
    ])
    parser = doc_links.spelled_out(build_parser())
    checked = [(line, doc_links.command_problem(parser, args, whole)) for line, args, whole in doc_links.command_lines(planted)]
    assert [line for line, problem in checked if problem] == [2, 3, 4, 5, 11], checked
    assert len(checked) == 10 and "unrecognized arguments: --colour" in checked[0][1]
    assert "invalid choice: 'frobnicate'" in checked[1][1] and "required: --rig" in checked[2][1]


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


def test_the_readme_contents_match_its_sections_and_it_gives_the_ci_command():
    text = (REPO / "README.md").read_text()
    headings = {doc_links.anchor(h) for h in re.findall(r"^## (.+)$", text, re.M)}
    contents = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", text.split("## Contents", 1)[1].split("\n## ", 1)[0], re.M)
    assert len(contents) >= 10
    assert [c for c in contents if c not in headings] == []
    assert {"safety", "judging", "rehearsal-on-the-twin"} <= headings
    full = "uv run --all-extras pytest -n 3 --dist loadgroup -q"
    assert full in text and "uv run orchestrator demo" in text
    assert (REPO / ".ci" / "run").read_text().rstrip().splitlines()[-1] == full



def test_the_readme_is_a_guide_of_about_400_lines_at_most():
    """The README is a guide (what it is, quick start, a campaign, each topic in brief); the
    reference lives in docs/. A new feature adds a line or two to the README and its reference
    to the docs/ file of its topic (README "Further documentation" lists them)."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 420, f"README.md has {len(lines)} lines: move reference material to docs/"
    listed = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", (REPO / "README.md").read_text().split("## Further documentation")[1]))
    assert listed == {p.name for p in (REPO / "docs").glob("*.md")}   # every docs/ file is reachable from the README

CURRENT = ["figure", "value", "command", "commit", "machine"]


def current_figures(text: str) -> list[list[str]]:
    """The rows of the first table of docs/benchmarks.md, if it is the table of current figures
    (the columns of CURRENT) and comes before the history; else []."""
    first = re.search(r"^\|.*\|\n\|[-| ]+\|\n((?:\|.*\|\n)+)", text, re.M)
    history = text.find("\n## History\n")
    if not first or history < first.start():
        return []
    header = [c.strip() for c in first.group(0).splitlines()[0].strip("|").split("|")]
    rows = [[c.strip() for c in row.strip("|").split("|")] for row in first.group(1).splitlines()]
    return rows if header == CURRENT else []


def test_the_benchmarks_open_with_one_table_of_current_figures():
    """docs/benchmarks.md opens with one table of today's figures (figure, value, command,
    commit, machine), every cell filled and every command written out (or said to be unrecorded),
    and the history below a heading of its own. A table with a column left out, or after the
    history, is not it."""
    text = (REPO / "docs" / "benchmarks.md").read_text()
    rows = current_figures(text)
    assert len(rows) >= 15   # count guard: the table was found and read
    assert [row for row in rows if len(row) != len(CURRENT) or not all(row[:4])
            or not ("`" in row[2] or row[2].startswith("not recorded"))] == []
    assert {"the demo end to end", "the full suite", "the fast lane"} <= {r[0].split(" (")[0].split(",")[0] for r in rows}
    table = "| figure | value | command | commit | machine |\n|---|---|---|---|---|\n| x | 1 | `c` | `abc1234` | C |\n"
    assert current_figures(f"# B\n\n{table}\n## History\n") and not current_figures(f"# B\n\n## History\n\n{table}")
    assert not current_figures("# B\n\n" + table.replace("| machine ", "").replace("|---|---|---|---|---|", "|---|---|---|---|") + "\n## History\n")
