"""The docs stay true: every error code a client can receive is in the error
table of docs/api.md, every setting the server reads from the environment is
in the table of docs/configuration.md. Codes come from core/errors.py and from the string
literals the apps pass as an error code (a turn aborted by the server, not by
a request)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from core.errors import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
APPS = ("core", "graphs", "agentsite", "sessions_app", "turns_app", "langgraph_app")


def app_modules() -> list[ast.Module]:
    return [ast.parse(path.read_text(), str(path)) for app in APPS for path in (ROOT / app).rglob("*.py")]


def positional_code_arguments(modules: list[ast.Module]) -> dict[str, set[int]]:
    """Functions of the apps that take an error code positionally, by name,
    with the index of `code` among a call's arguments (`self`/`cls` are not
    passed): e.g. raw_error(431, "headers_too_large", …)."""
    found: dict[str, set[int]] = {}
    for module in modules:
        for function in ast.walk(module):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [a.arg for a in function.args.posonlyargs + function.args.args]
                if names[:1] in (["self"], ["cls"]):
                    names = names[1:]
                if "code" in names:
                    found.setdefault(function.name, set()).add(names.index("code"))
    return found


def literal_codes() -> set[str]:
    """String literals passed as `code=…`, or where a function of the apps
    takes its code positionally, anywhere in the apps, e.g.
    turn_abort(code="server_restarted")."""
    modules = app_modules()
    positional = positional_code_arguments(modules)
    found: set[str] = set()
    for module in modules:
        for call in ast.walk(module):
            if not isinstance(call, ast.Call):
                continue
            values = [k.value for k in call.keywords if k.arg == "code"]
            name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
            values += [call.args[i] for i in positional.get(name, ()) if i < len(call.args)]
            found |= {v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value}
    return found


def proxy_codes() -> set[str]:
    """Codes the nginx in front of the app answers with itself."""
    text = (ROOT / "deploy" / "nginx" / "agentsite.conf.template").read_text()
    return set(re.findall(r'"code": "(\w+)"', text))


def doc_table(doc: str, after: str) -> str:
    """The first Markdown table in docs/`doc` at or after the text `after`."""
    text = (ROOT / "docs" / doc).read_text()
    table = re.search(r"(^\|.*\|\n)+", text[text.index(after) :], re.MULTILINE)
    assert table, f"docs/{doc}'s table after {after!r} is gone"
    return table.group(0)


def error_table() -> str:
    return doc_table("api.md", "**Errors** are always")


def test_every_error_code_is_in_the_api_docs_error_table():
    codes = {str(code) for code in ErrorCode} | literal_codes() | proxy_codes()
    table = error_table()
    missing = sorted(code for code in codes if f"`{code}`" not in table)
    assert missing == []


def test_the_scan_finds_codes_services_pass_as_strings():
    # Guards the scan itself: these two are written as literals or members,
    # and whichever way they are written, they must be collected.
    codes = {str(code) for code in ErrorCode} | literal_codes()
    assert {"server_restarted", "lease_expired", "session_busy"} <= codes
    assert {"payload_too_large", "server_unavailable"} <= proxy_codes()


def test_the_scan_reads_literal_codes_by_keyword_and_by_position():
    # Without ErrorCode's help: a literal code that is no member must still
    # reach the check against the table.
    assert {"server_restarted", "stale_turn"} <= literal_codes()  # code="…"
    assert {"headers_too_large", "payload_too_large", "request_timeout"} <= literal_codes()  # raw_error(status, "…", …)


def environment_settings() -> set[str]:
    """Every variable settings.py reads: env_*("NAME", …) helpers and
    os.environ lookups."""
    text = (ROOT / "agentsite" / "settings.py").read_text()
    return set(re.findall(r'(?:env_\w+\(\s*|os\.environ\.get\(|os\.environ\[)"([A-Z][A-Z0-9_]+)"', text))


def test_every_environment_setting_is_in_the_configuration_table():
    names = environment_settings()
    assert {"DATABASE_URL", "AGENT_MAX_BODY_BYTES", "LOG_FORMAT"} <= names  # the scan works
    first_cells = {row.split("|")[1] for row in doc_table("configuration.md", "| `DATABASE_URL` |").splitlines()}
    documented = {name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}
    assert sorted(names - documented) == []
