"""Errors in the protocol's shape. LangGraph's server answers `{"detail":
message}` (what the SDKs read); we add our machine-readable `code`. The
statuses are ours except where the SDKs expect another: a version conflict
is 409 here (the SDKs map 409 to a conflict, 412 to nothing)."""

from __future__ import annotations

import json
from typing import Any

from core.errors import ApiError, ErrorCode, SessionBusy, SessionNotFound, TurnNotFound, ValidationFailed

STATUS_FOR_SDK = {412: 409}

BUSY_MESSAGE = "Thread is already running a task. Wait for it to finish or choose a different multitask strategy."


def thread_not_found(key: str) -> SessionNotFound:
    return SessionNotFound(f"Thread with ID {key} not found")


def run_not_found(run_id: Any) -> TurnNotFound:
    return TurnNotFound(f"Run with ID {run_id} not found")


def thread_busy() -> SessionBusy:
    return SessionBusy(BUSY_MESSAGE)


def not_supported(what: str) -> ValidationFailed:
    return ValidationFailed(f"{what} is not supported by this server (see README, 'Use it from LangGraph clients')")


def status_of(error: ApiError) -> int:
    return STATUS_FOR_SDK.get(error.status, error.status)


def body_of(error: ApiError) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": error.message, "code": str(error.code)}
    if error.details is not None:
        body["details"] = error.details
    return body


def encoded(error: ApiError) -> bytes:
    return json.dumps(body_of(error), ensure_ascii=False).encode()


def run_error(code: str | None, message: str | None) -> dict[str, Any]:
    """A failed run as the protocol reports it: the SSE `error` event's data,
    and `__error__` in a wait/join answer."""
    return {"error": code or str(ErrorCode.INTERNAL_ERROR), "message": message or "the run failed"}
