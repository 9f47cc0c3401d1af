"""The errors services raise: a machine-readable code, a fitting HTTP
status and, where a client should come back later, `retry_after` seconds.
Every edge renders them through one front door (core.http.errors), in
/api/'s `{"error": {"code", "message"}}` or the protocol's `{"detail", "code"}`
(docs/api.md, "Errors")."""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from uuid import UUID


class ErrorCode(StrEnum):
    UNAUTHORIZED = "unauthorized"
    # The AGENT_AUTH_PATH handler raised (not its HTTPException), or refused
    # with a 4xx other than 401/403 (then under that status).
    AUTH_FAILED = "auth_failed"
    MALFORMED_REQUEST = "malformed_request"
    VALIDATION_ERROR = "validation_error"
    INVALID_FIELDS = "invalid_fields"
    INVALID_FORM = "invalid_form"
    INVALID_SESSION_KEY = "invalid_session_key"
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"
    SESSION_NOT_FOUND = "session_not_found"
    TURN_NOT_FOUND = "turn_not_found"
    SESSION_EXISTS = "session_exists"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    TURN_IN_PROGRESS = "turn_in_progress"
    SESSION_BUSY = "session_busy"
    STALE_TURN = "stale_turn"
    VERSION_CONFLICT = "version_conflict"
    PRECONDITION_REQUIRED = "precondition_required"
    MODEL_ERROR = "model_error"
    MODEL_TIMEOUT = "model_timeout"
    STORAGE_UNAVAILABLE = "storage_unavailable"
    TURN_CANCELLED = "turn_cancelled"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    INTERNAL_ERROR = "internal_error"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    INTERRUPT_PENDING = "interrupt_pending"
    INTERRUPT_RESOLVED = "interrupt_resolved"
    TURN_COMMITTED = "turn_committed"
    UNKNOWN_GRAPH = "unknown_graph"
    GRAPH_MISMATCH = "graph_mismatch"
    GRAPH_WITHOUT_MESSAGES = "graph_without_messages"
    STATE_LOST = "state_lost"
    EFFECT_REFUSED = "effect_refused"
    # Why a turn was aborted, as its `error` event and the turn log say.
    LEASE_EXPIRED = "lease_expired"
    SERVER_RESTARTED = "server_restarted"
    SERVER_SHUTDOWN = "server_shutdown"
    # Answered by the HTTP edge (core.http), before any endpoint runs.
    FORBIDDEN = "forbidden"
    DISALLOWED_HOST = "disallowed_host"
    REQUEST_TIMEOUT = "request_timeout"
    HEADERS_TOO_LARGE = "headers_too_large"
    TOO_MANY_SESSIONS = "too_many_sessions"
    # /langgraph/'s assistants (assistants_app).
    ASSISTANT_NOT_FOUND = "assistant_not_found"
    ASSISTANT_EXISTS = "assistant_exists"
    SYSTEM_ASSISTANT = "system_assistant"


class ApiError(Exception):
    code: ErrorCode = ErrorCode.VALIDATION_ERROR
    status: int = 422
    default_message = "the request is invalid"
    # Seconds a client should wait before trying again (sent as Retry-After);
    # None: retrying the same request will not help.
    retry_after: int | None = None

    def __init__(self, message: str | None = None, *, details: Any = None) -> None:
        self.message = message or self.default_message
        self.details = details
        super().__init__(self.message)

    @classmethod
    def of(cls, status: int, code: str, message: str) -> ApiError:
        """An error with no class of its own: what ninja or the HTTP edge answered."""
        error = cls(message)
        error.status, error.code = status, code  # type: ignore[assignment]
        return error


class Unauthorized(ApiError):
    code, status, default_message = ErrorCode.UNAUTHORIZED, 401, "a valid API key is required"


class MalformedRequest(ApiError):
    code, status, default_message = ErrorCode.MALFORMED_REQUEST, 400, "the request body is not valid JSON"


class ValidationFailed(ApiError):
    code, status = ErrorCode.VALIDATION_ERROR, 422


class InvalidFields(ApiError):
    code, status, default_message = ErrorCode.INVALID_FIELDS, 422, "some field values are invalid"


class InvalidForm(ApiError):
    code, status, default_message = ErrorCode.INVALID_FORM, 422, "the form spec is invalid"


class InvalidSessionKey(ApiError):
    code, status = ErrorCode.INVALID_SESSION_KEY, 422
    default_message = "session keys are 1-255 characters of A-Z a-z 0-9 . _ : -, not . or .."


class InvalidIdempotencyKey(ApiError):
    code, status = ErrorCode.INVALID_IDEMPOTENCY_KEY, 422
    default_message = "Idempotency-Key must be 1-128 visible ASCII characters"


class SessionNotFound(ApiError):
    code, status, default_message = ErrorCode.SESSION_NOT_FOUND, 404, "no such session"


class TurnNotFound(ApiError):
    code, status, default_message = ErrorCode.TURN_NOT_FOUND, 404, "no such turn"


class SessionExists(ApiError):
    code, status, default_message = ErrorCode.SESSION_EXISTS, 409, "a session with this key exists"


class IdempotencyConflict(ApiError):
    code, status = ErrorCode.IDEMPOTENCY_CONFLICT, 409
    default_message = "this Idempotency-Key was used with a different request"


class TurnInProgress(ApiError):
    code, status = ErrorCode.TURN_IN_PROGRESS, 409
    default_message = "the turn with this Idempotency-Key is still running"


