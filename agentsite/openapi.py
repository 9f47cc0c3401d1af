"""What ninja's generated OpenAPI schema cannot know, added to it: every error
response with its codes, the constraints the services check themselves
(session key, Idempotency-Key, If-Match, non-blank text, the form's field
specs), the two SSE endpoints the Channels consumers serve, and links
between operations for stateful clients and fuzzers.

Documented, not enforced here: validation stays where it is (the services
and the front door), so the error codes stay what the table in
(docs/api.md, "Errors") says. The schema is checked against the running
server by a schemathesis run in the test suite
(tests/system/test_openapi_fuzz.py)."""

from __future__ import annotations

import copy
from typing import Any

from core.errors import ErrorCode
from core.http import errors
from graphs.intake.form_spec import (
    MAX_DESCRIPTION_LENGTH,
    MAX_ENUM_OPTION_LENGTH,
    MAX_ENUM_OPTIONS,
    MAX_FIELDS,
)

KEY_PATTERN = r"^(?!\.\.?$)[A-Za-z0-9._:-]{1,255}$"
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]{1,128}$"
IF_MATCH_PATTERN = r'^\s*(?:W/)?"?[0-9]{1,18}"?\s*$'
LAST_EVENT_ID_PATTERN = r"^\s*[0-9]{0,18}\s*$"

FIELD_SPEC_SCHEMA = {
    "title": "FieldSpec",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "type"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z][a-z0-9_]{0,63}$"},
        "type": {"type": "string", "enum": ["string", "integer", "number", "boolean", "date", "email", "enum"]},
        "required": {"type": "boolean", "default": False},
        "description": {"type": "string", "maxLength": MAX_DESCRIPTION_LENGTH, "default": ""},
        "enum": {
            "anyOf": [
                {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_ENUM_OPTIONS,
                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_ENUM_OPTION_LENGTH},
                },
                {"type": "null"},
            ],
            "description": "only (and required) for type enum; options unique ignoring case",
        },
    },
}

# Status -> the codes it carries, per operation ("method path").
COMMON = {
    500: [ErrorCode.INTERNAL_ERROR],
    503: [ErrorCode.STORAGE_UNAVAILABLE],
}
AUTHED = {
    **COMMON,
    400: [ErrorCode.MALFORMED_REQUEST, ErrorCode.DISALLOWED_HOST],
    401: [ErrorCode.UNAUTHORIZED, ErrorCode.AUTH_FAILED],
    405: [ErrorCode.METHOD_NOT_ALLOWED],
    413: [ErrorCode.PAYLOAD_TOO_LARGE],
    422: [ErrorCode.VALIDATION_ERROR],
}
KEYED = {**AUTHED, 404: [ErrorCode.SESSION_NOT_FOUND], 422: [ErrorCode.VALIDATION_ERROR, ErrorCode.INVALID_SESSION_KEY]}
CHAT = {
    **KEYED,
    404: [],  # a chat on an unknown key creates the session
    409: [
        ErrorCode.IDEMPOTENCY_CONFLICT,
        ErrorCode.TURN_IN_PROGRESS,
        ErrorCode.SESSION_BUSY,
        ErrorCode.STALE_TURN,
        ErrorCode.TURN_CANCELLED,
        ErrorCode.LEASE_EXPIRED,
        ErrorCode.INTERRUPT_PENDING,
        ErrorCode.INTERRUPT_RESOLVED,
        ErrorCode.STATE_LOST,
        ErrorCode.EFFECT_REFUSED,
        ErrorCode.GRAPH_WITHOUT_MESSAGES,
    ],
    422: [ErrorCode.VALIDATION_ERROR, ErrorCode.INVALID_SESSION_KEY, ErrorCode.INVALID_IDEMPOTENCY_KEY],
    429: [ErrorCode.TOO_MANY_SESSIONS],
    # A chat sent to (or still running on) a server that is stopping.
    503: [ErrorCode.STORAGE_UNAVAILABLE, ErrorCode.SERVER_SHUTDOWN],
}
ERRORS: dict[str, dict[int, list[ErrorCode]]] = {
    "post /api/sessions": {
        **AUTHED,
        409: [ErrorCode.SESSION_EXISTS],
        422: [
            ErrorCode.VALIDATION_ERROR,
            ErrorCode.INVALID_FORM,
            ErrorCode.INVALID_SESSION_KEY,
            ErrorCode.UNKNOWN_GRAPH,
        ],
        429: [ErrorCode.TOO_MANY_SESSIONS],
    },
    "get /api/sessions": AUTHED,
    "get /api/sessions/{key}": KEYED,
    "delete /api/sessions/{key}": KEYED,
    "patch /api/sessions/{key}/fields": {
        **KEYED,
        409: [ErrorCode.SESSION_BUSY],
        412: [ErrorCode.VERSION_CONFLICT],
        422: [ErrorCode.VALIDATION_ERROR, ErrorCode.INVALID_FIELDS, ErrorCode.INVALID_SESSION_KEY],
        428: [ErrorCode.PRECONDITION_REQUIRED],
    },
    "post /api/sessions/{key}/turns": {
        **CHAT,
        502: [ErrorCode.MODEL_ERROR],
        504: [ErrorCode.MODEL_TIMEOUT],
    },
    "get /api/sessions/{key}/turns": KEYED,
    "get /api/sessions/{key}/messages": KEYED,
    "post /api/sessions/{key}/turns/{turn_id}/cancel": {
        **KEYED,
        404: [ErrorCode.SESSION_NOT_FOUND, ErrorCode.TURN_NOT_FOUND],
        409: [ErrorCode.TURN_COMMITTED],
    },
    "get /api/sessions/{key}/history": KEYED,
    "get /api/sessions/{key}/history/{turn_id}": {
        **KEYED,
        404: [ErrorCode.SESSION_NOT_FOUND, ErrorCode.TURN_NOT_FOUND],
    },
    "post /api/sessions/{key}/rewind": {
        **KEYED,
        404: [ErrorCode.SESSION_NOT_FOUND, ErrorCode.TURN_NOT_FOUND],
        409: [ErrorCode.SESSION_BUSY],
        412: [ErrorCode.VERSION_CONFLICT],
    },
    "post /api/sessions/{key}/fork": {
        **KEYED,
        404: [ErrorCode.SESSION_NOT_FOUND, ErrorCode.TURN_NOT_FOUND],
        409: [ErrorCode.SESSION_EXISTS],
        429: [ErrorCode.TOO_MANY_SESSIONS],
    },
    "get /api/graphs": AUTHED,
    "get /api/health": {400: [ErrorCode.DISALLOWED_HOST], 405: [ErrorCode.METHOD_NOT_ALLOWED]},
    "post /api/sessions/{key}/turns/stream": CHAT,
    "get /api/sessions/{key}/turns/{turn_id}/stream": {
        **KEYED,
        404: [ErrorCode.SESSION_NOT_FOUND, ErrorCode.TURN_NOT_FOUND],
        409: [ErrorCode.TURN_IN_PROGRESS],
    },
}

