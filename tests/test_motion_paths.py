"""The arm moves outside an episode only through the one guarded motion (rigs/guarded_motion.py),
checked on the source as the architecture tests check imports.

Every way a goal can reach the arm is named here with the only places it may appear:
- `act` (a policy's action, one control step): the episode's control loop, and the simulated rig
  and the guarded motion's default (`Rig.move_along`), which hand it to the guarded loop;
- `send_action` and a `Goal_Position` write: inside the SO-101 adapter's `act` and `_write_goal`;
- `_write_goal`: the adapter's guarded motions (`go_to_rest`, `move_along`, which hand it to the
  guarded loop), its hold (`safe_stop`: goal := present) and its torque-on (`_resume_torque`: the
  same);
- `go_to_rest` and `move_along`: the runner's one stop path (`run/motion.py`, `ArmMotion`: the
  move to rest, the reset's motions, the jaws opened at the table before a move to rest), the
  simulated rig's `place_cube` (which sets the arm at rest as it builds the scene) and the twin's start.
A reference (a call, or the method handed on) anywhere else is a way around the guard. The
positive controls plant such references and the check must name each."""

from __future__ import annotations

import ast

from support.repo import REPO
from support.sources import tree as source_tree

PACKAGE = REPO / "orchestrator"

# name -> {(module path, enclosing function)} where it may be referenced; "*" any function
ALLOWED: dict[str, set[tuple[str, str]]] = {
    # (the twin's `TwinArm.act` is another thing: the MuJoCo actuator ids its servo loops drive)
    "act": {("orchestrator/run/control_loop.py", "*"), ("orchestrator/rigs/base.py", "move_along"),
            ("orchestrator/rigs/twin/arm.py", "*")},
    "send_action": {("orchestrator/rigs/so101/rig.py", "act"), ("orchestrator/rigs/so101/rig.py", "_write_goal")},
    "_write_goal": {("orchestrator/rigs/so101/rig.py", f) for f in ("go_to_rest", "move_along", "safe_stop",
                                                                    "_resume_torque")},
    "go_to_rest": {("orchestrator/run/motion.py", "to_rest"), ("orchestrator/rigs/sim.py", "place_cube"),
                   ("orchestrator/rigs/twin/server.py", "_power_on")},
    "move_along": {("orchestrator/run/motion.py", "follow"), ("orchestrator/run/motion.py", "_open_at_the_table")},
}
GOAL_WRITE = "Goal_Position"   # a `sync_write`/`write` whose first argument names it
GOAL_WRITERS = {("orchestrator/rigs/so101/rig.py", "_write_goal")}


def _references(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(name, enclosing function, line) of every attribute reference to a name of `ALLOWED`, and
    of every `*.write(...)`/`*.sync_write(...)` whose first argument is "Goal_Position" (as GOAL_WRITE)."""
    out: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Attribute) and node.attr in ALLOWED:
            out.append((node.attr, function, node.lineno))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("sync_write", "write") and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == GOAL_WRITE):
            out.append((GOAL_WRITE, function, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return out


def ways_around(sources: dict[str, str]) -> list[str]:
    """`path:line: name in function` for every reference outside its allowed places."""
    bad = []
    for path, text in sources.items():
        for name, function, line in _references(source_tree(text)):
            allowed = GOAL_WRITERS if name == GOAL_WRITE else ALLOWED[name]
            if (path, function) not in allowed and (path, "*") not in allowed:
                bad.append(f"{path}:{line}: {name} in {function}")
    return sorted(bad)


def _sources() -> dict[str, str]:
    return {str(p.relative_to(REPO)): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_arm_moves_outside_an_episode_only_through_the_guarded_motion():
    sources = _sources()
    assert len(sources) > 100
    assert ways_around(sources) == []
    # the check reads the real paths: each allowed place is there (a stale list guards nothing)
    found = {(path, name, function) for path, text in sources.items() for name, function, _ in _references(source_tree(text))}
    for name, places in {**ALLOWED, GOAL_WRITE: GOAL_WRITERS}.items():
        for path, function in places:
            assert any(p == path and n == name and function in ("*", f) for p, n, f in found), (name, path, function)


def test_positive_control_a_planted_way_around_is_named():
    planted = {
        "orchestrator/run/reset.py": "def carry(rig, target):\n    rig.act(target)\n",
        "orchestrator/run/sequential.py": "def home(rig):\n    return rig.go_to_rest\n",
        "orchestrator/rigs/so101/rig.py": ("class R:\n    def nudge(self, goal):\n"
                                           "        self.robot.bus.sync_write('Goal_Position', goal)\n"
                                           "        self._write_goal(goal)\n"
                                           "    def _write_goal(self, goal):\n"
                                           "        self.robot.bus.sync_write('Goal_Position', goal)\n"),
        "orchestrator/commands/demo.py": "def wave(rig, path):\n    rig.move_along(path, 30)\n",
    }
    assert ways_around(planted) == [
        "orchestrator/commands/demo.py:2: move_along in wave",
        "orchestrator/rigs/so101/rig.py:3: Goal_Position in nudge",
        "orchestrator/rigs/so101/rig.py:4: _write_goal in nudge",
        "orchestrator/run/reset.py:2: act in carry",
        "orchestrator/run/sequential.py:2: go_to_rest in home",
    ]
