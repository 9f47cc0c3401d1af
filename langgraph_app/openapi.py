"""What ninja's generated OpenAPI document of /langgraph/ cannot know, added
to it: the SSE endpoints (Channels consumers, which ninja does not see),
every status each operation answers with the codes it carries, the
constraints the services check themselves (thread ids, Idempotency-Key),
and links between operations for stateful clients and fuzzers.

Documented, not enforced here: validation stays where it is, so the codes
stay what (docs/api.md, "Errors") says. The document is checked against the
running server by schemathesis (tests/system/test_openapi_fuzz.py)."""

from __future__ import annotations

import copy
from typing import Any

from core.errors import ErrorCode as C
from core.http import errors

ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
SSE = {"text/event-stream": {"schema": {"type": "string"}}}
# A thread id is a session key (docs/api.md, "Sessions").
THREAD_ID_PATTERN = r"^(?!\.\.?$)[A-Za-z0-9._:-]{1,255}$"
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]{1,128}$"

# Status -> the codes it carries. Every operation can meet these: a body or
# Host the edge refuses, a database that is down, a bug.
COMMON: dict[int, list[C]] = {
    400: [C.MALFORMED_REQUEST],
    405: [C.METHOD_NOT_ALLOWED],
    413: [C.PAYLOAD_TOO_LARGE],
    500: [C.INTERNAL_ERROR],
    503: [C.STORAGE_UNAVAILABLE],
}
# 403 and auth_failed: the project's auth handlers (docs/configuration.md, "Custom auth").
AUTHED = {**COMMON, 401: [C.UNAUTHORIZED, C.AUTH_FAILED], 403: [C.FORBIDDEN], 422: [C.VALIDATION_ERROR]}
ASSISTANT = {**AUTHED, 404: [C.ASSISTANT_NOT_FOUND]}
ASSISTANT_WRITE = {**ASSISTANT, 409: [C.SYSTEM_ASSISTANT], 422: [C.VALIDATION_ERROR, C.UNKNOWN_GRAPH]}
THREAD = {**AUTHED, 404: [C.SESSION_NOT_FOUND], 422: [C.VALIDATION_ERROR, C.INVALID_SESSION_KEY]}
RUN = {**THREAD, 404: [C.SESSION_NOT_FOUND, C.TURN_NOT_FOUND]}
# Starting a run is a turn (docs/turn-protocol.md): what a chat answers.
RUN_START = {
    **RUN,
    409: [
        C.SESSION_BUSY,
        C.SESSION_EXISTS,
        C.IDEMPOTENCY_CONFLICT,
        C.TURN_IN_PROGRESS,
        C.STALE_TURN,
        C.TURN_CANCELLED,
        C.LEASE_EXPIRED,
        C.INTERRUPT_PENDING,
        C.INTERRUPT_RESOLVED,
        C.GRAPH_MISMATCH,
        C.STATE_LOST,
        C.VERSION_CONFLICT,
    ],
    422: [C.VALIDATION_ERROR, C.INVALID_SESSION_KEY, C.INVALID_IDEMPOTENCY_KEY, C.UNKNOWN_GRAPH],
    429: [C.TOO_MANY_SESSIONS],
    502: [C.MODEL_ERROR],
    503: [C.STORAGE_UNAVAILABLE, C.SERVER_SHUTDOWN],
    504: [C.MODEL_TIMEOUT],
}