KEY_PARAM = {
    "name": "key",
    "in": "path",
    "required": True,
    "description": "the session's key: 1-255 of A-Z a-z 0-9 . _ : - (not . or ..)",
    "schema": {"type": "string", "pattern": KEY_PATTERN, "minLength": 1, "maxLength": 255},
}
IDEMPOTENCY_PARAM = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "1-128 visible ASCII characters, scoped to the session's epoch: the same key "
    "and request replay the stored answer",
    "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN, "minLength": 1, "maxLength": 128},
}
IF_MATCH_PARAM = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": 'the version you read, e.g. "3" (or send expected_version in the body; one is required)',
    "schema": {"type": "string", "pattern": IF_MATCH_PATTERN},
}
CHAT_BODY = {"$ref": "#/components/schemas/ChatIn"}

SSE_DESCRIPTION = (
    "Server-Sent Events, each with `id:` (1, 2, … once for the turn's whole life, live or "
    "replayed), `event:` and JSON `data:`: `turn`, then `delta`, `fields`, `tool_call`, "
    "`tool_result` as the graph produces them, `interrupt` when it pauses, then exactly one of "
    "`done` (the JSON chat answer) or `error` (the error object; besides the chat's codes, "
    "`lease_expired` or `server_restarted` when the process running the turn died, "
    "`server_shutdown` when it was stopped and the turn ran past its grace period). Errors "
    "before the stream starts are plain JSON with their status."
)
# One event, as SSE clients (and OpenAPI 3.2's itemSchema) see it.
SSE_EVENT_SCHEMA = {
    "type": "object",
    "required": ["id", "event", "data"],
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "event": {
            "type": "string",
            "enum": ["turn", "fields", "delta", "tool_call", "tool_result", "interrupt", "done", "error"],
        },
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
SSE_CONTENT = {"text/event-stream": {"itemSchema": SSE_EVENT_SCHEMA}}

SSE_OPERATIONS = {
    "/api/sessions/{key}/turns/stream": {
        "post": {
            "operationId": "turns_app_consumers_chat_stream",
            "tags": ["turns"],
            "summary": "Chat over Server-Sent Events (same body, auth and Idempotency-Key rules as /turns)",
            "parameters": [KEY_PARAM, IDEMPOTENCY_PARAM],
            "requestBody": {"required": True, "content": {"application/json": {"schema": CHAT_BODY}}},
            "responses": {
                "200": {"description": SSE_DESCRIPTION, "content": SSE_CONTENT},
            },
            "security": [{"ApiKeyAuth": []}],
        }
    },
    "/api/sessions/{key}/turns/{turn_id}/stream": {
        "get": {
            "operationId": "turns_app_consumers_reattach",
            "tags": ["turns"],
            "summary": "Re-attach to a turn's event stream (events after Last-Event-ID)",
            "parameters": [
                KEY_PARAM,
                {"name": "turn_id", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}},
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": False,
                    "description": "the id of the last event received; only later ones are sent",
                    "schema": {"type": "string", "pattern": LAST_EVENT_ID_PATTERN},
                },
            ],
            "responses": {
                "200": {"description": SSE_DESCRIPTION, "content": SSE_CONTENT},
                "204": {"description": "nothing left to send"},
            },
            "security": [{"ApiKeyAuth": []}],
        }
    },
}

