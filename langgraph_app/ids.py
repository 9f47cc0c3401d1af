"""The protocol's ids for our things: a graph's system assistant is its name or UUID,
threads are session keys, runs are turn ids, and checkpoints are the
committed states of a session's history.

A checkpoint id names a state by (epoch, version, step), written as a UUID
of fixed-width hex fields, so ids sort as text in the order the states were
reached — useStream orders a thread's branches by comparing them as text.
Steps: 0 is the start of the epoch; 2n-1 the state just before turn n's
reply (its user message added), 2n the state after turn n.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from assistants_app.selectors import system_assistant_id
from core.errors import ValidationFailed

ASSISTANT_ID_MAX = 255
_EPOCH_HEX, _VERSION_HEX, _STEP_HEX = 8, 12, 12


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


@dataclass(frozen=True, order=True)
class CheckpointRef:
    epoch: int
    version: int
    step: int

    @property
    def id(self) -> str:
        digits = f"{self.epoch:0{_EPOCH_HEX}x}{self.version:0{_VERSION_HEX}x}{self.step:0{_STEP_HEX}x}"
        return str(uuid.UUID(digits))

    @property
    def turn_number(self) -> int:
        """The turn whose state this is (before its reply, or after it); 0: none."""
        return (self.step + 1) // 2

    @property
    def before_reply(self) -> bool:
        return self.step % 2 == 1


def parse_checkpoint_id(raw: Any) -> CheckpointRef | None:
    """None for anything that is not one of our ids."""
    if not isinstance(raw, str) or len(raw) > 64:
        return None
    try:
        digits = uuid.UUID(raw).hex
    except ValueError:
        return None
    epoch = int(digits[:_EPOCH_HEX], 16)
    version = int(digits[_EPOCH_HEX : _EPOCH_HEX + _VERSION_HEX], 16)
    step = int(digits[_EPOCH_HEX + _VERSION_HEX :], 16)
    return CheckpointRef(epoch, version, step) if epoch > 0 else None


def checkpoint_ref(raw: Any) -> CheckpointRef:
    """A checkpoint a client names: its id, or a checkpoint/config object
    carrying one (`checkpoint_id`, or `configurable.checkpoint_id`)."""
    if isinstance(raw, dict):
        raw = raw.get("checkpoint_id") or (raw.get("configurable") or {}).get("checkpoint_id")
    ref = parse_checkpoint_id(raw)
    if ref is None:
        raise ValidationFailed(f"{str(raw)[:80]!r} is not a checkpoint id of this server")
    return ref
