"""A LangGraph project's `langgraph.json` as a configuration source beside
the environment (docs/configuration.md, "langgraph.json"), and the
`AGENT_GRAPHS` setting both feed. Read by agentsite.settings before any
other setting, since its `env` may set them.

Served keys: `graphs` (a name -> `./path/to/file.py:attr` relative to the
file, or `module.path:attr`), `env` (a mapping, or a `.env` file relative to
the file; the process environment wins), `dependencies` (local folders put
on the import path; packages must be installed already), `auth.path` (as
AGENT_AUTH_PATH), `store` (`store.index`, `store.ttl`) and `checkpointer.ttl`
(core.store_config),
`http.app` (as AGENT_HTTP_APP: langgraph_app.custom_app). Keys that only
`langgraph build` reads are accepted and do nothing here. Any other key
stops the start-up with one line naming it, never ignored."""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from collections.abc import MutableMapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from core.store_config import apply_checkpointer, apply_store, refuse_unsupported

SERVED = frozenset({"graphs", "env", "dependencies", "auth", "store", "http", "checkpointer"})
# Read by `langgraph build` / `langgraph dockerfile` for the image they make.
BUILD_ONLY = frozenset(
    {
        "$schema",
        "python_version",
        "pip_config_file",
        "pip_installer",
        "dockerfile_lines",
        "base_image",
        "image_distro",
        "keep_pkg_tools",
    }
)
# What each unserved key asks for, as the refusal names it.
NOT_YET = {
    "node_version": "node_version (JavaScript graphs)",
    "ui": "ui (generative UI components)",
    "webhooks": "webhooks",
    "encryption": "encryption",
}
# langgraph-api's `http` switches that agentsite serves only at their
# default: false turns nothing off, so it is accepted; true is refused.
HTTP_OFF_SWITCHES = frozenset(
    {
        "disable_assistants",
        "disable_threads",
        "disable_runs",
        "disable_store",
        "disable_meta",
        "disable_webhooks",
        "disable_ui",
        "disable_mcp",
        "disable_a2a",
        "disable_event_streaming",
        "enable_custom_route_auth",
    }
)
HTTP_REASONS = {
    "cors": "http.cors (set LANGGRAPH_CORS_ALLOWED_ORIGINS)",
    "mount_prefix": "http.mount_prefix (the protocol is served at /langgraph/)",
}
FILE_MAX_BYTES = 1024 * 1024
GRAPH_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
REQUIREMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def check_graph_entry(where: str, graph: str, path: str) -> None:
    module, colon, attribute = path.partition(":")
    if not (colon and module and attribute):
        raise ImproperlyConfigured(f"{where}: {graph}={path!r} must read module.path:attribute or ./file.py:attribute")
    if not GRAPH_NAME.fullmatch(graph):
        raise ImproperlyConfigured(f"{where}: {graph!r} is not a graph name (letters, digits, _ and -)")


def env_graphs(name: str, raw: str) -> dict[str, str]:
    """`name=module.path:attribute,…` -> {name: "module.path:attribute"}."""
    graphs: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        graph, eq, path = (x.strip() for x in item.partition("="))
        if not eq:
            raise ImproperlyConfigured(f"{name}: {item!r} must read name=module.path:attribute")
        check_graph_entry(name, graph, path)
        if graph in graphs:
            raise ImproperlyConfigured(f"{name} names {graph!r} twice")
        graphs[graph] = path
    return graphs


def project_file(environ: MutableMapping[str, str], cwd: Path) -> Path | None:
    """AGENT_LANGGRAPH_JSON, else ./langgraph.json if there is one."""
    named = environ.get("AGENT_LANGGRAPH_JSON")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ImproperlyConfigured(f"AGENT_LANGGRAPH_JSON={named!r}: no such file")
        return path.resolve()
    found = cwd / "langgraph.json"
    return found.resolve() if found.is_file() else None


def _read(path: Path) -> dict:
    if path.stat().st_size > FILE_MAX_BYTES:
        raise ImproperlyConfigured(f"{path}: over {FILE_MAX_BYTES} bytes; is it a langgraph.json?")
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImproperlyConfigured(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f"{path}: must hold a JSON object")
    return data


def _env_file(path: Path, where: str) -> dict[str, str]:
    if not path.is_file():
        raise ImproperlyConfigured(f"{where}: env file {path} does not exist")
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = ENV_LINE.match(line)
        if match is None:
            raise ImproperlyConfigured(f"{path}:{number}: not NAME=value")
        name, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def _apply_env(spec: object, base: Path, where: str, environ: MutableMapping[str, str]) -> None:
    if isinstance(spec, str):
        values = _env_file((base / spec).resolve(), where)
    elif isinstance(spec, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in spec.items()):
        values = dict(spec)
    else:
        raise ImproperlyConfigured(f"{where}: env must be a .env file's path or an object of strings")
    for name, value in values.items():
        environ.setdefault(name, value)  # the process environment wins


def _auth(spec: object, base: Path, where: str, environ: MutableMapping[str, str]) -> None:
    """auth.path becomes AGENT_AUTH_PATH (unless that is set); the other
    auth keys are not served yet."""
    if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
        raise ImproperlyConfigured(f"{where}: auth must be an object with a path")
    refuse_unsupported(where, spec, ("path",), "auth.")
    target, colon, attribute = spec["path"].rpartition(":")
    if colon and (target.endswith(".py") or "/" in target):
        environ.setdefault("AGENT_AUTH_PATH", f"{(base / target).resolve()}:{attribute}")
    else:
        environ.setdefault("AGENT_AUTH_PATH", spec["path"])


