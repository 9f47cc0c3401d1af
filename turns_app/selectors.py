"""Reads of turns and transcripts."""

from __future__ import annotations

from typing import Any

from sessions_app.selectors import session_get
from turns_app.models import AgentTurn


def turn_list(*, owner: str, key: str) -> list[AgentTurn]:
    """The current epoch's turns, oldest first."""
    session = session_get(owner=owner, key=key)
    return list(AgentTurn.objects.filter(session=session, epoch=session.epoch).order_by("number"))


def transcript(*, owner: str, key: str) -> list[dict[str, Any]]:
    """Committed messages only: the snapshot is written by the commit."""
    session = session_get(owner=owner, key=key)
    return list(session.snapshot.get("messages", []))