# "method path" (without the mount prefix) -> its statuses besides 200.
STATUSES: dict[str, dict[int, list[C]]] = {
    "get /info": COMMON,
    "get /ok": COMMON,
    "post /assistants": {**AUTHED, 409: [C.ASSISTANT_EXISTS], 422: [C.VALIDATION_ERROR, C.UNKNOWN_GRAPH]},
    "post /assistants/search": AUTHED,
    "post /assistants/count": AUTHED,
    "get /assistants/{assistant_id}": ASSISTANT,
    "patch /assistants/{assistant_id}": ASSISTANT_WRITE,
    "delete /assistants/{assistant_id}": ASSISTANT_WRITE,
    "post /assistants/{assistant_id}/versions": ASSISTANT,
    "post /assistants/{assistant_id}/latest": ASSISTANT_WRITE,
    "get /assistants/{assistant_id}/graph": ASSISTANT,
    "get /assistants/{assistant_id}/schemas": ASSISTANT,
    "get /assistants/{assistant_id}/subgraphs": ASSISTANT,
    "post /threads": {
        **THREAD,
        409: [C.SESSION_EXISTS],
        422: [C.VALIDATION_ERROR, C.INVALID_SESSION_KEY, C.UNKNOWN_GRAPH],
        429: [C.TOO_MANY_SESSIONS],
    },
    "post /threads/search": AUTHED,
    "put /store/items": AUTHED,
    "get /store/items": AUTHED,
    "delete /store/items": AUTHED,
    "post /store/items/search": AUTHED,
    "post /store/namespaces": AUTHED,
    "post /threads/count": AUTHED,
    "get /threads/{thread_id}": THREAD,
    "post /threads/prune": {**AUTHED, 409: [C.SESSION_BUSY], 422: [C.VALIDATION_ERROR, C.INVALID_SESSION_KEY]},
    "get /threads/{thread_id}/storage": THREAD,
    "patch /threads/{thread_id}": {**THREAD, 409: [C.SESSION_BUSY]},
    "delete /threads/{thread_id}": {**THREAD, 409: [C.SESSION_BUSY]},
    "post /threads/{thread_id}/copy": {
        **RUN,
        409: [C.TURN_COMMITTED, C.SESSION_BUSY, C.SESSION_EXISTS],
        429: [C.TOO_MANY_SESSIONS],
    },
    "get /threads/{thread_id}/state": THREAD,
    "post /threads/{thread_id}/state": {
        **THREAD,
        409: [C.VERSION_CONFLICT, C.SESSION_BUSY, C.INTERRUPT_PENDING],
        422: [C.VALIDATION_ERROR, C.INVALID_SESSION_KEY, C.INVALID_FIELDS],
    },
    "post /threads/{thread_id}/state/checkpoint": THREAD,
    "get /threads/{thread_id}/state/{checkpoint_id}": THREAD,
    "post /threads/{thread_id}/history": THREAD,
    "get /threads/{thread_id}/history": THREAD,
    "post /threads/{thread_id}/runs": RUN_START,
    "post /threads/{thread_id}/runs/wait": RUN_START,
    "post /threads/{thread_id}/runs/stream": RUN_START,
    "get /threads/{thread_id}/runs": THREAD,
    "get /threads/{thread_id}/runs/{run_id}": RUN,
    "get /threads/{thread_id}/runs/{run_id}/join": RUN,
    "get /threads/{thread_id}/runs/{run_id}/stream": RUN,
    "post /threads/{thread_id}/runs/{run_id}/cancel": RUN,
    "post /runs": RUN_START,
    "post /runs/wait": RUN_START,
    "post /runs/stream": RUN_START,
    # JSON-RPC errors carrying these (mcp_server.py): 406 not accepting JSON, 415 not sending it.
    "post /mcp": {**AUTHED, 406: [C.MALFORMED_REQUEST], 415: [C.MALFORMED_REQUEST]},
}
# Successes other than 200 (LangGraph's server answers the same).
SUCCESSES: dict[str, dict[str, str]] = {
    "delete /assistants/{assistant_id}": {"204": "deleted, every version"},
    "patch /threads/{thread_id}": {"204": "with `Prefer: return=minimal`"},
    "delete /threads/{thread_id}": {"204": "deleted: purged, a tombstone kept"},
    "put /store/items": {"204": "stored"},
    "delete /store/items": {"204": "deleted (or there was none)"},
    "post /threads/{thread_id}/runs/{run_id}/cancel": {
        "202": "the cancel is committed; the run ends soon",
        "204": "with `wait=1`: the run has ended",
    },
}
THREAD_LINKS = {
    "GetThread": "langgraph_app_api_get_thread",
    "PatchThread": "langgraph_app_api_patch_thread",
    "DeleteThread": "langgraph_app_api_delete_thread",
    "CopyThread": "langgraph_app_api_copy_thread",
    "GetState": "langgraph_app_api_get_state",
    "UpdateState": "langgraph_app_api_update_state",
    "History": "langgraph_app_api_post_history",
    "ListRuns": "langgraph_app_api_list_runs",
    "CreateRun": "langgraph_app_api_create_run",
    "WaitRun": "langgraph_app_api_wait_run",
}
RUN_LINKS = {
    "GetRun": "langgraph_app_api_get_run",
    "JoinRun": "langgraph_app_api_join_run",
    "CancelRun": "langgraph_app_api_cancel_run",
}
# (operation, status) -> link name -> (operationId, parameters).
LINKS: dict[tuple[str, str], dict[str, tuple[str, dict[str, str]]]] = {
    ("post /threads", "200"): {
        name: (target, {"thread_id": "$response.body#/thread_id"}) for name, target in THREAD_LINKS.items()
    },
    ("post /threads/{thread_id}/runs", "200"): {
        name: (target, {"thread_id": "$response.body#/thread_id", "run_id": "$response.body#/run_id"})
        for name, target in RUN_LINKS.items()
    },
}


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


