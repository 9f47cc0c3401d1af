"""Django for the JSON API (`/api/`) and the Agent Protocol's JSON
endpoints (`/langgraph/`), without the admin's middleware.

Both authenticate by header (a bearer key, `x-api-key` or the project's
auth handler, which reads the ASGI scope): they have no use for sessions, users,
messages, CSRF (ninja's views are exempt) or login throttling, and the edge
(core.http.edge) already sets the security headers and the JSON error
contract. Under ASGI every sync-style middleware costs two thread hops per
request (Django runs `process_request` and `process_response` through
`sync_to_async`): a dozen hops per chat turn for nothing (docs/scale.md, "CPU"). This
handler runs the API's views behind Django's SecurityMiddleware alone (SSL
redirect, HSTS), called on the event loop: it only reads settings and
headers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, cast

from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponseBase
from django.middleware.security import SecurityMiddleware
from django.urls import set_script_prefix

AsyncView = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


class InlineSecurityMiddleware(SecurityMiddleware):
    """Django's SecurityMiddleware without the thread hops."""

    sync_capable = False
    async_capable = True

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase | None = self.process_request(request)
        if response is None:
            # Async only (sync_capable is off): Django hands it a coroutine
            # function, whatever django-stubs' union says.
            response = await cast(Awaitable[HttpResponseBase], self.get_response(request))
        # django-stubs want an HttpResponse; Django sets the headers of any
        # response, streaming ones (SSE) included.
        return self.process_response(request, response)  # type: ignore[arg-type]


API_MIDDLEWARE = (InlineSecurityMiddleware,)


class ApiHandler(ASGIHandler):
    """ASGIHandler with API_MIDDLEWARE instead of settings.MIDDLEWARE (the
    same steps as BaseHandler.load_middleware, for async middleware only),
    and without a ThreadSensitiveContext per request: inside one, the
    request's thread-sensitive calls (Django's `response.close`) start a new
    OS thread and join it at the end, every request. The API's views reach
    the database through core.asyncdb's own threads, never through
    thread-sensitive code, so Django's few hops go to asgiref's one shared
    thread instead."""

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    async def handle(self, scope, receive, send) -> None:
        """Django's `ASGIHandler.handle` (5.2), with the request signals sent
        on the event loop. Django sends them through `sync_to_async`, a thread
        hop at each end of every request; their receivers (close old
        database connections, reset the query log, the caches and the
        urlconf) concern this thread's state only, and the event loop's
        thread holds no database connection (core.asyncdb)."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        # One or the other: a request, or the response refusing it.
        if error_response is not None:
            body_file.close()
            await self.send_response(error_response, send)
            error_response.close()
            return

        async def process_request(request, send):
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away during the send
                await self.send_response(response, send)
            return response

        # As Django: a disconnect while the view runs cancels it.
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request(request, send)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            signals.request_finished.send(sender=self.__class__)
        else:
            response.close()  # sends request_finished
        body_file.close()

    def load_middleware(self, is_async: bool = False) -> None:
        assert is_async, "ApiHandler serves ASGI only"
        self._view_middleware: list[Callable[..., Any]] = []
        self._template_response_middleware: list[Callable[..., Any]] = []
        self._exception_middleware: list[Callable[..., Any]] = []
        # django-stubs leave out BaseHandler's private _get_response_async.
        view = self._get_response_async  # type: ignore[attr-defined]
        # convert_exception_to_response keeps a coroutine function one: every
        # step of this chain is async.
        handler = cast(AsyncView, convert_exception_to_response(view))
        for middleware in reversed(API_MIDDLEWARE):
            handler = cast(AsyncView, convert_exception_to_response(middleware(handler)))
        self._middleware_chain = handler
