"""The ASGI router: Channels consumer paths first, then Django (ninja, admin)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application
from django.urls import re_path

from core.http.admission import admit
from core.http.edge import Edge
from core.http.health_early import answer_early
from core.http.inflight import requests

if TYPE_CHECKING:
    from channels.routing import _ExtendedURLPattern


def asgi_path(pattern: str, app: Callable[..., Awaitable[None]]) -> _ExtendedURLPattern:
    """`re_path` for an ASGI app, as channels' URLRouter takes it. The stubs
    have no such call: django-stubs' re_path takes views only, and
    channels-stubs' URLRouter wants patterns whose callback is an ASGI app."""
    return re_path(pattern, app)  # type: ignore[arg-type, return-value]


def build_application():
    django_app = get_asgi_application()
    from core.http.api_handler import ApiHandler

    api_app = ApiHandler()
    # After get_asgi_application(): the consumers import models.
    from langgraph_app import a2a_app
    from langgraph_app.consumers import (
        JoinStreamConsumer,
        RunStreamConsumer,
        ThreadEventsConsumer,
        ThreadJoinConsumer,
    )
    from langgraph_app.cors import ProtocolCors
    from langgraph_app.custom_app import with_custom_routes
    from langgraph_app.mcp_server import McpEndpoint
    from langgraph_app.thread_socket import RefusedSocket, ThreadStreamSocket
    from turns_app.consumers import TurnReattachConsumer, TurnStreamConsumer

    # `key` takes any characters, "/" included: a bad key must reach
    # check_session_key and answer 422 invalid_session_key, not 404.
    router = ProtocolTypeRouter(
        {
            # http.app's routes first, as langgraph-api serves them; inside
            # the CORS, as its global CORS middleware is around them.
            "http": ProtocolCors(
                with_custom_routes(
                    URLRouter(
                        [
                            asgi_path(r"^api/sessions/(?P<key>.+)/turns/stream$", TurnStreamConsumer.as_asgi()),
                            asgi_path(
                                r"^api/sessions/(?P<key>.+)/turns/(?P<turn_id>[^/]+)/stream$",
                                TurnReattachConsumer.as_asgi(),
                            ),
                            # LangGraph's Agent Protocol: its SSE endpoints.
                            asgi_path(
                                r"^langgraph/threads/(?P<thread_id>[^/]+)/runs/stream$",
                                RunStreamConsumer.as_asgi(),
                            ),
                            asgi_path(r"^langgraph/runs/stream$", RunStreamConsumer.as_asgi()),
                            asgi_path(
                                r"^langgraph/threads/(?P<thread_id>[^/]+)/stream/events$",
                                ThreadEventsConsumer.as_asgi(),
                            ),
                            asgi_path(r"^langgraph/threads/(?P<thread_id>[^/]+)/stream$", ThreadJoinConsumer.as_asgi()),
                            asgi_path(
                                r"^langgraph/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/stream$",
                                JoinStreamConsumer.as_asgi(),
                            ),
                            # Agent2Agent (A2A): a Starlette app, as a2a-sdk's server is.
                            asgi_path(r"^a2a/", a2a_app.app),
                            asgi_path(r"^\.well-known/agent-card\.json$", a2a_app.app),
                            # MCP where LangGraph's server has it: /mcp under the protocol's root
                            # (before the protocol's JSON endpoints, which take the rest of it).
                            asgi_path(r"^langgraph/mcp/?$", McpEndpoint()),
                            # The JSON API and the protocol's JSON endpoints: header-authenticated,
                            # without the admin's middleware (docs/scale.md, "CPU").
                            asgi_path(r"^(?:api|langgraph)/", api_app),
                            asgi_path(r"", django_app),
                        ]
                    )
                )
            ),
            # The thread-stream protocol over WebSocket (its only WebSocket).
            "websocket": URLRouter(
                [
                    asgi_path(
                        r"^langgraph/threads/(?P<thread_id>[^/]+)/stream/events$",
                        ThreadStreamSocket.as_asgi(),
                    ),
                    asgi_path(r"", RefusedSocket.as_asgi()),
                ]
            ),
        }
    )
    # The edge wraps everything: consumers, API, admin and chat page alike;
    # counted, so a graceful stop can wait for the responses in flight;
    # reads admitted a few at a time (core.http.admission), inside the
    # edge: a refused body or host waits for no place; and, ahead of all
    # that, `GET /api/health` answered from the answer a thread keeps fresh
    # (core.http.health_early), inside the edge for its host check and headers.
    # channels-stubs type the router's scope as asgiref's TypedDicts; the edge
    # hands it the server's scope dict as it came.
    from turns_app.health import early_answer

    return requests.track(Edge(answer_early(admit(router), early_answer)))  # type: ignore[arg-type]
