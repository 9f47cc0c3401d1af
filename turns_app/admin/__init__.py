"""The admin of sessions and turns (read-only; writes through services)."""

from turns_app.admin import sessions, turns  # noqa: F401  (registers the admins)