THREAD_PARAM = {
    "name": "thread_id",
    "in": "path",
    "required": True,
    "description": "the thread's id (its session key): 1-255 of A-Z a-z 0-9 . _ : - (not . or ..)",
    "schema": {"type": "string", "pattern": THREAD_ID_PATTERN, "minLength": 1, "maxLength": 255},
}
IDEMPOTENCY_PARAM = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "1-128 visible ASCII characters: the same key and request replay the run",
    "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN, "minLength": 1, "maxLength": 128},
}


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


STREAM_200 = {
    "description": "the run's events: metadata first, the requested modes, end (or error) last",
    "content": SSE,
}
STREAM_OPERATIONS: dict[str, dict[str, Any]] = {
    "/threads/{thread_id}/runs/stream": {
        "post": {
            "tags": ["Thread Runs"],
            "summary": "Start a run and stream its events",
            "operationId": "stream_run",
            "parameters": [_path_param("thread_id")],
            "requestBody": _body("RunCreateStateful"),
            "responses": {"200": STREAM_200},
            "security": [{"ProtocolAuth": []}],
        }
    },
    "/runs/stream": {
        "post": {
            "tags": ["Stateless Runs"],
            "summary": "A run on a throwaway thread, streamed",
            "operationId": "stream_run_stateless",
            "requestBody": _body("RunCreateStateless"),
            "responses": {"200": STREAM_200},
            "security": [{"ProtocolAuth": []}],
        }
    },
    "/threads/{thread_id}/runs/{run_id}/stream": {
        "get": {
            "tags": ["Thread Runs"],
            "summary": "Join a run's stream after Last-Event-ID, on any process",
            "operationId": "join_run_stream",
            "parameters": [
                _path_param("thread_id"),
                _path_param("run_id"),
                {"name": "stream_mode", "in": "query", "required": False, "schema": {"type": "string"}},
                {"name": "cancel_on_disconnect", "in": "query", "required": False, "schema": {"type": "boolean"}},
                {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
            ],
            "responses": {"200": STREAM_200},
            "security": [{"ProtocolAuth": []}],
        }
    },
}
JSON_RPC_ERROR = {
    "title": "JsonRpcError",
    "type": "object",
    "required": ["jsonrpc", "id", "error"],
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            # data: the `{"detail", "code"}` of an error the door refused.
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
        },
    },
}
JSON_RPC_MESSAGE = {
    "title": "JsonRpcMessage",
    "type": "object",
    "required": ["jsonrpc", "method"],
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "none: a notification"},
        "method": {"type": "string", "description": "initialize, ping, tools/list, tools/call, or a notification"},
        "params": {"anyOf": [{"type": "object"}, {"type": "null"}]},
    },
}
# Operations answering JSON-RPC (docs/agent-protocol.md, "MCP"); their 413
# is the edge's, before the body is read.
JSON_RPC_OPERATIONS: dict[str, dict[str, Any]] = {
    "/mcp": {
        "post": {
            "tags": ["MCP"],
            "summary": "The Model Context Protocol (Streamable HTTP, stateless): each assistant a tool, a call a run",
            "operationId": "post_mcp",
            "parameters": [
                {
                    "name": "Accept",
                    "in": "header",
                    "required": True,
                    "schema": {"type": "string", "enum": ["application/json, text/event-stream"]},
                }
            ],
            "requestBody": _body("JsonRpcMessage"),
            "responses": {
                "200": {
                    "description": "the JSON-RPC response (a result, or an error such as -32601 or -32602)",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "202": {"description": "a notification, accepted"},
            },
            "security": [{"ProtocolAuth": []}],
        }
    }
}
RUN_STARTS = {where for where, statuses in STATUSES.items() if statuses is RUN_START}
# Operations that never answer ninja's default 200.
NO_200 = {
    "delete /threads/{thread_id}",
    "post /threads/{thread_id}/runs/{run_id}/cancel",
    "put /store/items",
    "delete /store/items",
}


def document(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    schema = copy.deepcopy(schema)
    schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = {
        **errors.PROTOCOL.schema,
        "required": ["detail", "code"],
    }
    schema["components"]["schemas"]["JsonRpcError"] = copy.deepcopy(JSON_RPC_ERROR)
    schema["components"]["schemas"]["JsonRpcMessage"] = copy.deepcopy(JSON_RPC_MESSAGE)
    _constrain_bodies(schema["components"]["schemas"])
    paths = schema.setdefault("paths", {})
    for path, operations in {**STREAM_OPERATIONS, **JSON_RPC_OPERATIONS}.items():
        paths[prefix + path] = copy.deepcopy(operations)
    for full_path, operations in paths.items():
        path = full_path.removeprefix(prefix)
        for method, operation in operations.items():
            where = f"{method} {path}"
            # ninja keys responses by int; JSON (and the lookups below) by string.
            responses = {
                str(k): v for k, v in operation["responses"].items() if not (where in NO_200 and k in (200, "200"))
            }
            for success, description in SUCCESSES.get(where, {}).items():
                responses[success] = {"description": description}
            json_rpc = path in JSON_RPC_OPERATIONS
            for failure, codes in STATUSES.get(where, {}).items():
                responses[str(failure)] = _error_response(codes, json_rpc=json_rpc and failure != 413)
            for (source, status), links in LINKS.items():
                if source == where and status in responses:
                    responses[status]["links"] = {
                        name: {"operationId": target, "parameters": params} for name, (target, params) in links.items()
                    }
            operation["responses"] = responses
            _constrain_parameters(operation, starts_run=where in RUN_STARTS)
    return schema


def _error_response(codes: list[C], *, json_rpc: bool = False) -> dict[str, Any]:
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/JsonRpcError"}}} if json_rpc else ERROR
    return {"description": "error: " + ", ".join(f"`{code}`" for code in codes), "content": copy.deepcopy(content)}


def _constrain_parameters(operation: dict[str, Any], *, starts_run: bool) -> None:
    parameters = operation.setdefault("parameters", [])
    for index, parameter in enumerate(parameters):
        if parameter["in"] == "path" and parameter["name"] == "thread_id":
            parameters[index] = copy.deepcopy(THREAD_PARAM)
    if starts_run and not any(p["name"] == "Idempotency-Key" for p in parameters):
        parameters.append(copy.deepcopy(IDEMPOTENCY_PARAM))
    if not parameters:
        del operation["parameters"]


def _constrain_bodies(components: dict[str, Any]) -> None:
    create = components.get("ThreadCreate", {}).get("properties", {})
    if "thread_id" in create:
        create["thread_id"] = {
            "anyOf": [{"type": "string", "pattern": THREAD_ID_PATTERN, "maxLength": 255}, {"type": "null"}],
            "description": "client-chosen id; a random UUID if omitted or null",
        }
