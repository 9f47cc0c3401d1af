from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from ninja import Schema
from pydantic import ConfigDict, Field, StrictInt, StrictStr


class SessionCreateIn(Schema):
    model_config = ConfigDict(extra="forbid")

    key: StrictStr | None = Field(None, description="client-chosen id, 1-255 of [A-Za-z0-9._:-]")
    form: list[Any] | None = Field(None, description="field specs; the default form if omitted")
    metadata: dict[str, Any] | None = None
    graph: StrictStr | None = Field(None, description="a registered graph (GET /api/graphs); AGENT_GRAPH if omitted")


class SessionOut(Schema):
    id: UUID
    key: str
    graph: str
    form: list[dict[str, Any]]
    fields: dict[str, Any]
    stage: str
    version: int
    epoch: int
    turn_count: int
    head_turn_id: UUID | None = Field(description="the committed turn the session's state is after")
    interrupts: list[dict[str, Any]] | None = Field(
        description='what the graph waits for: resume with a turn whose body is {"resume": …}'
    )
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class FieldsPatchIn(Schema):
    model_config = ConfigDict(extra="forbid")

    fields: dict[str, Any]
    expected_version: StrictInt | None = Field(None, ge=0, description="the version you read; or send it as If-Match")


class FieldsPatchOut(SessionOut):
    field_changes: dict[str, Any]


# Far past any real list; keeps OFFSET inside every database's integer range.
MAX_OFFSET = 2**31 - 1


class PageIn(Schema):
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, lt=MAX_OFFSET + 1)


class SessionSummary(Schema):
    """A session in a list: `GET /sessions/{key}` has its form, fields and metadata."""

    id: UUID
    key: str
    stage: str
    version: int
    epoch: int
    turn_count: int
    created_at: datetime
    updated_at: datetime


class SessionPage(Schema):
    items: list[SessionSummary]
    count: int
    limit: int
    offset: int
