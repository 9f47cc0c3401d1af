from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool, StrictStr, field_validator

TEXT_MAX = 16_000


class ChatIn(Schema):
    model_config = ConfigDict(extra="forbid")

    text: StrictStr = Field(..., max_length=TEXT_MAX, description="the user's message")
    client_mode: Literal["chat", "form"] = "chat"
    need_form_update: StrictBool = True

    @field_validator("text")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be empty or whitespace")
        if "\x00" in value:  # PostgreSQL cannot store it; refused on every backend
            raise ValueError("text must not contain the NUL character (U+0000)")
        return value

    def canonical(self) -> dict[str, Any]:
        """The request as digested for idempotency: defaults filled in, so an
        omitted `client_mode` and an explicit "chat" are the same request."""
        return {
            "text": self.text,
            "client_mode": self.client_mode,
            "need_form_update": self.need_form_update,
        }


class ChatOut(Schema):
    turn_id: UUID
    epoch: int
    version: int
    reply: str
    field_changes: dict[str, Any]
    fields: dict[str, Any]
    stage: str


class TurnOut(Schema):
    id: UUID
    number: int
    epoch: int
    status: str
    base_version: int
    idempotency_key: str | None
    request: dict[str, Any]
    error: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None


class MessageOut(Schema):
    role: str
    content: str
    turn_id: str | None = None
