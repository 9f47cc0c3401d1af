"""The import graph, read from the source (every import: function bodies and
`TYPE_CHECKING` blocks included). Dependencies point one way, down the
layers of docs/architecture.md:

    core ← graphs ← sessions_app ← assistants_app ← turns_app ← langgraph_app ← agentsite

* `core` is the shared library (errors, SQL rows, database threads, the HTTP
  edge); `graphs` the graphs and their runtime; `agentsite` wiring only
  (settings, urls, routing, ASGI, the API root, start-up): nothing imports it.
* An app reaches a lower app through its public modules (services,
  selectors, …), never its models, outside the admin and migrations; the
  wiring may reach any module.
* No two modules import each other, even through a chain.
* No module is over 400 lines.

`python tests/test_architecture.py` prints the graph between packages.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("core", "graphs", "sessions_app", "assistants_app", "turns_app", "langgraph_app", "agentsite")
PACKAGES = frozenset(LAYERS)
# What the project package may hold: wiring, nothing any app imports.
WIRING = {
    "__init__",
    "settings",
    "urls",
    "routing",
    "asgi",
    "api",
    "openapi",
    "metrics",
    "pages",
    "startup",
    "cli",
    "graceful_stop",
}
# The modules of an app that the layers above it may import. Models, the
# admin and the app's internal steps stay behind these.
PUBLIC = {
    "sessions_app": {"services", "selectors", "schemas", "auth", "signals", "admin"},
    "assistants_app": {"services", "selectors", "admin"},
    # native_json: LangGraph values as JSON, one form for what the graph step
    # logs and what the Agent Protocol answers.
    # graph_input: how a turn's request becomes graph input, which the
    # protocol's history applies again to show a run's input state.
    "turns_app": {
        "services",
        "selectors",
        "schemas",
        "types",
        "events",
        "execution",
        "native_json",
        "graph_input",
        "admin",
        # faults: the crash tests' fault points, which the protocol's
        # thread search has one of (a read that outlives its client).
        "faults",
    },
}
MAX_LINES = 400


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(root: Path = ROOT) -> list[Path]:
    return sorted(p for pkg in LAYERS if (root / pkg).is_dir() for p in (root / pkg).rglob("*.py"))


def imports(path: Path, root: Path = ROOT) -> list[str]:
    """Every name `path` imports, wherever the statement is, as a dotted path
    (`from a import b` gives `a.b`; relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: list[str] = []
    for item in ast.walk(tree):
        if isinstance(item, ast.Import):
            found.extend(alias.name for alias in item.names)
        elif isinstance(item, ast.ImportFrom):
            base = item.module or ""
            if item.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (item.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            found.extend(f"{base}.{alias.name}" for alias in item.names)
    return found


def module_edges(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the project modules it imports: the module a name is, or
    else the module it is defined in."""
    known = {module_name(p, root) for p in sources(root)}
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sources(root):
        source = module_name(path, root)
        for target in imports(path, root):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != source:
                edges[source].add(target)
    return edges


def layer(module: str) -> str | None:
    top = module.partition(".")[0]
    return top if top in PACKAGES else None


def test_dependencies_point_down_the_layers():
    wrong = []
    for source, targets in module_edges().items():
        for target in targets:
            a, b = layer(source), layer(target)
            if a and b and a != b and LAYERS.index(b) > LAYERS.index(a):
                wrong.append(f"{source} -> {target}")
    assert wrong == []
    # The layers do use each other (a vacuous graph would pass the above).
    used = {(layer(s), layer(t)) for s, ts in module_edges().items() for t in ts}
    assert {("graphs", "core"), ("turns_app", "sessions_app"), ("langgraph_app", "turns_app")} <= used


def test_agentsite_holds_wiring_only():
    names = {p.relative_to(ROOT / "agentsite").with_suffix("").as_posix() for p in (ROOT / "agentsite").rglob("*.py")}
    assert names <= WIRING, names - WIRING


def test_apps_use_each_others_public_modules_not_their_models():
    offenders = []
    for source, targets in module_edges().items():
        parts = source.split(".")
        if parts[0] == "agentsite" or {"admin", "migrations", "management"} & set(parts):
            continue
        for target in targets:
            app, _, rest = target.partition(".")
            if app in PUBLIC and layer(source) != app and rest and rest.split(".")[0] not in PUBLIC[app]:
                offenders.append(f"{source} -> {target}")
    assert offenders == []


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module: each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
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
                circles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    assert strongly_connected(module_edges()) == []


def test_no_module_is_over_400_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in sources()
        if "migrations" not in p.parts and (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_checks_see_function_local_type_checking_and_relative_imports(tmp_path, monkeypatch):
    """A function-local, a TYPE_CHECKING-only or a relative import dodging a
    circle or a layer is still an edge."""
    for pkg in ("sessions_app", "turns_app"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "turns_app" / "models.py").write_text("from sessions_app import x\n")
    (tmp_path / "sessions_app" / "x.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import y\n"
        "def f():\n    from turns_app.models import AgentTurn\n"
    )
    (tmp_path / "sessions_app" / "y.py").write_text("from .x import f\n")
    edges = module_edges(tmp_path)
    assert edges["sessions_app.x"] == {"turns_app.models", "sessions_app.y"}
    assert edges["turns_app.models"] == {"sessions_app.x"}
    assert strongly_connected(edges) == [["sessions_app.x", "sessions_app.y", "turns_app.models"]]


if __name__ == "__main__":
    between: dict[tuple[str, str], int] = defaultdict(int)
    for s, ts in module_edges().items():
        for t in ts:
            if layer(s) != layer(t):
                between[(layer(s) or "?", layer(t) or "?")] += 1
    for (a, b), n in sorted(between.items(), key=lambda kv: (LAYERS.index(kv[0][0]), LAYERS.index(kv[0][1]))):
        print(f"{a:14} -> {b:14} ({n} imports)")