class SessionBusy(ApiError):
    code, status = ErrorCode.SESSION_BUSY, 409
    default_message = "another turn is running on this session; retry later"
    retry_after = 1

    def __init__(self, message: str | None = None, *, holder: UUID | None = None, details: Any = None) -> None:
        super().__init__(message, details=details)
        # The turn holding the session, when known: a waiter wakes when it
        # ends instead of polling (never sent to the client).
        self.holder = holder


class StaleTurn(ApiError):
    code, status = ErrorCode.STALE_TURN, 409
    default_message = "the session changed while the turn ran; nothing was committed"


class VersionConflict(ApiError):
    code, status = ErrorCode.VERSION_CONFLICT, 412
    default_message = "the session's version does not match the expected version"


class PreconditionRequired(ApiError):
    code, status = ErrorCode.PRECONDITION_REQUIRED, 428
    default_message = "send If-Match or expected_version with the version you read"


class ModelError(ApiError):
    code, status, default_message = ErrorCode.MODEL_ERROR, 502, "the model failed; nothing was committed"


class ModelTimeout(ApiError):
    code, status = ErrorCode.MODEL_TIMEOUT, 504
    default_message = "the model did not answer in time; nothing was committed"


class StorageUnavailable(ApiError):
    code, status = ErrorCode.STORAGE_UNAVAILABLE, 503
    default_message = "the database is unavailable; retry later"
    retry_after = 5


class TurnCancelled(ApiError):
    code, status = ErrorCode.TURN_CANCELLED, 409
    default_message = "the turn was cancelled; nothing was committed"


class NotFound(ApiError):
    code, status, default_message = ErrorCode.NOT_FOUND, 404, "nothing here"


class MethodNotAllowed(ApiError):
    code, status, default_message = ErrorCode.METHOD_NOT_ALLOWED, 405, "method not allowed"


class InternalError(ApiError):
    code, status, default_message = ErrorCode.INTERNAL_ERROR, 500, "an unexpected error occurred"


class PayloadTooLarge(ApiError):
    code, status, default_message = ErrorCode.PAYLOAD_TOO_LARGE, 413, "the request body is too large"


class ServerShutdown(ApiError):
    """The process is stopping: a new turn is refused, and a turn still
    running when the grace period ends is aborted with this."""

    code, status = ErrorCode.SERVER_SHUTDOWN, 503
    default_message = "the server is shutting down; nothing was committed, retry with the same key"
    retry_after = 1


class InterruptPending(ApiError):
    code, status = ErrorCode.INTERRUPT_PENDING, 409
    default_message = (
        "the graph is waiting for an answer to its interrupt: send a turn with `resume` "
        "(details.interrupts has what it asked), or rewind the session"
    )


class InterruptResolved(ApiError):
    code, status = ErrorCode.INTERRUPT_RESOLVED, 409
    default_message = "no interrupt is waiting for a resume (it was answered, or there never was one)"


class TurnCommitted(ApiError):
    code, status = ErrorCode.TURN_COMMITTED, 409
    default_message = "the turn has already committed; it cannot be cancelled"


class StateLost(ApiError):
    code, status = ErrorCode.STATE_LOST, 409
    default_message = (
        "the paused run's checkpoint is gone, so it cannot be resumed; nothing was committed. "
        "Rewind the session (POST …/rewind) to go on from an earlier turn"
    )


class EffectRefused(ApiError):
    """An effect's application refused it inside the commit (a booking that
    no longer fits its slot): the commit rolled back, nothing of the turn
    landed, and a pause the turn answered still waits for an answer."""

    code, status = ErrorCode.EFFECT_REFUSED, 409
    default_message = "the commit refused an effect of the turn; nothing was committed"


class UnknownGraph(ApiError):
    code, status = ErrorCode.UNKNOWN_GRAPH, 422
    default_message = "no graph of that name is registered (GET /api/graphs lists them)"


class AssistantNotFound(ApiError):
    code, status, default_message = ErrorCode.ASSISTANT_NOT_FOUND, 404, "no such assistant"


class AssistantExists(ApiError):
    code, status, default_message = ErrorCode.ASSISTANT_EXISTS, 409, "an assistant with this id exists"


class SystemAssistant(ApiError):
    code, status = ErrorCode.SYSTEM_ASSISTANT, 409
    default_message = "a graph's system assistant is read-only: create an assistant of that graph instead"


class GraphMismatch(ApiError):
    code, status = ErrorCode.GRAPH_MISMATCH, 409
    default_message = "the session runs another graph; a session keeps its graph until it is deleted"


class GraphWithoutMessages(ApiError):
    """An /api/ turn is a message: a graph without a `messages` channel has
    nowhere to put it (it runs under /langgraph/, its input its own channels)."""

    code, status = ErrorCode.GRAPH_WITHOUT_MESSAGES, 409
    default_message = (
        "the session's graph has no `messages` channel, so it takes no /api/ turn; "
        "run it under /langgraph/ with its own input channels"
    )


def error_for(code: str | None, message: str | None = None) -> ApiError:
    """The error of a code, as the class that raises it would make it (a
    turn's stored error, raised again to the client that waits for it)."""
    for cls in _subclasses(ApiError):
        if str(cls.code) == code and cls.__dict__.get("code") is not None:
            return cls(message)
    return ApiError.of(409, code or ErrorCode.INTERNAL_ERROR, message or "the turn failed")


def _subclasses(cls: type[ApiError]) -> list[type[ApiError]]:
    found: list[type[ApiError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


class TooManySessions(ApiError):
    code, status = ErrorCode.TOO_MANY_SESSIONS, 429
    default_message = "this API key's owner has too many sessions; delete some first"
    # A quota, not a load: it lifts when sessions are deleted (by the owner,
    # or by retention), so a client looking again should not hammer.
    retry_after = 60
