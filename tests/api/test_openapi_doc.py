"""The OpenAPI schema documents errors, constraints and the SSE endpoints
(docs/api.md, "Overview"); tests/system/test_openapi_fuzz.py checks it against the
running server."""

from __future__ import annotations

import json

from core.errors import ErrorCode


def test_schema_documents_errors_constraints_and_streams(client):
    schema = json.loads(client.get("/api/openapi.json").content)
    paths = schema["paths"]
    assert "/api/sessions/{key}/turns/stream" in paths
    assert "/api/sessions/{key}/turns/{turn_id}/stream" in paths
    stream = paths["/api/sessions/{key}/turns/stream"]["post"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]

    documented = json.dumps(schema)
    for code in ErrorCode:
        if code in {ErrorCode.NOT_FOUND, ErrorCode.FORBIDDEN, ErrorCode.REQUEST_TIMEOUT, ErrorCode.HEADERS_TOO_LARGE}:
            continue  # answered by the edge for no operation in particular
        if code in {
            ErrorCode.GRAPH_MISMATCH,
            ErrorCode.ASSISTANT_NOT_FOUND,
            ErrorCode.ASSISTANT_EXISTS,
            ErrorCode.SYSTEM_ASSISTANT,
        }:
            continue  # only /langgraph/ runs ask for a graph by name; only it has assistants
        assert f"`{code}`" in documented, code

    chat = paths["/api/sessions/{key}/turns"]["post"]
    params = {p["name"]: p for p in chat["parameters"]}
    assert params["key"]["schema"]["pattern"].endswith("[A-Za-z0-9._:-]{1,255}$")
    assert params["Idempotency-Key"]["schema"]["maxLength"] == 128
    assert {"401", "409", "413", "422", "429", "502", "503", "504"} <= set(chat["responses"])
    (text,) = [
        b for b in schema["components"]["schemas"]["ChatIn"]["properties"]["text"]["anyOf"] if b["type"] == "string"
    ]
    assert text["minLength"] == 1 and text["maxLength"] == 16_000 and text["pattern"] == r"\S"
    patch = paths["/api/sessions/{key}/fields"]["patch"]
    assert {p["name"] for p in patch["parameters"]} >= {"key", "If-Match"}
    assert {"412", "428"} <= set(patch["responses"])
    assert schema["paths"]["/api/sessions"]["post"]["responses"]["201"]["links"]["GetSession"]
