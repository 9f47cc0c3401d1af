"""A protocol run's body as a turn request (turns_app.graph_input has the
forms): the graph's input, a command, the checkpoint it names, and the
options this server refuses rather than silently drops. Everything is
checked against the graph here, before a turn is claimed."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import convert_to_messages
from pydantic import ValidationError

from core.errors import ValidationFailed
from core.http.bodies import validation_failed
from graphs.runtime.registry import MESSAGES, GraphShape
from langgraph_app.errors import not_supported
from langgraph_app.ids import CheckpointRef, parse_checkpoint_id
from langgraph_app.schemas import RunCreateStateful, RunCreateStateless
from turns_app.schemas import ChatIn
from turns_app.types import REQUEST_OPTIONS

RunBody = RunCreateStateful | RunCreateStateless
HUMAN_ROLES = frozenset({"human", "user"})
# What a run's input may hold: its JSON form (content blocks such as images
# included) and its messages are bounded before anything runs.
INPUT_MAX_BYTES = 512 * 1024
INPUT_MESSAGES_MAX = 100
NODE_NAME_MAX = 255
# A command's goto: node names and Sends, at most this many (LangGraph's
# server bounds them only by its body).
GOTO_MAX = 100
SEND_SHAPE = 'a node name, a Send {"node": "…", "input": …}, or a list of them'


class ResumeNeedsThread(ValidationFailed):
    status = 400
    default_message = "You must provide a thread_id when resuming."


def _bounded(value: Any, what: str) -> None:
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError):
        raise ValidationFailed(f"{what} must be JSON") from None
    if size > INPUT_MAX_BYTES:
        raise ValidationFailed(f"{what} is {size} bytes as JSON; at most {INPUT_MAX_BYTES}")


def check_messages(messages: Any, what: str) -> None:
    """Messages in any form `add_messages` takes (role/type dicts, strings,
    content blocks), tool messages included."""
    listed = messages if isinstance(messages, list) else [messages]
    if len(listed) > INPUT_MESSAGES_MAX:
        raise ValidationFailed(f"{what} holds {len(listed)} messages; at most {INPUT_MESSAGES_MAX}")
    try:
        convert_to_messages(listed)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise ValidationFailed(f"{what}: {str(exc)[:200]}") from None


def _simple_text(raw_input: dict[str, Any]) -> str | None:
    """The text of an input that is just one new user message with string
    content and no id of its own — /api/'s turn, the same request."""
    if set(raw_input) - {MESSAGES, *REQUEST_OPTIONS}:
        return None
    messages = raw_input.get(MESSAGES)
    if isinstance(messages, list) and len(messages) == 1:
        messages = messages[0]
    if isinstance(messages, str):
        return messages
    if (
        isinstance(messages, dict)
        and set(messages) <= {"role", "type", "content"}
        and (messages.get("role") or messages.get("type")) in HUMAN_ROLES
        and isinstance(messages.get("content"), str)
    ):
        return messages["content"]
    return None


def input_request(raw_input: Any, shape: GraphShape) -> dict[str, Any]:
    """The turn request of a run's `input`: any channels of the graph's
    input schema. One new user message with string content is the same
    request /api/ makes of that text."""
    if not isinstance(raw_input, dict):
        raise ValidationFailed('input must be an object such as {"messages": [{"role": "user", "content": "…"}]}')
    text = _simple_text(raw_input) if MESSAGES in shape.input_channels else None
    if text is not None:
        options = {k: raw_input[k] for k in REQUEST_OPTIONS if k in raw_input}
        try:
            chat = ChatIn.model_validate({"text": text, **options})
        except ValidationError as exc:
            raise validation_failed([{**e, "loc": ("input", *e["loc"])} for e in exc.errors()]) from None
        return chat.canonical()
    unknown = sorted(set(raw_input) - shape.input_channels)
    if unknown:
        raise ValidationFailed(f"input.{unknown[0][:40]} is not a channel of the graph's input")
    _bounded(raw_input, "input")
    if MESSAGES in raw_input:
        check_messages(raw_input[MESSAGES], "input.messages")
    return {"input": raw_input}


def _nodes(raw: Any, shape: GraphShape, what: str, *, star: bool = False) -> list[str] | str:
    if star and raw == "*":
        return "*"
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(n, str) and len(n) <= NODE_NAME_MAX for n in names):
        raise ValidationFailed(f"{what} must be a node name or a list of them")
    unknown = [n for n in names if n not in shape.nodes]
    if unknown:
        raise ValidationFailed(f"{what}: the graph has no node {unknown[0][:80]!r}")
    return names


