"""CORS on /langgraph/ for a chat UI on another origin: preflights answered
for allowed origins (for the SSE consumers and Django's views alike), the
headers the SDKs read exposed, nothing for other origins, nothing at all by
default, and never on /api/."""

from __future__ import annotations

import pytest
from channels.testing import HttpCommunicator

from agentsite.routing import build_application

pytestmark = pytest.mark.django_db(transaction=True)

UI = "http://localhost:3000"


async def call(app, method: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    headers = {"host": "localhost", **headers}
    comm = HttpCommunicator(app, method, path, b"", headers=[(k.encode(), v.encode()) for k, v in headers.items()])
    response = await comm.get_response(timeout=10)
    return response["status"], {k.decode().lower(): v.decode() for k, v in response["headers"]}


def preflight(origin: str, method: str = "POST") -> dict[str, str]:
    return {
        "origin": origin,
        "access-control-request-method": method,
        "access-control-request-headers": ", ".join(
            ("x-api-key", "content-type", "last-event-id", "mcp-protocol-version", "mcp-session-id")
        ),
    }


@pytest.mark.parametrize("path", ["/langgraph/threads/t1/runs/stream", "/langgraph/threads/search", "/langgraph/mcp"])
async def test_allowed_origin_gets_preflight_and_exposed_headers(settings, path, alice):
    settings.LANGGRAPH_CORS_ALLOWED_ORIGINS = [UI]
    app = build_application()
    status, headers = await call(app, "OPTIONS", path, preflight(UI))
    assert status == 200
    assert headers["access-control-allow-origin"] == UI
    assert {"x-api-key", "content-type", "last-event-id", "mcp-protocol-version", "mcp-session-id"} <= {
        h.strip() for h in headers["access-control-allow-headers"].lower().split(",")
    }
    status, headers = await call(app, "GET", "/langgraph/info", {"origin": UI, "x-api-key": alice})
    assert status == 200
    assert headers["access-control-allow-origin"] == UI
    assert {"content-location", "location", "x-pagination-next", "x-pagination-total"} <= {
        h.strip().lower() for h in headers["access-control-expose-headers"].split(",")
    }


def cors_headers(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.startswith("access-control-")}


# Not the allowed origin: another host, the opaque origin of a sandboxed
# page or file, one that starts with the allowed origin's text.
OTHERS = ["http://evil.example", "null", UI + ".evil.example", "http://localhost:3001"]


@pytest.mark.parametrize("origin", OTHERS)
async def test_other_origins_get_no_cors_header_at_all(settings, alice, origin):
    settings.LANGGRAPH_CORS_ALLOWED_ORIGINS = [UI]
    app = build_application()
    for path in ("/langgraph/threads/search", "/langgraph/threads/t1/runs/stream"):
        status, headers = await call(app, "OPTIONS", path, preflight(origin))
        assert status == 403, (path, status)
        assert headers["content-type"] == "application/json; charset=utf-8"
        assert cors_headers(headers) == {}, (path, headers)
    status, headers = await call(app, "GET", "/langgraph/info", {"origin": origin, "x-api-key": alice})
    assert status == 200
    assert cors_headers(headers) == {}, headers


async def test_other_paths_get_no_cors(settings):
    settings.LANGGRAPH_CORS_ALLOWED_ORIGINS = [UI]
    app = build_application()
    status, headers = await call(app, "GET", "/api/health", {"origin": UI})
    assert status == 200
    assert cors_headers(headers) == {}


async def test_no_cors_by_default(settings):
    settings.LANGGRAPH_CORS_ALLOWED_ORIGINS = []
    app = build_application()
    status, headers = await call(app, "GET", "/langgraph/info", {"origin": UI})
    assert status == 200
    assert "access-control-allow-origin" not in headers
    status, headers = await call(app, "OPTIONS", "/langgraph/threads/search", preflight(UI))
    assert "access-control-allow-origin" not in headers
