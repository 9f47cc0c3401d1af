"""A protocol run's body as a turn request: the new user message (text
blocks only), the request options it may carry, the checkpoint it names,
and the options this server refuses rather than silently drops."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from core.errors import ValidationFailed
from core.http.bodies import validation_failed
from langgraph_app.errors import not_supported
from langgraph_app.ids import CheckpointRef, parse_checkpoint_id
from langgraph_app.schemas import RunCreateStateful, RunCreateStateless
from turns_app.schemas import ChatIn
from turns_app.types import REQUEST_OPTIONS

RunBody = RunCreateStateful | RunCreateStateless
HUMAN_ROLES = frozenset({"human", "user"})


class ResumeNeedsThread(ValidationFailed):
    status = 400
    default_message = "You must provide a thread_id when resuming."


def _text_of(content: Any) -> str:
    """A message's content: a string, or content blocks whose text blocks are
    joined with newlines. Other blocks (images, files) are refused."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationFailed("input.messages[0].content must be a string or a list of content blocks")
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise not_supported(f"a content block of type {str(kind)[:40]!r} (only text blocks are)")
    return "\n".join(parts)


def message_request(raw_input: Any) -> dict[str, Any]:
    """`{"messages": [one human message], <request options>}` as the turn
    request /api/ would make of the same text."""
    if not isinstance(raw_input, dict):
        raise ValidationFailed('input must be an object such as {"messages": [{"role": "user", "content": "…"}]}')
    unknown = sorted(set(raw_input) - {"messages", *REQUEST_OPTIONS})
    if unknown:
        raise not_supported(f"input.{unknown[0][:40]} (a run's input is the new message in input.messages)")
    messages = raw_input.get("messages")
    if isinstance(messages, (dict, str)):
        messages = [messages]
    if not isinstance(messages, list) or len(messages) != 1:
        raise ValidationFailed("input.messages must hold exactly one message: the user's new one")
    message = messages[0]
    if isinstance(message, str):
        text = message
    elif isinstance(message, dict) and (message.get("role") or message.get("type")) in HUMAN_ROLES:
        text = _text_of(message.get("content"))
    else:
        raise not_supported("an input message that is not the user's (role user / type human)")
    options = {k: raw_input[k] for k in REQUEST_OPTIONS if k in raw_input}
    try:
        chat = ChatIn.model_validate({"text": text, **options})
    except ValidationError as exc:
        raise validation_failed([{**e, "loc": ("input", *e["loc"])} for e in exc.errors()]) from None
    return chat.canonical()


def check_options(body: RunBody) -> None:
    """Options we cannot honour are refused, never silently dropped."""
    if body.interrupt_before or body.interrupt_after:
        raise not_supported("interrupt_before / interrupt_after")
    if body.webhook:
        raise not_supported("webhook")
    if body.after_seconds:
        raise not_supported("after_seconds")
    if body.command is not None and (body.command.goto is not None or body.command.update is not None):
        raise not_supported("command.goto / command.update (command.resume is)")
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
