"""The protocol's JSON endpoints: a NinjaAPI mounted at /langgraph/ (its
SSE endpoints are consumers: consumers.py). Thin: parse, call the services
and selectors /api/ uses, render LangGraph's shapes. Errors go through the
front door (core.http.errors) in its PROTOCOL dialect: `{"detail", "code"}`.

    system_api.py      /info, /ok
    assistants_api.py  /assistants…
    threads_api.py     /threads…
    thread_lifecycle_api.py  /threads/prune, /threads/{id}/storage
    runs_api.py        /threads/{id}/runs…, /runs…
    thread_commands.py /threads/{id}/commands (the thread-stream protocol)
    store_api.py       /store/… (LangGraph's store, per owner)
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.operation import Operation
from ninja.parser import Parser

from core.errors import ValidationFailed
from core.http import errors
from core.http.bodies import parse_json
from langgraph_app import (
    assistants_api,
    openapi,
    runs_api,
    store_api,
    system_api,
    thread_commands,
    thread_lifecycle_api,
    threads_api,
)
from langgraph_app.auth import ProtocolAuth


class JsonParser(Parser):
    def parse_body(self, request: HttpRequest) -> Any:
        data = parse_json(request.body)
        # Every body of the protocol is an object; ninja would read any other
        # JSON as an empty one (a `[null, null]` creating a thread).
        if not isinstance(data, dict):
            raise ValidationFailed("the request body must be a JSON object")
        return data


class ProtocolApi(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        prefix = self.get_root_path(path_params or {}) if path_prefix is None else path_prefix
        return openapi.document(schema, prefix)

    def get_openapi_operation_id(self, operation: Operation) -> str:
        # The ids the document had while every endpoint lived in this module:
        # generated clients keep their method names.
        return f"langgraph_app_api_{operation.view_func.__name__}"


api = ProtocolApi(
    parser=JsonParser(),
    title="agentsite: LangGraph Agent Protocol",
    version="1.0",
    description=(
        "LangGraph's Agent Server API over agentsite's sessions and turns: assistants are graphs, "
        'threads are sessions, runs are turns. Errors are `{"detail", "code"}`.'
    ),
    auth=ProtocolAuth(),
    urls_namespace="langgraph",
)
errors.install(api, errors.PROTOCOL)

api.add_router("", system_api.meta)
api.add_router("", assistants_api.assistants)
# Before /threads/{thread_id}, which would take "prune" for a thread id.
api.add_router("", thread_lifecycle_api.lifecycle_router)
api.add_router("", threads_api.threads_router)
api.add_router("", runs_api.runs_router)
api.add_router("", runs_api.stateless_router)
api.add_router("", thread_commands.commands_router)
api.add_router("", store_api.store_router)
