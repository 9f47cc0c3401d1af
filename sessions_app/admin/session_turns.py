"""The session admin's extension point: what a session's page shows of its
turns.

A session's page is mostly its turns: the turn inline, links to the head and
active turn, the transcript, the checkpoint storage, and the counts on the
delete pages. Turns live in turns_app, the layer above this one
(docs/architecture.md, "Layers"), so this admin cannot import them. It asks
the `SessionTurns` registered here instead, and turns_app fills the slot from
its own admin module:

    # turns_app/admin/session_turns.py
    class TurnsOfSessions(SessionTurns): ...
    register_session_turns(TurnsOfSessions())

Django's admin autodiscovery (`django.contrib.admin` in INSTALLED_APPS)
imports every installed app's `admin` module before the first request, and
the session admin reads the slot per request (`get_inlines` and the display
methods), so the order the apps' admins load in does not matter. The
defaults of `SessionTurns` are a site without turns: no inline, no messages,
no checkpoints.

Why a slot rather than Django's other way of extending another app's admin,
unregistering its ModelAdmin and registering a subclass with an extra
inline (as Django's docs extend UserAdmin): then the session page would be
turns_app's class again, and which admin is live would depend on which app's
admin module ran last. Here the session admin stays sessions_app's, and what
turns_app adds is one inline and four small functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from uuid import UUID

    from django.contrib.admin.options import InlineModelAdmin

    from sessions_app.models import AgentSession


class SessionTurns:
    """What the session admin shows of a session's turns. Subclass it and
    override what your app has; these defaults are a site without turns."""

    # Inlines on the session's change page (read-only ones: the page is).
    inlines: tuple[type[InlineModelAdmin], ...] = ()

    def turn_link(self, turn_id: UUID) -> str:
        """A session's head or active turn, as HTML (a link, by its label)."""
        return str(turn_id)

    def transcript(self, session: AgentSession) -> list[dict[str, Any]]:
        """The committed messages up to the session's head turn, oldest first:
        `{"role", "content", "tool_calls"?}` each."""
        return []

    def checkpoint_storage(self, session: AgentSession) -> dict[str, int]:
        """`{"rows", "bytes"}` of the checkpoints of every thread of the
        session (all epochs)."""
        return {"rows": 0, "bytes": 0}

    def turn_counts(self, session_ids: list[Any]) -> dict[Any, int]:
        """Turns per session id (a missing id has none), in one query."""
        return {}


_registered: SessionTurns | None = None


def register_session_turns(turns: SessionTurns) -> None:
    """Fills the slot; called once, at import of the app's admin module."""
    global _registered
    if _registered is not None and _registered is not turns:
        raise ImproperlyConfigured(
            f"The session admin's turns are already {type(_registered).__qualname__}; "
            f"cannot register {type(turns).__qualname__} too."
        )
    _registered = turns


def session_turns() -> SessionTurns:
    """The registered `SessionTurns`, or the defaults if no app has one."""
    return _registered or _NO_TURNS


_NO_TURNS = SessionTurns()
