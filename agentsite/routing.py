"""The ASGI router: Channels consumer paths first, then Django (ninja, admin)."""

from __future__ import annotations

from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application
from django.urls import re_path

from core.http.edge import Edge
from core.http.inflight import requests


def build_application():
    django_app = get_asgi_application()
    from core.http.api_handler import ApiHandler

    api_app = ApiHandler()
    # After get_asgi_application(): the consumers import models.
    from langgraph_app.consumers import JoinStreamConsumer, RunStreamConsumer
    from langgraph_app.cors import ProtocolCors
    from turns_app.consumers import TurnReattachConsumer, TurnStreamConsumer

    # `key` takes any characters, "/" included: a bad key must reach
    # check_session_key and answer 422 invalid_session_key, not 404.
    router = ProtocolTypeRouter(
        {
            "http": ProtocolCors(
                URLRouter(
                    [
                        re_path(r"^api/sessions/(?P<key>.+)/turns/stream$", TurnStreamConsumer.as_asgi()),
                        re_path(
                            r"^api/sessions/(?P<key>.+)/turns/(?P<turn_id>[^/]+)/stream$",
                            TurnReattachConsumer.as_asgi(),
                        ),
                        # LangGraph's Agent Protocol: its SSE endpoints.
                        re_path(
                            r"^langgraph/threads/(?P<thread_id>[^/]+)/runs/stream$",
                            RunStreamConsumer.as_asgi(),
                        ),
                        re_path(r"^langgraph/runs/stream$", RunStreamConsumer.as_asgi()),
                        re_path(
                            r"^langgraph/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/stream$",
                            JoinStreamConsumer.as_asgi(),
                        ),
                        re_path(r"^api/", api_app),
                        re_path(r"", django_app),
                    ]
                )
            )
        }
    )
    # The edge wraps everything: consumers, API, admin and chat page alike;
    # counted, so a graceful stop can wait for the responses in flight.
    return requests.track(Edge(router))