def _node(name: Any, shape: GraphShape, what: str) -> str:
    if not isinstance(name, str) or len(name) > NODE_NAME_MAX:
        raise ValidationFailed(f"{what} must be a node name of at most {NODE_NAME_MAX} characters")
    if name not in shape.nodes:
        raise ValidationFailed(f"{what}: the graph has no node {name[:80]!r}")
    return name


def goto_request(raw: Any, shape: GraphShape) -> list[str | dict[str, Any]]:
    """A command's `goto` as langgraph-api's `map_cmd` reads it: a node
    name, a Send (`{"node", "input"}`, both required as in LangGraph's
    OpenAPI; other keys are ignored, as there), or a list mixing them. The
    Sends are kept as JSON, the form the turn's request is stored and
    replayed in (turns_app.graph_input builds the `Send`s)."""
    entries = raw if isinstance(raw, list) else [raw]
    if len(entries) > GOTO_MAX:
        raise ValidationFailed(f"command.goto holds {len(entries)} entries; at most {GOTO_MAX}")
    out: list[str | dict[str, Any]] = []
    for index, entry in enumerate(entries):
        what = f"command.goto[{index}]" if isinstance(raw, list) else "command.goto"
        if isinstance(entry, str):
            out.append(_node(entry, shape, what))
        elif isinstance(entry, dict) and "node" in entry and "input" in entry:
            out.append({"node": _node(entry["node"], shape, f"{what}.node"), "input": entry["input"]})
        else:
            raise ValidationFailed(f"{what} must be {SEND_SHAPE}")
    sent = [entry["input"] for entry in out if isinstance(entry, dict)]
    if sent:
        _bounded(sent, "command.goto's Send inputs")
    return out


def command_request(body: RunBody, shape: GraphShape) -> dict[str, Any] | None:
    """The turn request of a run's `command`, None when it asks nothing. As
    LangGraph reads a Command: a null `resume` or `update` and an empty
    `goto` are absent (RemoteGraph sends `{"resume": …, "goto": [],
    "update": null, "graph": null}`)."""
    command = body.command
    if command is None:
        return None
    spec: dict[str, Any] = {}
    if command.resume is not None:
        _bounded(command.resume, "command.resume")
        spec["resume"] = command.resume
    if command.update is not None:
        update = command.update
        pairs = isinstance(update, list) and all(isinstance(p, list) and len(p) == 2 for p in update)
        if not isinstance(update, dict) and not pairs:
            raise ValidationFailed("command.update must be an object or a list of [channel, value] pairs")
        named = set(update) if isinstance(update, dict) else {p[0] for p in update}
        unknown = sorted(str(n) for n in named - shape.channels)
        if unknown:
            raise ValidationFailed(f"command.update: {unknown[0][:40]!r} is not a channel of the graph")
        _bounded(update, "command.update")
        if isinstance(update, dict) and MESSAGES in update:
            check_messages(update[MESSAGES], "command.update.messages")
        spec["update"] = update
    if command.goto not in (None, "", []):
        spec["goto"] = goto_request(command.goto, shape)
    if not spec:
        return None
    return {"resume": spec["resume"]} if set(spec) == {"resume"} else {"command": spec}


def breakpoints(body: RunBody, shape: GraphShape) -> dict[str, Any]:
    """interrupt_before / interrupt_after, for the run's protocol options."""
    out: dict[str, Any] = {}
    for name in ("interrupt_before", "interrupt_after"):
        raw = getattr(body, name)
        if raw:
            out[name] = _nodes(raw, shape, name, star=True)
    return out


def check_options(body: RunBody) -> None:
    """Options we cannot honour are refused, never silently dropped."""
    if body.webhook:
        raise not_supported("webhook")
    if body.after_seconds:
        raise not_supported("after_seconds")
    checkpoint = getattr(body, "checkpoint", None)
    if checkpoint is not None and checkpoint.checkpoint_ns:
        raise not_supported("a subgraph checkpoint (checkpoint_ns)")


def wanted_ref(body: RunBody) -> CheckpointRef | None:
    raw = getattr(body, "checkpoint_id", None)
    checkpoint = getattr(body, "checkpoint", None)
    if checkpoint is not None and checkpoint.checkpoint_id:
        raw = checkpoint.checkpoint_id
    if raw is None:
        return None
    ref = parse_checkpoint_id(raw)
    if ref is None:
        raise ValidationFailed(f"checkpoint_id {raw[:80]!r} is not a checkpoint of this server")
    return ref
