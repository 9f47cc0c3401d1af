"""What a finished run proposes to commit (an Outcome), from the graph's
final state: the messages the turn added, the fields it set (checked
against the session's form), the stage, the other channels as JSON, and a
pause — an interrupt, a breakpoint, or a state update that left tasks to
run (docs/turn-protocol.md, "Run")."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from graphs.intake import form_spec
from graphs.runtime import effects
from graphs.runtime.registry import FIELDS, MESSAGES, STAGE, GraphShape
from turns_app import history
from turns_app.graph_input import NOT_CARRIED
from turns_app.types import Claim, Outcome

logger = logging.getLogger(__name__)

STAGE_MAX_LENGTH = 64


class GraphContractError(RuntimeError):
    """The graph did something the contract does not allow (a bug in it)."""


def to_json(value: Any) -> Any:
    """A channel value as JSON (messages, pydantic models and dataclasses
    included); raises TypeError for what has no JSON form."""
    return json.loads(json.dumps(value, default=_json_default, ensure_ascii=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return history.dump_messages([value])[0]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


class Fields:
    """The fields the graph proposes, checked against the session's form: a
    value that does not validate is not committed, and is reported."""

    def __init__(self, claim: Claim) -> None:
        self.form = claim.form
        self.start = dict(claim.fields)
        self.current = dict(claim.fields)
        self.rejected: list[dict[str, Any]] = []

    @functools.cached_property
    def specs(self) -> dict[str, form_spec.FieldSpec]:
        # Parsed only for a graph with a `fields` channel: others never look.
        return {spec.name: spec for spec in form_spec.parse_form(self.form)} if self.form else {}

    def propose(self, proposed: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Apply a `fields` update; returns (changes it made, values refused)."""
        changes: dict[str, Any] = {}
        refused: list[dict[str, Any]] = []
        if not isinstance(proposed, dict):
            refused.append({"field": None, "value": None, "message": "fields must be an object"})
            proposed = {}
        for name, raw in proposed.items():
            if raw == self.current.get(name):
                continue
            spec = self.specs.get(name)
            if spec is None:
                refused.append({"field": name, "value": shown(raw), "message": "unknown field"})
                continue
            try:
                value = form_spec.coerce_value(spec, raw)
            except form_spec.FieldValueError as exc:
                refused.append({"field": name, "value": shown(raw), "message": exc.message})
                continue
            if value != self.current.get(name):
                changes[name] = value
                self.current[name] = value
        self.current = {k: v for k, v in self.current.items() if v is not None}
        self.rejected += refused
        return changes, refused

    @property
    def changes(self) -> dict[str, Any]:
        return {k: v for k, v in self.current.items() if self.start.get(k) != v} | {
            k: None for k in self.start if k not in self.current
        }


def shown(value: Any) -> Any:
    try:
        return to_json(value)
    except TypeError:
        return repr(value)[:200]


@dataclasses.dataclass(frozen=True)
class Pause:
    """A run that stopped with work left: what it waits for (LangGraph's
    interrupts; none for a breakpoint), the nodes it would run next, and
    its checkpoint, persisted."""

    interrupts: list[dict[str, Any]]
    next_nodes: list[str]
    checkpoint_id: str | None


def _same(message: BaseMessage, before: BaseMessage) -> bool:
    # `add_messages` replaces a message whose id an input repeats: same id, new content.
    return message is before or (
        message.id == before.id and message.type == before.type and message.content == before.content
    )


def outcome(
    claim: Claim,
    shape: GraphShape,
    prior: list[BaseMessage],
    final: dict[str, Any],
    fields: Fields,
    pause: Pause | None,
    context: effects.TurnContext,
    steps: list[dict[str, Any]] | None = None,
) -> Outcome:
    messages = list(final.get(MESSAGES) or [])
    kept = len(messages) >= len(prior) and all(map(_same, messages, prior))
    added = messages[len(prior) :] if kept else messages
    replies = [m for m in added if isinstance(m, AIMessage)]
    reply = replies[-1].text if replies else ""
    if pause is None and not replies and "protocol" not in claim.request:
        # /api/'s turn answers with a reply; under the Agent Protocol a graph
        # may end without one, as on LangGraph's server.
        raise GraphContractError("the graph finished without a reply")
    if shape.has_fields and FIELDS in final:
        fields.propose(final[FIELDS])
    if STAGE in shape.channels and isinstance(final.get(STAGE), str):
        stage = final[STAGE][:STAGE_MAX_LENGTH]
    elif shape.has_fields:
        missing = form_spec.missing_required(list(fields.specs.values()), fields.current)
        stage = "collecting" if missing else "complete"
    else:
        stage = claim.stage
    values = {}
    for name, value in final.items():
        if name in NOT_CARRIED:
            continue
        try:
            values[name] = to_json(value)
        except TypeError as exc:
            logger.warning("graph %s: channel %s is not carried to the next turn: %s", claim.graph, name, exc)
    return Outcome(
        # A model may emit U+0000, which PostgreSQL's jsonb cannot hold.
        reply=reply.replace("\x00", ""),
        new_messages=_storable(history.dump_messages(added)),
        replaces_history=not kept,
        message_count=len(messages),
        field_changes=fields.changes,
        fields=fields.current,
        stage=stage,
        values=_storable(values),
        interrupts=pause.interrupts if pause is not None else [],
        next_nodes=pause.next_nodes if pause is not None else [],
        thread_id=claim.thread_id,
        checkpoint_id=pause.checkpoint_id if pause is not None else None,
        effects=list(context.recorded),
        steps=_storable(steps or []),
        conversation=messages,
    )


def _storable(value: Any) -> Any:
    """PostgreSQL's jsonb refuses U+0000 in strings; a model may produce it."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    return value
