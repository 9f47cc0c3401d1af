"""The Model Context Protocol at /langgraph/mcp: the official `mcp` SDK's
Streamable HTTP transport, stateless, answering JSON (as langgraph-api's
MCP server answers), routed inside the edge (agentsite.routing), so the
body limit, Host and security headers are the other routes'.

The SDK's session manager runs its servers in a task group it opens in
`run()`, normally entered by an ASGI lifespan, which daphne never sends.
Stateless, a request needs nothing of another's: each gets a manager of its
own, run for that request alone, with a `Server` whose handlers know the
caller (mcp_tools.py serves them).

Before the SDK reads a byte the caller is authenticated (as /langgraph/:
`x-api-key`, `Authorization: Bearer`, or the project's auth handler), the
body is read and checked as every JSON body is (core.http.bodies) and a
batch is refused: MCP dropped JSON-RPC batches (2025-06-18). Every refusal
is a JSON-RPC error whose `data` is the project's `{"detail", "code"}`
(docs/agent-protocol.md, "MCP")."""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from core.errors import ApiError, ErrorCode, MalformedRequest, MethodNotAllowed
from core.http import errors
from core.http.bodies import parse_json
from core.http.edge import Message, Receive, Scope, Send, host_allowed, security_headers
from langgraph_app import mcp_tools
from langgraph_app.auth import authenticate
from sessions_app.auth import Principal

# JSON-RPC 2.0's codes, and the one this server uses for a caller it does
# not let in (the range -32000..-32099 is the server's own).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNAUTHORIZED = -32001
SERVER_NAME = "agentsite"
# The SDK logs four INFO lines a request (its manager's start and stop, the
# request's type): quiet unless LOGGING names the logger.
_SDK_LOGGER = logging.getLogger("mcp")
if _SDK_LOGGER.level == logging.NOTSET:
    _SDK_LOGGER.setLevel(logging.WARNING)
# The requests this server answers; any other is refused here, before the
# SDK, which would call a method it has no type for a bad parameter.
SERVED = frozenset({"initialize", "ping", "tools/list", "tools/call"})


class NotOneRequest(MalformedRequest):
    """JSON, but not one JSON-RPC message: a batch, or no object."""

    jsonrpc_code = INVALID_REQUEST


class BadParams(MalformedRequest):
    jsonrpc_code = INVALID_PARAMS


class NoSuchMethod(ApiError):
    status, code = 200, ErrorCode.NOT_FOUND
    jsonrpc_code = METHOD_NOT_FOUND


def _jsonrpc_code(error: ApiError) -> int:
    if hasattr(error, "jsonrpc_code"):
        return error.jsonrpc_code
    if error.status in (401, 403):
        return UNAUTHORIZED
    if error.code == ErrorCode.MALFORMED_REQUEST:
        return PARSE_ERROR
    if error.status >= 500:
        return INTERNAL_ERROR
    return INVALID_REQUEST


async def _refuse(send: Send, exc: BaseException, *, allow: str | None = None, request_id: Any = None) -> None:
    """`exc` as a JSON-RPC error (with no request id if none was read), its
    status and headers as the protocol's dialect gives them."""
    error = errors.error_of(exc)
    rendered = errors.render(error, errors.PROTOCOL)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": _jsonrpc_code(error), "message": rendered.body["detail"], "data": rendered.body},
        },
        ensure_ascii=False,
    ).encode()
    headers = [*rendered.asgi_headers(), (b"content-length", str(len(body)).encode()), *security_headers()]
    if allow is not None:
        headers.append((b"allow", allow.encode()))
    await send({"type": "http.response.start", "status": rendered.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body (the edge bounds it), or None if the client left."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` for the SDK: the body read already, then the client's own
    messages (its disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers


def _media_refusal(headers: dict[str, str]) -> ApiError | None:
    """The SDK's own refusals of a request's media types (406, 415), said
    here so that they carry the error contract too: JSON must be accepted
    (its JSON-response mode) and sent."""
    accepted = (part.strip() for part in headers.get("accept", "").split(","))
    if not any(part.startswith("application/json") for part in accepted):
        return ApiError.of(406, ErrorCode.MALFORMED_REQUEST, "the client must accept application/json")
    if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return ApiError.of(415, ErrorCode.MALFORMED_REQUEST, "the body must be sent as application/json")
    return None


def _checked(body: bytes) -> dict[str, Any]:
    message: Any = parse_json(body)
    if isinstance(message, list):
        raise NotOneRequest("JSON-RPC batches are not supported: MCP removed them (2025-06-18); send one message")
    if not isinstance(message, dict):
        raise NotOneRequest("a JSON-RPC message is a JSON object")
    if message.get("jsonrpc") != "2.0":
        raise NotOneRequest('a JSON-RPC 2.0 message says "jsonrpc": "2.0"')
    if "method" in message and not isinstance(message["method"], str):
        raise NotOneRequest("a JSON-RPC method is a string")
    # The SDK would take a message with any other id for a notification,
    # and answer a request nobody waits for with a silent 202.
    request_id = message.get("id")
    if "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        raise NotOneRequest("a JSON-RPC id is a string or an integer")
    if message.get("params") is not None and not isinstance(message["params"], dict):
        raise BadParams("MCP's params are an object")
    return message


def _unserved(message: dict[str, Any]) -> NoSuchMethod | None:
    """A request (an id and a method) for a method not served here."""
    method, request_id = message.get("method"), message.get("id")
    if isinstance(request_id, str | int) and isinstance(method, str) and method not in SERVED:
        return NoSuchMethod(f"Method not found: {method[:100]}")
    return None


def server_for(principal: Principal) -> Server:
    """An MCP server for one request of `principal`: the assistants it sees
    as tools. The SDK validates a call's arguments against the listed
    schema, listing the tools first; the call reuses that listing."""
    server: Server = Server(SERVER_NAME, version="agentsite-1.0")
    listed: dict[str, mcp_tools.Tool] = {}

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        tools = await mcp_tools.list_tools(principal)
        listed.clear()
        listed.update((tool.name, tool) for tool in tools)
        return [tool.definition for tool in tools]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if not listed:
            await list_tools()
        request_id = server.request_context.request_id
        return await mcp_tools.call_tool(principal, request_id, listed.get(name), name, arguments)

    return server


class McpEndpoint:
    """ASGI: POST /langgraph/mcp. GET (a stream of the server's own
    messages) and DELETE (end a session) have nothing to serve statelessly:
    405, as langgraph-api answers GET."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            return await _refuse(send, MethodNotAllowed("MCP takes POST here (stateless)"), allow="POST")
        if not host_allowed(scope):
            refused = ApiError.of(400, ErrorCode.DISALLOWED_HOST, "this host name is not served here")
            return await _refuse(send, refused)
        headers = _headers(scope)
        try:
            principal = await authenticate(headers, scope)
        except Exception as exc:  # rendered by the front door, unexpected ones logged there
            return await _refuse(send, exc)
        refusal = _media_refusal(headers)
        if refusal is not None:
            return await _refuse(send, refusal)
        body = await _read_body(receive)
        if body is None:
            return
        try:
            message = _checked(body)
        except ApiError as exc:
            return await _refuse(send, exc)
        unserved = _unserved(message)
        if unserved is not None:
            return await _refuse(send, unserved, request_id=message["id"])
        manager = StreamableHTTPSessionManager(server_for(principal), stateless=True, json_response=True)
        async with manager.run():
            # The SDK types `send` as taking any mapping; the edge's takes dicts.
            await manager.handle_request(scope, _replaying(body, receive), send)  # type: ignore[arg-type]
