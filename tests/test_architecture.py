"""The packages' import graph, read from the source (every import, function
bodies included): dependencies point one way,

    agentsite (library) ← sessions_app ← turns_app ← agentsite (wiring)

and apps use each other's services, not each other's models. `python
tests/test_architecture.py` prints the graph."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agentsite", "sessions_app", "turns_app")
# The project package's wiring: it may import the apps; nothing imports it back.
WIRING = {"settings", "urls", "routing", "asgi", "api", "startup", "cli", "graceful_stop"}

LIBRARY, WIRING_NODE = "agentsite (library)", "agentsite (wiring)"
ALLOWED = {
    ("sessions_app", LIBRARY),
    ("turns_app", LIBRARY),
    ("turns_app", "sessions_app"),
    (WIRING_NODE, LIBRARY),
    (WIRING_NODE, "sessions_app"),
    (WIRING_NODE, "turns_app"),
}


def node(module: str) -> str | None:
    top, _, rest = module.partition(".")
    if top not in PACKAGES:
        return None
    if top == "agentsite":
        return WIRING_NODE if rest.split(".")[0] in WIRING else LIBRARY
    return top


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of import nodes under `if TYPE_CHECKING:` (annotations, not dependencies)."""
    skipped: set[int] = set()
    for branch in ast.walk(tree):
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test):
            skipped.update(id(n) for stmt in branch.body for n in ast.walk(stmt))
    return skipped


def imports(path: Path) -> list[str]:
    """Every module `path` imports, wherever the import statement is."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_only(tree)
    found = []
    for item in ast.walk(tree):
        if id(item) in skipped:
            continue
        if isinstance(item, ast.Import):
            found.extend(alias.name for alias in item.names)
        elif isinstance(item, ast.ImportFrom) and item.module and item.level == 0:
            found.append(item.module)
            found.extend(f"{item.module}.{alias.name}" for alias in item.names)
    return found


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def graph() -> dict[tuple[str, str], set[str]]:
    """(importer node, imported node) -> the modules behind that edge."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in sources():
        source = module_name(path)
        for target in imports(path):
            a, b = node(source), node(target)
            if a and b and a != b:
                edges[(a, b)].add(f"{source} -> {target}")
    return edges


def has_cycle(edges) -> bool:
    nodes = {n for edge in edges for n in edge}
    out = defaultdict(set)
    for a, b in edges:
        out[a].add(b)
    state: dict[str, int] = {}

    def visit(n: str) -> bool:
        state[n] = 1
        for m in out[n]:
            if state.get(m) == 1 or (m not in state and visit(m)):
                return True
        state[n] = 2
        return False

    return any(n not in state and visit(n) for n in nodes)


def test_the_import_graph_points_one_way():
    edges = graph()
    unexpected = {edge: sorted(why) for edge, why in edges.items() if edge not in ALLOWED}
    assert not unexpected, unexpected
    assert not has_cycle(edges)
    # The layers do use each other (a vacuous graph would pass the above).
    assert {("turns_app", "sessions_app"), ("sessions_app", LIBRARY), (WIRING_NODE, "turns_app")} <= set(edges)


def test_turns_app_uses_sessions_through_services_not_models():
    """Outside the admin (which registers the session model) and type hints,
    turns_app reaches sessions through sessions_app's services and selectors."""
    offenders = []
    for path in sorted((ROOT / "turns_app").rglob("*.py")):
        if {"admin", "migrations"} & set(path.relative_to(ROOT).parts):
            continue
        offenders += [
            f"{module_name(path)} imports {name}"
            for name in imports(path)
            if name.startswith("sessions_app.models")
        ]
    assert offenders == []


def test_the_check_sees_function_local_imports(tmp_path, monkeypatch):
    """A function-local import dodging a cycle is still an edge."""
    fake = tmp_path / "sessions_app" / "x.py"
    fake.parent.mkdir()
    fake.write_text("def f():\n    from turns_app.models import AgentTurn\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert imports(fake) == ["turns_app.models", "turns_app.models.AgentTurn"]
    assert ("sessions_app", "turns_app") in graph()


if __name__ == "__main__":
    for (a, b), why in sorted(graph().items()):
        print(f"{a:22} -> {b:22} ({len(why)} imports)")
