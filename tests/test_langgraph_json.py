"""A LangGraph project's langgraph.json as a configuration source
(docs/configuration.md, "langgraph.json"): its graphs registered by file or
module, its env loaded under the process environment, every key it does
not serve refused at start-up in one line naming it. A project written for
`langgraph dev` — a graph factory by file, reading its env and its run
config — runs under a real daphne, driven by the LangGraph SDK."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from langgraph_sdk import get_client

from core.langgraph_json import project_file, project_graphs
from core.store_config import index_setting, thread_ttl_setting
from langgraph_app.custom_app import custom_app
from tests.fixtures.databases import run
from tests.test_startup_errors import assert_refused

DEFAULT = "intake=graphs.intake.graph:build_intake_graph"
GRAPH = '''
import os

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    text: str


def make_graph(config: RunnableConfig):
    """Greets whoever config["configurable"] names, in its env's words."""
    who = (config.get("configurable") or {}).get("who", "nobody")

    def greet(state: State) -> State:
        return {"text": f"{os.environ['GREETING']}, {who}: {state.get('text', '')}"}

    builder = StateGraph(State)
    builder.add_node("greet", greet)
    builder.add_edge(START, "greet")
    builder.add_edge("greet", END)
    return builder.compile()
'''


def project(tmp_path: Path, **config) -> Path:
    (tmp_path / "src" / "agent").mkdir(parents=True, exist_ok=True)
    (tmp_path / "src" / "agent" / "graph.py").write_text(GRAPH)
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"greeter": "./src/agent/graph.py:make_graph"}, **config}))
    return path


def test_graphs_by_file_and_module_env_under_the_process_environment(tmp_path):
    (tmp_path / ".env").write_text("# a comment\nexport FROM_FILE='one'\nBOTH=file\n")
    path = project(tmp_path, env=".env", dependencies=["./src"], python_version="3.11")
    data = json.loads(path.read_text())
    data["graphs"]["intake"] = "graphs.intake.graph:build_intake_graph"
    path.write_text(json.dumps(data))
    environ = {"AGENT_LANGGRAPH_JSON": str(path), "BOTH": "process"}
    graphs, first = project_graphs(environ, Path("/"), DEFAULT)
    assert graphs == {
        "greeter": f"{tmp_path / 'src' / 'agent' / 'graph.py'}:make_graph",
        "intake": "graphs.intake.graph:build_intake_graph",
    }
    assert first == "greeter"
    assert (environ["FROM_FILE"], environ["BOTH"]) == ("one", "process")

    path.write_text(json.dumps({**data, "env": {"GREETING": "hi", "BOTH": "json"}}))
    environ = {"BOTH": "process", "AGENT_GRAPHS": "booking=graphs.booking.graph:build_booking_graph"}
    graphs, _ = project_graphs(environ, tmp_path, DEFAULT)  # ./langgraph.json found in the working directory
    assert set(graphs) == {"greeter", "intake", "booking"}  # AGENT_GRAPHS keeps working beside it
    assert (environ["GREETING"], environ["BOTH"]) == ("hi", "process")
    assert project_graphs({}, tmp_path / "src", DEFAULT) == ({"intake": DEFAULT.partition("=")[2]}, None)


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ({"auth": {"path": "./auth.py:auth", "disable_studio_auth": True}}, "auth.disable_studio_auth"),
        ({"store": {"index": {"dims": 8}}}, "store.index.embed must name"),
        ({"store": {"index": {"embed": "a.b:c", "dims": 0}}}, "store.index.dims must be"),
        ({"store": {"index": {"embed": "a.b:c", "dims": 8, "fields": "text"}}}, "store.index.fields must be"),
        ({"store": {"index": {"embed": "a.b:c", "dims": 8, "distance_type": "l2"}}}, "store.index.distance_type"),
        ({"store": {"path": "./store.py:store"}}, "store.path (a custom store"),
        ({"store": {"ttl": {"default_ttl": "soon"}}}, "store.ttl.default_ttl must be"),
        ({"store": {"ttl": {"sweep_limit": 5}}}, "store.ttl.sweep_limit"),
        ({"http": {"app": "./app.py:app"}}, "http.app: "),
        ({"http": {"app": "./webapp.js:app"}}, "JavaScript app"),
        ({"http": {"app": "webapp"}}, "http.app must read"),
        (
            {"http": {"disable_runs": True, "cors": {}}},
            "http.cors (set LANGGRAPH_CORS_ALLOWED_ORIGINS), http.disable_runs",
        ),
        ({"http": {"middleware_order": "auth_first"}}, "http.middleware_order (served as middleware_first only)"),
        ({"http": {"mount_prefix": "/x", "configurable_headers": {}}}, "http.configurable_headers, http.mount_prefix"),
        ({"checkpointer": {"ttl": {}}, "telemetry": True}, "not supported by agentsite (yet): telemetry"),
        ({"checkpointer": {"backend": "mongo", "serde": {}}}, "checkpointer.backend, checkpointer.serde"),
        ({"checkpointer": {"ttl": {"strategy": "archive"}}}, "checkpointer.ttl.strategy must be"),
        ({"checkpointer": {"ttl": {"sweep_limit": 0}}}, "checkpointer.ttl.sweep_limit must be"),
        ({"checkpointer": {"ttl": {"default_ttl": "1d"}}}, "checkpointer.ttl.default_ttl must be"),
        ({"env": ["A=1"]}, "env must be"),
        ({"env": "./missing.env"}, "does not exist"),
        ({"dependencies": ["surely-not-installed-package-xyz"]}, "is not installed"),
        ({"dependencies": ["./nowhere"]}, "is not a folder"),
        ({"graphs": {"js": "./src/agent/graph.ts:graph"}}, "JavaScript"),
        ({"graphs": {"bad name": "x:y"}}, "not a graph name"),
        ({"graphs": {"lost": "./src/agent/gone.py:graph"}}, "does not exist"),
        ({"graphs": {"greeter": "graphs.intake.graph"}}, "module.path:attribute"),
        ({"graphs": {}}, "graphs must be"),
    ],
)
def test_what_it_does_not_serve_is_refused_naming_it(tmp_path, extra, fragment):
    path = project(tmp_path, **extra)
    with pytest.raises(ImproperlyConfigured) as refused:
        project_graphs({"AGENT_LANGGRAPH_JSON": str(path)}, tmp_path, DEFAULT)
    message = str(refused.value)
    assert fragment in message and "\n" not in message, message


def test_a_named_file_that_is_not_there_or_a_clash_is_refused(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="no such file"):
        project_file({"AGENT_LANGGRAPH_JSON": str(tmp_path / "nope.json")}, tmp_path)
    path = project(tmp_path)
    with pytest.raises(ImproperlyConfigured, match="both name greeter"):
        project_graphs({"AGENT_LANGGRAPH_JSON": str(path), "AGENT_GRAPHS": "greeter=a.b:c"}, tmp_path, DEFAULT)
    path.write_text("{not json")
    with pytest.raises(ImproperlyConfigured, match="not JSON"):
        project_graphs({"AGENT_LANGGRAPH_JSON": str(path)}, tmp_path, DEFAULT)


def test_the_server_refuses_to_start_in_one_line(tmp_path):
    path = project(tmp_path, ui={}, webhooks={})
    result = run(["manage.py", "check"], f"sqlite:///{tmp_path / 'db.sqlite3'}", AGENT_LANGGRAPH_JSON=str(path))
    assert_refused(result, "not supported by agentsite (yet): ui (generative UI components), webhooks")


def test_store_index_and_ttl_become_the_store_settings(tmp_path):
    index = {"embed": "./emb.py:embed", "dims": 16, "fields": ["text", "tags[*]"]}
    ttl = {"default_ttl": 90, "refresh_on_read": False, "sweep_interval_minutes": 5}
    path = project(tmp_path, store={"index": index, "ttl": ttl})
    environ = {"AGENT_LANGGRAPH_JSON": str(path), "AGENT_STORE_SWEEP_INTERVAL_MINUTES": "7"}
    project_graphs(environ, tmp_path, DEFAULT)
    assert json.loads(environ["AGENT_STORE_INDEX"]) == {**index, "embed": f"{tmp_path / 'emb.py'}:embed"}
    assert environ["AGENT_STORE_DEFAULT_TTL_MINUTES"] == "90"
    assert environ["AGENT_STORE_REFRESH_ON_READ"] == "false"
    assert environ["AGENT_STORE_SWEEP_INTERVAL_MINUTES"] == "7"  # the environment wins
    assert index_setting(environ["AGENT_STORE_INDEX"])["dims"] == 16
    assert index_setting("") is None
    with pytest.raises(ImproperlyConfigured, match="AGENT_STORE_INDEX must be a JSON object"):
        index_setting("dims=8")


def test_checkpointer_ttl_becomes_the_thread_ttl_settings(tmp_path):
    ttl = {"strategy": "keep_latest", "default_ttl": 43200, "sweep_interval_minutes": 60, "sweep_limit": 100}
    path = project(tmp_path, checkpointer={"ttl": ttl})
    environ = {"AGENT_LANGGRAPH_JSON": str(path)}
    project_graphs(environ, tmp_path, DEFAULT)
    assert thread_ttl_setting(environ["AGENT_THREAD_TTL"]) == ttl
    path = project(tmp_path, checkpointer={"ttl": {"default_ttl": 60}})
    environ = {"AGENT_LANGGRAPH_JSON": str(path), "AGENT_THREAD_TTL": "5"}
    project_graphs(environ, tmp_path, DEFAULT)
    assert environ["AGENT_THREAD_TTL"] == "5"  # the environment wins; as LANGGRAPH_THREAD_TTL, minutes
    assert thread_ttl_setting("5") == {
        "strategy": "delete",
        "default_ttl": 5,
        "sweep_interval_minutes": 0,
        "sweep_limit": 500,
    }
    assert thread_ttl_setting("")["default_ttl"] == 0
    with pytest.raises(ImproperlyConfigured, match="AGENT_THREAD_TTL must be minutes or a JSON object"):
        thread_ttl_setting("soon")


def test_auth_path_is_agent_auth_path_relative_to_the_file(tmp_path):
    path = project(tmp_path, auth={"path": "./src/auth.py:auth"})
    environ = {"AGENT_LANGGRAPH_JSON": str(path)}
    project_graphs(environ, tmp_path, DEFAULT)
    assert environ["AGENT_AUTH_PATH"] == f"{tmp_path / 'src' / 'auth.py'}:auth"
    environ = {"AGENT_LANGGRAPH_JSON": str(path), "AGENT_AUTH_PATH": "mine:auth"}
    project_graphs(environ, tmp_path, DEFAULT)
    assert environ["AGENT_AUTH_PATH"] == "mine:auth"  # the environment wins


def test_http_app_is_agent_http_app_relative_to_the_file(tmp_path):
    (tmp_path / "webapp.py").write_text("")
    off = {"disable_assistants": False, "enable_custom_route_auth": False, "middleware_order": "middleware_first"}
    path = project(tmp_path, http={"app": "./webapp.py:app", **off})
    environ = {"AGENT_LANGGRAPH_JSON": str(path)}
    project_graphs(environ, tmp_path, DEFAULT)
    assert environ["AGENT_HTTP_APP"] == f"{tmp_path / 'webapp.py'}:app"
    path = project(tmp_path, http={"app": "mine.webapp:app"})
    environ = {"AGENT_LANGGRAPH_JSON": str(path)}
    project_graphs(environ, tmp_path, DEFAULT)
    assert environ["AGENT_HTTP_APP"] == "mine.webapp:app"


@pytest.mark.parametrize(
    "source, fragment",
    [
        ("app = object()", "is not a Starlette or FastAPI application but object"),
        ("", "the module has no 'app'"),
        ("import no_such_module_xyz", "cannot be imported: ModuleNotFoundError"),
    ],
)
def test_an_http_app_that_is_no_starlette_app_is_refused(settings, tmp_path, source, fragment):
    (tmp_path / "webapp.py").write_text(source)
    settings.AGENT_HTTP_APP = f"{tmp_path / 'webapp.py'}:app"
    custom_app.cache_clear()
    try:
        with pytest.raises(ImproperlyConfigured, match=re.escape(fragment)):
            custom_app()
    finally:
        custom_app.cache_clear()


@pytest.mark.system
@pytest.mark.django_db(transaction=True)
async def test_a_langgraph_dev_project_runs_unchanged(servers, alice, tmp_path):
    path = project(tmp_path, env={"GREETING": "Ahoy"})
    server = servers(AGENT_LANGGRAPH_JSON=str(path), AGENT_GRAPHS="")
    client = get_client(url=f"{server.url}/langgraph", api_key=alice)
    async with asyncio.timeout(90):
        assert {a["graph_id"] for a in await client.assistants.search()} == {"greeter"}
        assistant = await client.assistants.create(graph_id="greeter", config={"configurable": {"who": "Ada"}})
        thread = await client.threads.create()
        values: Any = await client.runs.wait(thread["thread_id"], assistant["assistant_id"], input={"text": "hi"})
        assert values["text"] == "Ahoy, Ada: hi"
        values = await client.runs.wait(thread["thread_id"], "greeter", input={"text": "again"})
        assert values["text"] == "Ahoy, nobody: again"
        schemas = await client.assistants.get_schemas("greeter")
        assert "text" in schemas["input_schema"]["properties"]
