"""What the MCP endpoint (mcp_server.py) serves: each assistant the caller
can see is a tool, as langgraph-api's MCP server maps them (its
`api/mcp`): the assistant's name made a valid tool name, its description,
and the graph's input schema as /assistants/{id}/schemas computes it, with
the LangChain message types folded into one string (the user's message).

A tool call is a run started by runs.start_run, the path of
`POST /runs/wait` (no second turn path), on a thread of the caller's
(`thread_id`) or one of its own whose id, like the turn's Idempotency-Key,
is derived from the caller, the JSON-RPC request id, the tool and its
arguments: the same call sent again joins or replays the first run instead
of running twice (docs/agent-protocol.md, "MCP")."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from mcp import types

from assistants_app import selectors as assistants_read
from core.asyncdb import db
from core.errors import ApiError, ErrorCode
from core.http import errors
from graphs.runtime.registry import describe
from langgraph_app import runs
from langgraph_app.schemas import RunCreateStateful
from sessions_app import selectors as sessions
from sessions_app.auth import Principal

# langgraph-api lists at most this many assistants as tools, too.
MAX_TOOLS = 1000
THREAD_ARGUMENT = "thread_id"
_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_\-.]")
_MESSAGE_TYPES = frozenset(
    f"{kind}{chunk}"
    for kind in ("AI", "Human", "Chat", "System", "Function", "Tool")
    for chunk in ("Message", "MessageChunk")
)
_SUPPORT_TYPES = frozenset(
    {"ToolCall", "ToolCallChunk", "InvalidToolCall", "UsageMetadata", "InputTokenDetails", "OutputTokenDetails"}
)


def tool_name(assistant_name: str) -> str:
    """langgraph-api's rule: whitespace runs become `_`, then anything
    outside `[a-zA-Z0-9_.-]` goes, at most 128 characters."""
    return _INVALID_NAME.sub("", re.sub(r"\s+", "_", assistant_name.strip()))[:128]


def simplified(schema: dict[str, Any]) -> dict[str, Any]:
    """An input schema an LLM can fill: a list of LangChain messages becomes
    one string, the message to send (as langgraph-api simplifies it)."""
    schema = copy.deepcopy(schema) if schema else {}
    defs = schema.get("$defs") or {}
    if set(defs) & _MESSAGE_TYPES:
        for name in _MESSAGE_TYPES | _SUPPORT_TYPES:
            defs.pop(name, None)
        if not defs:
            schema.pop("$defs", None)
        for key, prop in (schema.get("properties") or {}).items():
            if _lists_messages(prop):
                schema["properties"][key] = {
                    "type": "string",
                    "title": prop.get("title", key),
                    "description": "The user message to send to the agent.",
                }
    schema.setdefault("type", "object")
    return schema


def _lists_messages(prop: dict[str, Any]) -> bool:
    if prop.get("type") != "array":
        return False
    items = prop.get("items") or {}
    refs = [c.get("$ref", "") for c in items.get("oneOf") or items.get("anyOf") or []]
    return any(ref.removeprefix("#/$defs/") in _MESSAGE_TYPES for ref in refs)


def _with_thread(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.setdefault("properties", {})
    properties.setdefault(
        THREAD_ARGUMENT,
        {
            "type": "string",
            "title": "Thread Id",
            "description": "Continue this thread (it is made if it does not exist); omit for a new thread.",
        },
    )
    return schema


@dataclass(frozen=True)
class Tool:
    name: str
    assistant_id: str
    graph_id: str
    definition: types.Tool


def _tools(owner: str) -> list[Tool]:
    found, _ = assistants_read.assistant_search(
        owner=owner,
        filters=assistants_read.AssistantFilter(),
        sort_by="created_at",
        descending=False,
        limit=MAX_TOOLS,
        offset=0,
    )
    tools: list[Tool] = []
    seen: set[str] = set()
    for assistant in found:
        name = tool_name(assistant.name)
        # langgraph-api keeps the first assistant of a name and skips the rest.
        if not name or name in seen:
            continue
        seen.add(name)
        schema = _with_thread(simplified(describe(assistant.graph_id)["input_schema"]))
        definition = types.Tool(
            name=name,
            title=assistant.name,
            description=assistant.description or f"Tool based on the {assistant.name} assistant",
            inputSchema=schema,
            annotations=types.ToolAnnotations(
                readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True
            ),
        )
        tools.append(Tool(name, str(assistant.assistant_id), assistant.graph_id, definition))
    return tools


async def list_tools(principal: Principal) -> list[Tool]:
    return await db(_tools, owner=principal.owner)


def call_key(owner: str, request_id: str | int, name: str, arguments: dict[str, Any]) -> str:
    """The call's identity, visible ASCII (a thread id and an Idempotency-Key
    both take it). The request id alone would not do: a stateless server
    sees no session, and the SDK's clients number each session's requests
    from 0, so two sessions' first calls share an id."""
    identity = json.dumps([owner, request_id, name, arguments], sort_keys=True, separators=(",", ":"))
    return "mcp-" + hashlib.sha256(identity.encode()).hexdigest()[:40]


