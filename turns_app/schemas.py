from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

TEXT_MAX = 16_000


class ChatIn(Schema):
    """A turn: the user's `text`, or `resume` — the answer to the interrupt
    the session's graph is waiting on (any JSON the graph expects)."""

    model_config = ConfigDict(extra="forbid")

    text: StrictStr | None = Field(None, max_length=TEXT_MAX, description="the user's message")
    resume: Any = Field(None, description="the answer to a pending interrupt, instead of `text`")
    client_mode: Literal["chat", "form"] = "chat"
    need_form_update: StrictBool = True

    @field_validator("text")
    @classmethod
    def not_blank(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.strip():
            raise ValueError("text must not be empty or whitespace")
        if "\x00" in value:  # PostgreSQL cannot store it; refused on every backend
            raise ValueError("text must not contain the NUL character (U+0000)")
        return value

    @model_validator(mode="after")
    def text_or_resume(self) -> ChatIn:
        given = {"text", "resume"} & self.model_fields_set
        if given == {"text", "resume"}:
            raise ValueError("send `text` (a message) or `resume` (an interrupt's answer), not both")
        if "resume" not in given and self.text is None:
            raise ValueError("`text` is required (or `resume`, to answer a pending interrupt)")
        return self

    @property
    def is_resume(self) -> bool:
        return "resume" in self.model_fields_set

    def canonical(self) -> dict[str, Any]:
        """The request as digested for idempotency: defaults filled in, so an
        omitted `client_mode` and an explicit "chat" are the same request."""
        if self.is_resume:
            return {"resume": self.resume}
        return {
            "text": self.text,
            "client_mode": self.client_mode,
            "need_form_update": self.need_form_update,
        }


class InterruptOut(Schema):
    id: str
    value: Any


class ChatOut(Schema):
    turn_id: UUID
    epoch: int
    version: int
    status: Literal["committed", "interrupted"]
    reply: str
    field_changes: dict[str, Any]
    fields: dict[str, Any]
    stage: str
    interrupts: list[InterruptOut] = Field(description="what the graph asks before it goes on (status interrupted)")
    effects: list[dict[str, Any]] = Field(description="the effects its tools recorded, applied with the commit")


class TurnOut(Schema):
    id: UUID
    number: int
    epoch: int
    status: str
    base_version: int
    version: int | None = Field(description="the session's version after the turn committed")
    parent_id: UUID | None
    superseded: bool = Field(description="a rewind took the session back before this turn")
    idempotency_key: str | None
    request: dict[str, Any]
    error: dict[str, Any] | None
    interrupts: list[InterruptOut] | None
    effects: list[dict[str, Any]] | None
    created_at: datetime
    finished_at: datetime | None


class ToolCallOut(Schema):
    id: str | None
    name: str | None
    args: Any


class MessageOut(Schema):
    role: str
    content: str
    turn_id: str | None = None
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None


class CancelOut(Schema):
    turn_id: UUID
    status: str
    error: dict[str, Any] | None


class HistoryEntryOut(Schema):
    turn_id: UUID
    number: int
    version: int | None
    status: str
    superseded: bool
    on_head: bool = Field(description="on the way to the session's current state")
    fields: dict[str, Any] | None
    stage: str | None
    message_count: int
    finished_at: datetime | None


class HistoryPage(Schema):
    items: list[HistoryEntryOut]
    count: int
    limit: int
    offset: int


class HistoryStateOut(Schema):
    turn_id: UUID
    number: int
    version: int | None
    status: str
    fields: dict[str, Any] | None
    stage: str | None
    messages: list[MessageOut]


class RewindIn(Schema):
    model_config = ConfigDict(extra="forbid")

    turn_id: UUID | None = Field(description="the committed turn to go back to; null: before the first turn")
    expected_version: StrictInt = Field(ge=0, description="the session version you read")


class ForkIn(Schema):
    model_config = ConfigDict(extra="forbid")

    turn_id: UUID | None = Field(description="the committed turn to start from; null: the start")
    new_key: StrictStr = Field(description="the new session's key, 1-255 of [A-Za-z0-9._:-]")


class GraphOut(Schema):
    name: str
    description: str
    fields: bool = Field(description="the graph has a `fields` channel: it fills the session's form")
    input_schema: dict[str, Any]
    state_schema: dict[str, Any]
