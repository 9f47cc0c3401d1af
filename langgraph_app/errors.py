"""The protocol's own wording of some errors (what LangGraph's server says).
They render like every error, through the front door (core.http.errors) in
its PROTOCOL dialect: `{"detail", "code"}`, a version conflict as 409."""

from __future__ import annotations

from typing import Any

from core.errors import SessionBusy, SessionNotFound, TurnNotFound, ValidationFailed

BUSY_MESSAGE = "Thread is already running a task. Wait for it to finish or choose a different multitask strategy."


def thread_not_found(key: str) -> SessionNotFound:
    return SessionNotFound(f"Thread with ID {key} not found")


def run_not_found(run_id: Any) -> TurnNotFound:
    return TurnNotFound(f"Run with ID {run_id} not found")


def thread_busy() -> SessionBusy:
    return SessionBusy(BUSY_MESSAGE)


def not_supported(what: str) -> ValidationFailed:
    return ValidationFailed(f"{what} is not supported by this server (see docs/agent-protocol.md, 'Not supported')")
