"""The admin of sessions and API keys (read-only; writes through services).

A session's turns are turns_app's: its admin fills `session_turns`, the
extension point the session page reads them through (see that module).
"""

from sessions_app.admin import api_keys, sessions  # noqa: F401  (registers the admins)
