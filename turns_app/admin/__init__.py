"""The admin of turns (read-only: turns are written by the turn protocol
only), and what the session admin shows of a session's turns."""

from turns_app.admin import session_turns, turns  # noqa: F401  (registers the admin and the session page's turns)
