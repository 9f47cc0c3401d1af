"""Agent2Agent (A2A) over JSON-RPC, as LangGraph's server speaks it
(docs/agent-protocol.md, "A2A"): each assistant is an agent.

    GET  /.well-known/agent-card.json?assistant_id=…   an assistant's card (default AGENT_GRAPH)
    GET  /a2a/{assistant_id}/.well-known/agent-card.json   the same, per assistant
    GET  /a2a/{assistant_id}                           the same
    POST /a2a/{assistant_id}                           JSON-RPC: a2a-sdk's dispatcher

A Starlette app (a2a-sdk's server pieces are Starlette's), routed by
agentsite.routing. The caller is authenticated as under /langgraph/
(x-api-key, bearer, or the project's auth) before the SDK sees the request;
a refusal there is the protocol's `{"detail", "code"}` with its status. The
body is checked as every JSON body is (core.http.bodies: depth, non-finite
numbers) before the SDK parses it: what it refuses is a JSON-RPC error, and
so is everything past that (a batch, an unknown method, bad params)."""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from django.conf import settings
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from assistants_app import selectors as assistants_read
from core.asyncdb import db
from core.errors import ApiError
from core.http import errors
from core.http.bodies import parse_json
from graphs.runtime.registry import describe
from langgraph_app.a2a_handler import RunsRequestHandler
from langgraph_app.auth import authenticate
from langgraph_app.ids import assistant_id as system_assistant_id

PROTOCOL_VERSION = "1.0"
MODES = ["text/plain", "application/json"]


def refusal(error: BaseException) -> Response:
    rendered = errors.render(error, errors.PROTOCOL)
    return JSONResponse(rendered.body, status_code=rendered.status, headers=dict(rendered.headers))


class CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context (its headers name the A2A version asked for), with
    who is calling and which assistant, as the endpoint found them."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["owner"] = request.state.principal.owner
        # The whole caller: a run asks the project's auth handlers about it.
        context.state["principal"] = request.state.principal
        context.state["assistant_id"] = request.path_params["assistant_id"]
        return context


dispatcher = JsonRpcDispatcher(
    request_handler=RunsRequestHandler(), context_builder=CallContextBuilder(), enable_v0_3_compat=True
)


def card_of(*, owner: str, assistant_id: str, base_url: str) -> dict[str, Any]:
    """The assistant's agent card: its name and description, one skill —
    the graph, described by its docstring and input schema."""
    row = assistants_read.assistant_get(owner=owner, assistant_id=assistant_id)
    graph = describe(row.graph_id)
    inputs = sorted((graph["input_schema"].get("properties") or {}).keys())
    description = row.description or graph["description"] or f"{row.name} assistant"
    url = f"{base_url}/a2a/{assistant_id}"
    card = AgentCard(
        name=row.name,
        description=description,
        version="agentsite-1.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=MODES,
        default_output_modes=MODES,
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION)],
        skills=[
            AgentSkill(
                id=f"{row.graph_id}-main",
                name=f"{row.name} capabilities",
                description=f"{graph['description'] or description} Input channels: {', '.join(inputs) or 'none'}.",
                tags=["assistant", "langgraph", row.graph_id, *(f"input:{name}" for name in inputs)],
                input_modes=MODES,
                output_modes=MODES,
            )
        ],
    )
    return agent_card_to_dict(card)


def base_url(request: Request) -> str:
    scheme = request.headers.get("x-forwarded-proto") or request.url.scheme
    return f"{scheme}://{request.url.netloc}"


async def agent_card(request: Request) -> Response:
    try:
        principal = await authenticate(request.headers, request.scope)
        wanted = request.path_params.get("assistant_id") or request.query_params.get("assistant_id")
        wanted = wanted or str(system_assistant_id(settings.AGENT_GRAPH))
        card = await db(card_of, owner=principal.owner, assistant_id=wanted, base_url=base_url(request))
    except Exception as error:  # rendered by the front door, unexpected ones logged there
        return refusal(error)
    return JSONResponse(card)


async def rpc(request: Request) -> Response:
    if request.method != "POST":
        return await agent_card(request)
    try:
        request.state.principal = await authenticate(request.headers, request.scope)
    except Exception as error:
        return refusal(error)
    try:
        parse_json(await request.body())
    except ClientDisconnect:
        return Response(status_code=400)  # gone, or a chunked body past the edge's limit
    except ApiError as error:
        return JSONResponse(build_error_response(None, JSONParseError(message=error.message)))
    return await dispatcher.handle_requests(request)


app = Starlette(
    routes=[
        Route("/.well-known/agent-card.json", agent_card, methods=["GET"]),
        Route("/a2a/{assistant_id}/.well-known/agent-card.json", agent_card, methods=["GET"]),
        Route("/a2a/{assistant_id}", rpc, methods=["GET", "POST"]),
        Route("/a2a/{assistant_id}/", rpc, methods=["GET", "POST"]),
    ]
)
