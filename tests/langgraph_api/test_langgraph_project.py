"""A whole LangGraph project directory (tests/fixtures/projects/basic: its
langgraph.json, .env, graph, auth.py and Starlette webapp.py, written as
for `langgraph dev`) served unchanged by a real daphne with
AGENT_LANGGRAPH_JSON pointing at it, driven by the unmodified LangGraph SDK
(docs/configuration.md, "langgraph.json" and "Custom routes"). One server
for the module, on a database of its own."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from agentsite.cli import EXIT_REFUSED
from tests.fixtures.databases import ROOT
from tests.fixtures.own_server import server_on_own_database
from tests.system.server import STARTUP_SECONDS, Server

pytestmark = pytest.mark.system

PROJECT = ROOT / "tests" / "fixtures" / "projects" / "basic"
TEST_SECONDS = 90
MAX_BODY = 64 * 1024
ADA = {"Authorization": "Bearer ada-token"}
BOB = {"Authorization": "Bearer bob-token"}


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("langgraph-project")
    env = {
        "AGENT_LANGGRAPH_JSON": str(PROJECT / "langgraph.json"),
        "AGENT_GRAPHS": "",
        "AGENT_MAX_BODY_BYTES": str(MAX_BODY),
    }
    with server_on_own_database(folder, owner="project", env=env) as (server, _):
        yield server.url


async def test_the_apps_routes_are_served_beside_the_protocol(url):
    async with asyncio.timeout(TEST_SECONDS), httpx.AsyncClient(base_url=f"{url}/langgraph", timeout=30) as http:
        # Its own route, reached as at a server's root; its lifespan ran
        # (the state it yielded, the .env it read) and its middleware too.
        hello = await http.post("/hello/ada", json={"a": 1})
        assert hello.status_code == 200, hello.text
        assert hello.json() == {
            "greeting": "Noted",
            "opened": "yes",
            "name": "ada",
            "path": "/langgraph/hello/ada",
            "echo": {"a": 1},
        }
        assert hello.headers["x-webapp-middleware"] == "seen"
        # Its routes come first: /info is its, /ok stays the server's.
        assert (await http.get("/info")).json() == {"served_by": "webapp"}
        ok = await http.get("/ok")
        assert ok.json() == {"ok": True} and ok.headers["x-webapp-middleware"] == "seen"
        # The protocol's routes answer under its middleware, with their auth.
        refused = await http.post("/threads/search", json={})
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
        assert refused.headers["x-webapp-middleware"] == "seen"
        assert (await http.get("/nowhere", headers=ADA)).json()["code"] == "not_found"
        # Its errors in the protocol's form; the edge's body bound applies.
        missing = await http.get("/notes/missing")
        assert (missing.status_code, missing.json()) == (404, {"detail": "no such note", "code": "not_found"})
        big = await http.post("/hello/ada", content=b"x" * (MAX_BODY + 1), headers={"content-type": "text/plain"})
        assert big.status_code == 413 and "payload_too_large" in big.text


async def test_the_project_runs_unchanged(url):
    ada = get_client(url=f"{url}/langgraph", headers=ADA)
    bob = get_client(url=f"{url}/langgraph", headers=BOB)
    async with asyncio.timeout(TEST_SECONDS):
        assert {a["graph_id"] for a in await ada.assistants.search()} == {"notes"}
        assistant = await ada.assistants.create(graph_id="notes", config={"configurable": {"topic": "birds"}})
        thread = await ada.threads.create()
        tid = thread["thread_id"]
        # auth.py's @auth.on.threads.create stamped it.
        assert thread["metadata"]["created_by"] == "ada"
        values: Any = None
        for text in ("a heron", "two swifts"):
            values = await ada.runs.wait(
                tid, assistant["assistant_id"], input={"text": text}, context={"user_name": "Ada"}
            )
        assert values["reply"] == "Noted for Ada on birds: 2"
        assert values["notes"] == ["a heron", "two swifts"]
        # What the graph put in the store, through the store's API.
        found = await ada.store.search_items(("notes", "Ada", "birds"))
        assert [i["value"]["text"] for i in sorted(found["items"], key=lambda i: i["key"])] == ["a heron", "two swifts"]
        # Another user is another owner.
        with pytest.raises(NotFoundError):
            await bob.threads.get(tid)
        assert await bob.threads.search() == []


FAILING_LIFESPAN = """
import contextlib

from starlette.applications import Starlette


@contextlib.asynccontextmanager
async def lifespan(app):
    raise RuntimeError("no broker")
    yield


app = Starlette(lifespan=lifespan)
"""


@pytest.mark.django_db(transaction=True)
def test_an_app_whose_lifespan_fails_to_start_stops_the_server(tmp_path):
    (tmp_path / "webapp.py").write_text(FAILING_LIFESPAN)
    server = Server(log_path=tmp_path / "server.log", env={"AGENT_HTTP_APP": f"{tmp_path / 'webapp.py'}:app"})
    try:
        # It may answer a health probe before its loop runs the lifespan.
        with contextlib.suppress(RuntimeError):
            server.start()
        assert server.process.wait(STARTUP_SECONDS) == EXIT_REFUSED
    finally:
        server.stop()
    assert (
        "agentsite: cannot start: http.app's lifespan start-up failed: RuntimeError: no broker\n" in server.log_text()
    )


LIFESPAN_LOG = """
import contextlib
import os
from pathlib import Path

from starlette.applications import Starlette

LOG = Path(os.environ["LIFESPAN_LOG"])


@contextlib.asynccontextmanager
async def lifespan(app):
    LOG.write_text("started\\n")
    yield
    LOG.write_text(LOG.read_text() + "stopped\\n")


app = Starlette(lifespan=lifespan)
"""


@pytest.mark.django_db(transaction=True)
def test_the_apps_lifespan_ends_when_the_server_stops(tmp_path):
    (tmp_path / "webapp.py").write_text(LIFESPAN_LOG)
    log = tmp_path / "lifespan.log"
    env = {"AGENT_HTTP_APP": f"{tmp_path / 'webapp.py'}:app", "LIFESPAN_LOG": str(log)}
    server = Server(log_path=tmp_path / "server.log", env=env)
    try:
        server.start()
        # A request for the app waits for its start-up.
        assert httpx.get(f"{server.url}/langgraph/nowhere", timeout=30).status_code == 404
        assert log.read_text() == "started\n"
        server.signal_group(signal.SIGTERM)
        assert server.process.wait(STARTUP_SECONDS) == 0
    finally:
        server.stop()
    assert log.read_text() == "started\nstopped\n"
