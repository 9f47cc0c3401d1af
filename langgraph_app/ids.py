"""The protocol's ids for our things: a graph's system assistant is its name or UUID,
threads are session keys, runs are turn ids, and checkpoints are the
committed states of a session's history.

A checkpoint id names a state by (epoch, version, step): turns_app.types'
CheckpointRef, which the graph step also uses for the checkpoints a run
streams, so a streamed id is the id history shows.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from assistants_app.selectors import system_assistant_id
from core.errors import ValidationFailed
from turns_app.types import CheckpointRef, parse_checkpoint_id

__all__ = ["CheckpointRef", "parse_checkpoint_id"]

ASSISTANT_ID_MAX = 255


class UnknownAssistant(ValidationFailed):
    """422, worded as LangGraph's server words it: agent-chat-ui looks for
    "Invalid assistant" in the message."""


def assistant_id(graph: str) -> str:
    """The UUID of a graph's system assistant (LangGraph's own, so clients
    that stored one keep working against us)."""
    return str(system_assistant_id(graph))


def unknown_assistant(raw: Any) -> UnknownAssistant:
    graphs = ", ".join(settings.AGENT_GRAPHS)
    return UnknownAssistant(
        f"Invalid assistant: '{str(raw)[:ASSISTANT_ID_MAX]}'. Must be either:\n"
        f"- A valid assistant UUID, or\n- One of the registered graphs: {graphs}"
    )


def checkpoint_ref(raw: Any) -> CheckpointRef:
    """A checkpoint a client names: its id, or a checkpoint/config object
    carrying one (`checkpoint_id`, or `configurable.checkpoint_id`)."""
    if isinstance(raw, dict):
        raw = raw.get("checkpoint_id") or (raw.get("configurable") or {}).get("checkpoint_id")
    ref = parse_checkpoint_id(raw)
    if ref is None:
        raise ValidationFailed(f"{str(raw)[:80]!r} is not a checkpoint id of this server")
    return ref