def _http(spec: object, base: Path, where: str, environ: MutableMapping[str, str]) -> None:
    """http.app becomes AGENT_HTTP_APP (unless that is set), a file path
    made absolute. The switches are served at their defaults only."""
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where}: http must be an object")
    on = {k: f"http.{k} (served as false only)" for k in HTTP_OFF_SWITCHES & set(spec) if spec[k] is not False}
    if spec.get("middleware_order", "middleware_first") != "middleware_first":
        # auth_first: the app's middleware inside the auth, not around it.
        on["middleware_order"] = "http.middleware_order (served as middleware_first only)"
    served = (HTTP_OFF_SWITCHES | {"app", "middleware_order"}) - set(on)
    refuse_unsupported(where, spec, served, "http.", on | HTTP_REASONS)
    app = spec.get("app")
    if app is None:
        return
    if not isinstance(app, str) or ":" not in app.strip(":"):
        raise ImproperlyConfigured(f"{where}: http.app must read ./path/to/file.py:attribute or module.path:attribute")
    javascript = "http.app is a JavaScript app; agentsite serves a Python (Starlette) app"
    environ.setdefault("AGENT_HTTP_APP", _python_entry(app, base, f"{where}: http.app", f"{where}: {javascript}"))


def _python_entry(entry: str, base: Path, label: str, javascript: str) -> str:
    """`path:attribute` with a file path made absolute against the project's
    folder (`module:attribute` as it is); `javascript` is the refusal of a
    JavaScript file, `label` names the entry when the file is missing."""
    target, _, attribute = entry.rpartition(":")
    if target.endswith((".ts", ".js", ".mts", ".cts", ".mjs", ".cjs")):
        raise ImproperlyConfigured(javascript)
    if not (target.endswith(".py") or "/" in target):
        return entry
    file = (base / target).resolve()
    if not file.is_file():
        raise ImproperlyConfigured(f"{label}: {file} does not exist")
    return f"{file}:{attribute}"


def _dependencies(spec: object, base: Path, where: str) -> None:
    if not isinstance(spec, list) or not all(isinstance(d, str) for d in spec):
        raise ImproperlyConfigured(f"{where}: dependencies must be a list of strings")
    for entry in spec:
        if entry.startswith((".", "/")):
            folder = (base / entry).resolve()
            if not folder.is_dir():
                raise ImproperlyConfigured(f"{where}: dependency {entry!r} is not a folder")
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))
            continue
        match = REQUIREMENT_NAME.match(entry)
        try:
            importlib.metadata.distribution(match.group(0) if match else entry)
        except importlib.metadata.PackageNotFoundError:
            raise ImproperlyConfigured(
                f"{where}: dependency {entry!r} is not installed (agentsite installs nothing: pip install it)"
            ) from None


def _graphs(spec: object, base: Path, where: str) -> dict[str, str]:
    if not isinstance(spec, dict) or not spec:
        raise ImproperlyConfigured(f"{where}: graphs must be an object of name -> path:attribute")
    graphs: dict[str, str] = {}
    for name, entry in spec.items():
        if isinstance(entry, dict) and set(entry) <= {"path", "description"} and isinstance(entry.get("path"), str):
            entry = entry["path"]
        if not isinstance(entry, str):
            raise ImproperlyConfigured(f"{where}: graphs.{name} must be a path:attribute string")
        check_graph_entry(f"{where}: graphs", name, entry)
        javascript = f"{where}: graphs.{name} is a JavaScript graph; agentsite runs Python graphs"
        graphs[name] = _python_entry(entry, base, f"{where}: graphs.{name}", javascript)
    return graphs


def load_project(path: Path, environ: MutableMapping[str, str]) -> dict[str, str]:
    """The graphs `path` registers; its env applied to `environ` and its
    local dependencies put on the import path first."""
    data = _read(path)
    where = str(path)
    refuse_unsupported(where, data, SERVED | BUILD_ONLY, reasons=NOT_YET)
    if "env" in data:
        _apply_env(data["env"], path.parent, where, environ)
    if "auth" in data:
        _auth(data["auth"], path.parent, where, environ)
    if "store" in data:
        apply_store(data["store"], path.parent, where, environ)
    if "checkpointer" in data:
        apply_checkpointer(data["checkpointer"], where, environ)
    if "http" in data:
        _http(data["http"], path.parent, where, environ)
    if "dependencies" in data:
        _dependencies(data["dependencies"], path.parent, where)
    return _graphs(data.get("graphs"), path.parent, where)


def project_graphs(environ: MutableMapping[str, str], cwd: Path, default: str) -> tuple[dict[str, str], str | None]:
    """The registered graphs (the project file's, with AGENT_GRAPHS's when it
    is set too; else AGENT_GRAPHS or `default`) and the project's first graph."""
    path = project_file(environ, cwd)
    if path is None:
        return env_graphs("AGENT_GRAPHS", environ.get("AGENT_GRAPHS") or default), None
    graphs = load_project(path, environ)
    extra = env_graphs("AGENT_GRAPHS", environ.get("AGENT_GRAPHS") or "")
    both = sorted(set(graphs) & set(extra))
    if both:
        raise ImproperlyConfigured(f"AGENT_GRAPHS and {path} both name {', '.join(both)}")
    return {**graphs, **extra}, next(iter(graphs))