LINKS = {
    ("post /api/sessions", "201"): {
        "GetSession": ("sessions_app_api_get_session", {"key": "$response.body#/key"}),
        "DeleteSession": ("sessions_app_api_delete_session", {"key": "$response.body#/key"}),
        "SetFields": ("sessions_app_api_set_fields", {"key": "$response.body#/key"}),
        "Chat": ("turns_app_api_chat", {"key": "$response.body#/key"}),
        "TurnLog": ("turns_app_api_turn_log", {"key": "$response.body#/key"}),
        "Messages": ("turns_app_api_messages", {"key": "$response.body#/key"}),
    },
}


def document(schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = errors.API.schema
    components["FieldSpec"] = FIELD_SPEC_SCHEMA
    _constrain_bodies(components)
    schema["paths"].update(copy.deepcopy(SSE_OPERATIONS))
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            # ninja keys responses by int; JSON (and the lookups below) by string.
            operation["responses"] = {str(k): v for k, v in operation["responses"].items()}
            _constrain_parameters(operation)
            for status, codes in ERRORS.get(f"{method} {path}", {}).items():
                if codes:
                    operation["responses"][str(status)] = _error_response(codes)
            for (where, response_status), links in LINKS.items():
                if where == f"{method} {path}" and response_status in operation["responses"]:
                    operation["responses"][response_status]["links"] = {
                        name: {"operationId": target, "parameters": params} for name, (target, params) in links.items()
                    }
    return schema


def _error_response(codes: list[ErrorCode]) -> dict[str, Any]:
    return {
        "description": "error: " + ", ".join(f"`{code}`" for code in codes),
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _constrain_parameters(operation: dict[str, Any]) -> None:
    parameters = operation.get("parameters", [])
    for index, parameter in enumerate(parameters):
        if parameter["in"] == "path" and parameter["name"] == "key":
            parameters[index] = copy.deepcopy(KEY_PARAM)
        elif parameter["in"] == "header" and parameter["name"] == "Idempotency-Key":
            parameters[index] = copy.deepcopy(IDEMPOTENCY_PARAM)
        elif parameter["in"] == "header" and parameter["name"] == "If-Match":
            parameters[index] = copy.deepcopy(IF_MATCH_PARAM)


def _constrain_bodies(components: dict[str, Any]) -> None:
    chat = components.get("ChatIn", {}).get("properties", {})
    if "text" in chat:
        # Non-blank: at least one character that is not whitespace.
        for branch in chat["text"].get("anyOf", [chat["text"]]):
            if branch.get("type") == "string":
                branch.update(minLength=1, pattern=r"\S")
    create = components.get("SessionCreateIn", {}).get("properties", {})
    if "key" in create:
        create["key"] = {
            "anyOf": [{"type": "string", "pattern": KEY_PATTERN, "maxLength": 255}, {"type": "null"}],
            "description": "client-chosen id; a random one if omitted",
        }
    if "form" in create:
        create["form"] = {
            "anyOf": [
                {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_FIELDS,
                    "items": {"$ref": "#/components/schemas/FieldSpec"},
                },
                {"type": "null"},
            ],
            "description": "field specs (names unique, at most 64 KiB of JSON); the default form if omitted",
        }
    if "metadata" in create:
        create["metadata"]["description"] = "any JSON object, at most 16 KiB"
