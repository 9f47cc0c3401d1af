"""What the session admin (sessions_app's) shows of a session's turns: the
turn inline, links to turns, the transcript, the checkpoint storage and the
turn counts of the delete pages. Registered into the session admin's
extension point when Django's admin autodiscovery imports this package
(`sessions_app/admin/session_turns.py` describes the slot)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessions_app.admin.session_turns import SessionTurns, register_session_turns
from turns_app.admin.turns import AgentTurnInline, turn_link_by_id
from turns_app.checkpoint_tables import thread_storage
from turns_app.history import transcript
from turns_app.selectors import turn_counts

if TYPE_CHECKING:
    from uuid import UUID

    from sessions_app.models import AgentSession


class TurnsOfSessions(SessionTurns):
    inlines = (AgentTurnInline,)

    def turn_link(self, turn_id: UUID) -> str:
        return turn_link_by_id(turn_id)

    def transcript(self, session: AgentSession) -> list[dict[str, Any]]:
        return transcript(session.head_turn_id)

    def checkpoint_storage(self, session: AgentSession) -> dict[str, int]:
        # Its threads are "<session id>:<epoch>:<turn id>" (turns_app.types).
        return thread_storage(f"{session.id}:")

    def turn_counts(self, session_ids: list[Any]) -> dict[Any, int]:
        return turn_counts(session_ids=session_ids)


register_session_turns(TurnsOfSessions())
