"""The ASGI edge: one middleware around the whole application (the Channels
consumers *and* Django), so every route gets the same treatment whatever
serves it:

* the request body is bounded before anything buffers it: a declared
  `Content-Length` over the limit is answered 413 without reading the body;
  a body that keeps coming (chunked, or lying about its length) is cut at the
  limit — the application sees the client leave, the client gets 413;
* the `Host` header is checked against ALLOWED_HOSTS as Django checks it
  (the consumers never reach Django's check);
* every response carries nosniff, X-Frame-Options and Referrer-Policy, and
  every JSON response names its charset (`application/json; charset=utf-8`:
  the bodies are UTF-8, and a client must not have to guess);
* under `/api/` and `/langgraph/` every error speaks its dialect's JSON
  error contract, also the ones Django or ninja answer in HTML (405,
  CSRF's 403, a bad Host's 400).

Under daphne the body limit is enforced earlier still, in the server
(`server_guard`): daphne buffers a body whole before calling the
application. This layer keeps the limit under any other ASGI server and in
tests that call the application directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from core.errors import ApiError, ErrorCode, MalformedRequest, PayloadTooLarge
from core.http import errors

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# What a non-JSON error under /api/ becomes.
STATUS_CODES = {
    400: ErrorCode.MALFORMED_REQUEST,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    408: ErrorCode.REQUEST_TIMEOUT,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    431: ErrorCode.HEADERS_TOO_LARGE,
}


def is_api(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def dialect_of(path: str) -> errors.Dialect | None:
    """The error contract a path speaks, if it has one."""
    if is_api(path):
        return errors.API
    # A2A (langgraph_app.a2a_app) answers its refusals as the protocol does.
    if path.startswith(("/langgraph/", "/a2a/")) or path == "/.well-known/agent-card.json":
        return errors.PROTOCOL
    return None


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


def host_allowed(scope: Scope) -> bool:
    """Django's rule (HttpRequest.get_host), for routes Django never sees."""
    raw = header(scope, b"host")
    if raw is None:
        server = scope.get("server") or ("", None)
        host = str(server[0] or "")
    else:
        try:
            host = raw.decode("ascii")
        except UnicodeDecodeError:
            return False
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def security_headers() -> list[tuple[bytes, bytes]]:
    out = [(b"x-content-type-options", b"nosniff")]
    if settings.X_FRAME_OPTIONS:
        out.append((b"x-frame-options", settings.X_FRAME_OPTIONS.encode()))
    if settings.SECURE_REFERRER_POLICY:
        policy = settings.SECURE_REFERRER_POLICY
        if not isinstance(policy, str):
            policy = ",".join(policy)
        out.append((b"referrer-policy", policy.encode()))
    return out


async def send_error(
    send: Send,
    error: ApiError,
    kept: list[tuple[bytes, bytes]] | None = None,
    dialect: errors.Dialect = errors.API,
) -> None:
    """`error` in `dialect` (core.http.errors), with the security headers —
    or, for a rewritten response, the headers it already had."""
    rendered = errors.render(error, dialect)
    body = rendered.content()
    await send(
        {
            "type": "http.response.start",
            "status": rendered.status,
            "headers": [
                *rendered.asgi_headers(),
                (b"content-length", str(len(body)).encode()),
                *(security_headers() if kept is None else kept),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Edge:
    def __init__(self, app: App, *, max_body_bytes: int | None = None) -> None:
        self.app = app
        self._max_body_bytes = max_body_bytes

    @property
    def max_body_bytes(self) -> int:
        if self._max_body_bytes is not None:
            return self._max_body_bytes
        return settings.AGENT_MAX_BODY_BYTES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = is_api(scope.get("path", ""))
        dialect = dialect_of(scope.get("path", ""))
        # The edge's own refusals speak the path's contract; elsewhere
        # (admin, chat page) the API's JSON is as good as any.
        refusals = dialect or errors.API
        limit = self.max_body_bytes

        if api and not host_allowed(scope):
            refused = ApiError.of(400, ErrorCode.DISALLOWED_HOST, "this host name is not served here")
            return await send_error(send, refused, dialect=errors.API)
        declared = header(scope, b"content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                return await send_error(send, MalformedRequest("Content-Length is not a number"), dialect=refusals)
            if int(declared) > limit:
                too_big = PayloadTooLarge(f"the request body is over {limit} bytes")
                return await send_error(send, too_big, dialect=refusals)

        received = 0
        too_large = False
        started = False
        # An HTML (or empty) error under /api/ or /langgraph/: its start is
        # held back and its body swallowed, and the JSON contract goes out
        # instead.
        rewriting: Message | None = None

        async def guarded_receive() -> Message:
            nonlocal received, too_large
            if too_large:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # The application sees the client leave; the client gets 413.
                    too_large = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started, rewriting
            if too_large and not started:
                # What the app answers a client that "left" (Starlette's
                # ClientDisconnect, say) is not what the client is told:
                # the 413 below is.
                return
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                headers = _charset_named(message.get("headers", ()))
                names = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in security_headers() if n not in names]
                if dialect is not None and status >= 400 and not _is_json(headers):
                    rewriting = {**message, "headers": headers}
                    return
                await send({**message, "headers": headers})
                return
            if rewriting is not None:
                if message["type"] == "http.response.body" and not message.get("more_body", False):
                    await _send_rewritten(send, rewriting, dialect or errors.API)
                return
            await send(message)

        await self.app(scope, guarded_receive, guarded_send)
        if too_large and not started:
            await send_error(send, PayloadTooLarge(f"the request body is over {limit} bytes"), dialect=refusals)


def _charset_named(headers: Any) -> list[tuple[bytes, bytes]]:
    """The headers, with a bare `application/json` (Django's JsonResponse,
    a stored body sent as is) saying `charset=utf-8` like ninja's answers."""
    return [
        (name, errors.JSON[1])
        if name.lower() == b"content-type" and value.strip().lower() == b"application/json"
        else (name, value)
        for name, value in headers
    ]


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.split(b";")[0].strip().lower() == b"application/json"
    return False


async def _send_rewritten(send: Send, start: Message, dialect: errors.Dialect) -> None:
    status = start["status"]
    code = STATUS_CODES.get(status, ErrorCode.INTERNAL_ERROR if status >= 500 else ErrorCode.MALFORMED_REQUEST)
    message = _MESSAGES.get(status) or ApiError.default_message
    kept = [
        (name, value) for name, value in start["headers"] if name.lower() not in {b"content-type", b"content-length"}
    ]
    await send_error(send, ApiError.of(status, code, message), kept, dialect)


_MESSAGES = {
    400: "bad request",
    403: "forbidden",
    404: "no such endpoint",
    405: "method not allowed on this endpoint",
    500: "an unexpected error occurred",
}
