"""The shape of the code (the developer guide's rules, checked): no module in `orchestrator/`
over 500 lines, no function over 60 lines unless a `# long-function: NAME: why` note stands directly
above it (a note covers only the function under it), no import cycle between the package's modules, and imports only downward through the
stages a campaign goes through (`STAGES`). Lazy imports inside functions count too: they are
dependencies all the same."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support import sources
from support.repo import REPO

PACKAGE = REPO / "orchestrator"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules `name` imports (anywhere in the file)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in sources.walk(path):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            candidates = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        # a module importing its own parent package is not a dependency on its siblings
        found |= {c for c in candidates if c in known and c != name and not name.startswith(c + ".")}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in modules().values()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def unnoted_long_functions(text: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[int, str, int]]:
    """(line, name, length) of every function over `limit` lines whose own note is missing: the
    comment lines directly above it (above its decorators) must hold `# long-function: NAME:`
    followed by a reason. A note elsewhere in the file covers nothing, not even a function of
    the same name."""
    source = text.splitlines()
    out = []
    for node in sources.nodes(text):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        length = node.end_lineno - node.lineno + 1
        if length <= limit:
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1   # 0-based
        above = []
        while first > 0 and source[first - 1].strip().startswith("#"):
            first -= 1
            above.insert(0, source[first].strip())
        note = " ".join(above)
        if not re.search(rf"# long-function: {re.escape(node.name)}: \S", note):
            out.append((node.lineno, node.name, length))
    return out


def test_no_function_over_60_lines_without_its_own_note():
    long = [f"{path.relative_to(REPO)}:{line}: {name} ({n} lines)" for path in modules().values()
            for line, name, n in unnoted_long_functions(path.read_text())]
    assert long == [], f"functions over {MAX_FUNCTION_LINES} lines (split them, or say why in a '# long-function: NAME: why' note" \
        " directly above each):\n" + "\n".join(long)
    # The positive control: a note above one `run` does not cover another `run` of the file.
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    planted = f"class A:\n    # long-function: run: why\n    def run(self):\n{body}\n\n\nclass B:\n    def run(self):\n{body}\n"
    assert [name for _, name, _ in unnoted_long_functions(planted)] == ["run"]
    assert unnoted_long_functions(planted)[0][0] == planted.splitlines().index("    def run(self):", 3) + 1


# Edges left out of the graph, each with why (none today: the pgstore -> pgroles edge was broken
# by moving the blind view's server objects to `pgblind`, which imports no server module).
NOTED_EDGES: set[tuple[str, str]] = set()


def package_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package modules it imports (`imports_of`)."""
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def test_no_import_cycle():
    graph = {name: {d for d in deps if (name, d) not in NOTED_EDGES} for name, deps in package_graph().items()}
    assert cycles(graph) == []


# The packages in the order a campaign flows through them; a module may import its own stage and
# the stages before it, never one after it. `core` is what every stage uses (errors, atomic
# writes, YAML with line numbers, the progress bar); `cli` and `__main__` sit above everything.
STAGES = ("core", "design", "store", "sim", "vision", "rigs", "policies", "run", "judging", "analysis", "export",
          "commands", "cli")


def stage_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:          # the package itself (orchestrator/__init__.py)
        return -1
    top = "cli" if parts[1] == "__main__" else parts[1]
    assert top in STAGES, f"{module}: top-level module or package not in a stage (add it to STAGES or move it)"
    return STAGES.index(top)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, deps in graph.items() for b in deps if stage_of(b) > stage_of(a))


def test_imports_only_downward_through_the_stages():
    graph = package_graph()
    assert sum(len(d) for d in graph.values()) > 200     # the graph was read (not vacuously empty)
    assert upward_imports(graph) == []


def test_the_rigs_outside_the_twin_never_import_it():
    """The twin builds on the simulated rig and the SO-101 adapter; they reach it only through the
    hooks of `rigs/extensions.py` (imported by name), never by an import."""
    graph = package_graph()
    twin = "orchestrator.rigs.twin"
    inside = [name for name in graph if name.startswith(twin)]
    assert len(inside) > 10 and any(d.startswith("orchestrator.rigs.so101") for n in inside for d in graph[n])
    assert sorted(f"{a} -> {b}" for a, deps in graph.items() if a.startswith("orchestrator.rigs")
                  and not a.startswith(twin) for b in deps if b.startswith(twin)) == []


def test_the_twin_registers_its_section_check_and_camera_through_the_hooks():
    from orchestrator.rigs import extensions

    assert extensions.section_check("twin") is not None and extensions.camera_config("twin") is not None
    assert extensions.section_check("no_such_section") is None


def test_every_top_level_module_belongs_to_a_stage():
    tops = {name.split(".")[1] for name in modules() if "." in name}
    assert tops - {"__main__"} == set(STAGES), tops ^ set(STAGES)


def test_the_stage_check_finds_an_upward_import():
    graph = {"orchestrator.design.protocol": {"orchestrator.run.campaign"},
             "orchestrator.run.campaign": {"orchestrator.design.protocol"}}
    assert upward_imports(graph) == ["orchestrator.design.protocol -> orchestrator.run.campaign"]


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


# Where YAML text may be parsed: the protocol and layout (design/protocol.py), the rig profile
# (rigs/profile.py), and the blinding scanner's list of policy names and paths
# (judging/blinding.py: it must read any text, valid or not). (core/yamlsrc.py composes nodes.)
YAML_PARSERS = {"orchestrator/design/protocol.py", "orchestrator/rigs/profile.py", "orchestrator/judging/blinding.py"}
YAML_LOAD = re.compile(r"\byaml\.(safe_)?load\(")


def yaml_loads_outside(root: Path, allowed: set[str]) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted((root / "orchestrator").rglob("*.py"))
            if YAML_LOAD.search(p.read_text()) and str(p.relative_to(root)) not in allowed]


def test_every_protocol_fact_is_read_from_the_protocol_model(tmp_path):
    """No module re-reads the protocol's YAML with defaults of its own; the positive control: a
    planted module that does is named."""
    assert yaml_loads_outside(REPO, YAML_PARSERS) == []
    assert len([p for p in YAML_PARSERS if YAML_LOAD.search((REPO / p).read_text())]) == 3   # the rule sees them
    planted = tmp_path / "orchestrator" / "judging" / "facts.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("import yaml\nheight = (yaml.safe_load(text) or {}).get('min_height_m', 0.04)\n")
    assert yaml_loads_outside(tmp_path, YAML_PARSERS) == [str(planted.relative_to(tmp_path))]