def _error_result(error: BaseException) -> types.CallToolResult:
    """A failed call, in the protocol's `{"detail", "code"}` (an unexpected
    error logged by the front door, its text not shown)."""
    body = errors.render(error, errors.PROTOCOL).body
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{body['code']}: {body['detail']}")],
        structuredContent=body,
        isError=True,
    )


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in parts if isinstance(p, str | dict))


def _answer_text(values: dict[str, Any], thread_id: str, assistant_id: str) -> str:
    if values.get("__interrupt__"):
        # What it waits for, and where to answer: the protocol, on this thread.
        waiting = json.dumps([i.get("value") for i in values["__interrupt__"]], ensure_ascii=False)
        return (
            f"The run is waiting for approval on thread {thread_id}: {waiting}. "
            f"Answer it through the Agent Protocol: POST /langgraph/threads/{thread_id}/runs/wait "
            f'with {{"assistant_id": "{assistant_id}", "command": {{"resume": ...}}}}.'
        )
    messages = values.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("type") in ("ai", "AIMessage", "AIMessageChunk"):
            return _text_of(message)
    return json.dumps(values, ensure_ascii=False)


async def _joined(
    principal: Principal, key: str, body: RunCreateStateful, idempotency_key: str
) -> tuple[str, dict[str, Any]]:
    """The run's id and its wait answer: the call's own run, or, for a
    retry, the first one's (replayed, or joined while it still runs)."""
    owner = principal.owner
    try:
        run = await runs.start_run(
            principal=principal, key=key, body=body, idempotency_key=idempotency_key, streamed=False
        )
    except ApiError as error:
        if error.code != ErrorCode.TURN_IN_PROGRESS:
            raise
        session = await db(sessions.session_get, owner=owner, key=key)
        if session.active_turn_id is None:  # it ended meanwhile: now it replays
            return await _joined(principal, key, body, idempotency_key)
        return str(session.active_turn_id), await runs.outcome(owner, key, session.active_turn_id)
    return str(run.run_id), await runs.wait_for(run)


async def call_tool(
    principal: Principal, request_id: str | int, tool: Tool | None, name: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    """`tool`: the listed tool called `name`, if there is one."""
    if tool is None:
        return _error_result(ApiError.of(404, ErrorCode.ASSISTANT_NOT_FOUND, f"Unknown tool: {name[:128]}"))
    graph_input = dict(arguments)
    thread_id = graph_input.pop(THREAD_ARGUMENT, None)
    key = call_key(principal.owner, request_id, name, arguments)
    try:
        body = RunCreateStateful.model_validate(
            {"assistant_id": tool.assistant_id, "input": graph_input, "if_not_exists": "create"}
        )
        thread = thread_id if isinstance(thread_id, str) else key
        run_id, values = await _joined(principal, thread, body, key)
    except Exception as error:  # rendered by the front door, unexpected ones logged there
        return _error_result(error)
    meta = {"thread_id": thread, "run_id": run_id}
    if "__error__" in values:
        told = values["__error__"]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{told.get('error')}: {told.get('message')}")],
            structuredContent=values,
            isError=True,
            _meta=meta,
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_answer_text(values, thread, tool.assistant_id))],
        structuredContent=values,
        isError=False,
        _meta=meta,
    )
