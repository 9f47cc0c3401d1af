"""One front door for errors (core.http.errors): no other module builds an
error body or registers an exception handler, so a new edge cannot start a
renderer of its own — it has to go through `render` / `install`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from core.http import errors
from tests.test_architecture import ROOT, sources

FRONT_DOOR = ROOT / "core" / "http" / "errors.py"
# Calls that build (or used to build) an error body.
RENDERERS = frozenset({"as_dict", "body_of", "error_body", "encoded"})


def _key(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def is_error_body(node: ast.Dict) -> bool:
    """/api/'s `{"error": {…}}` (or `{"error", "message"}`, the protocol's
    failed run) and the protocol's `{"detail", "code"}`."""
    keys = {_key(k): v for k, v in zip(node.keys, node.values, strict=True)}
    if "jsonrpc" in keys:
        # JSON-RPC 2.0's own envelope (MCP's, and its OpenAPI schema), whose
        # `data` carries the front door's rendering (langgraph_app.mcp_server).
        return False
    if "error" in keys and (isinstance(keys["error"], ast.Dict) or "message" in keys):
        return True
    return {"detail", "code"} <= set(keys)


def offences(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Dict) and is_error_body(node):
            found.append(f"{where} an error body")
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
            if name in RENDERERS:
                found.append(f"{where} {name}()")
        elif isinstance(node, ast.Attribute) and node.attr in {"exception_handler", "add_exception_handler"}:
            found.append(f"{where} .{node.attr}")
    return found


def test_no_module_but_the_front_door_renders_an_error():
    found = [o for p in sources() if p != FRONT_DOOR and "migrations" not in p.parts for o in offences(p)]
    assert found == []


def test_the_check_sees_each_kind_of_renderer(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'a = {"error": {"code": c, "message": m}}\n'
        'b = {"detail": m, "code": c}\n'
        'c = {"error": code, "message": m}\n'
        "d = error.as_dict()\n"
        "@api.exception_handler(Exception)\ndef f(request, exc): ...\n"
        # Not error bodies: a task's empty error slot, a stored turn's error.
        'e = {"id": 1, "error": None}\nf = {"turn_id": t, "error": turn.error}\n'
        'g = {"jsonrpc": "2.0", "id": i, "error": {"code": -32600, "message": m, "data": rendered.body}}\n'
    )
    found = sorted(offences(sample, tmp_path), key=lambda o: int(o.split(":")[1].split(" ")[0]))
    assert [o.split(" ", 1)[1] for o in found] == [
        "an error body",
        "an error body",
        "an error body",
        "as_dict()",
        ".exception_handler",
    ]


@pytest.mark.parametrize("module", ["agentsite.api", "langgraph_app.api"])
def test_both_ninja_apis_answer_errors_through_the_front_door(module):
    ninja_api = importlib.import_module(module).api
    handlers = [ninja_api._exception_handlers[cls] for cls in errors.HANDLED]
    assert {(h.__module__, h.__qualname__) for h in handlers} == {("core.http.errors", "install.<locals>.handle")}
