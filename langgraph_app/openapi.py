"""The SSE endpoints in the protocol's OpenAPI document. They are Channels
consumers, which ninja does not see; this adds them with the request
bodies the JSON endpoints share, so the document describes every endpoint
/langgraph/ serves."""

from __future__ import annotations

from typing import Any

from core.http import errors

SSE = {"text/event-stream": {"schema": {"type": "string"}}}
ERROR = {"application/json": {"schema": errors.PROTOCOL.schema}}


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


def _responses() -> dict[str, Any]:
    return {
        "200": {
            "description": "the run's events: metadata first, the requested modes, end (or error) last",
            "content": SSE,
        },
        "404": {"description": "no such thread or run", "content": ERROR},
        "409": {
            "description": "the thread is busy (multitask_strategy reject) or waits on an interrupt",
            "content": ERROR,
        },
        "422": {"description": "the request is invalid", "content": ERROR},
    }


def add_stream_endpoints(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    paths = schema.setdefault("paths", {})
    paths[f"{prefix}/threads/{{thread_id}}/runs/stream"] = {
        "post": {
            "tags": ["Thread Runs"],
            "summary": "Start a run and stream its events",
            "operationId": "stream_run",
            "parameters": [_path_param("thread_id")],
            "requestBody": _body("RunCreateStateful"),
            "responses": _responses(),
            "security": [{"ProtocolAuth": []}],
        }
    }
    paths[f"{prefix}/runs/stream"] = {
        "post": {
            "tags": ["Stateless Runs"],
            "summary": "A run on a throwaway thread, streamed",
            "operationId": "stream_run_stateless",
            "requestBody": _body("RunCreateStateless"),
            "responses": _responses(),
            "security": [{"ProtocolAuth": []}],
        }
    }
    paths[f"{prefix}/threads/{{thread_id}}/runs/{{run_id}}/stream"] = {
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
            "responses": _responses(),
            "security": [{"ProtocolAuth": []}],
        }
    }
    return schema
