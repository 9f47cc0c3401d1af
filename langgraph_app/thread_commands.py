"""LangGraph's thread-stream protocol, its commands:
`POST /threads/{thread_id}/commands` with `{"id", "method", "params"}`,
answered `{"type": "success", "id", "result"}` or `{"type": "error", "id",
"error", "message", "code"}` (docs/agent-protocol.md, "Thread streams").

A command is a run of the same runs.start_run every protocol run goes
through (claim → run → commit, `Idempotency-Key`, multitask strategy): only
it is a `thread_stream` run, so the graph step logs the run's v3 protocol
events (turns_app.thread_stream_parts). `run.start` starts a run
on the thread (made if need be), `input.respond` resumes the interrupt it
names, once (with the `update`, `goto`, `config` and `metadata` it is
given, as LangGraph's server forwards them): the resume is a turn like any
other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, JsonResponse
from ninja import Router
from pydantic import ValidationError

from core.asyncdb import db
from core.errors import ApiError
from core.http import errors
from core.http.bodies import parse_json
from langgraph_app import runs, thread_tree, threads
from langgraph_app.schemas import RunCreateStateful
from langgraph_app.thread_access import check_thread
from langgraph_app.thread_events import MAX_SEGMENT_LENGTH, MAX_SEGMENTS
from sessions_app.auth import Principal
from turns_app import selectors as turn_selectors

logger = logging.getLogger(__name__)

commands_router = Router(tags=["Thread Streams"])

MAX_COMMAND_ID = 2**53 - 1


class CommandError(Exception):
    def __init__(self, error: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.code = code


def _error(command_id: Any, error: str, message: str, *, status: int = 200, code: str | None = None) -> JsonResponse:
    return JsonResponse(errors.command_error(command_id, error, message, code), status=status)


def _code(error: ApiError) -> str:
    return str(getattr(error.code, "value", error.code))


def _protocol_error(error: ApiError) -> str:
    if error.status in (401, 403):
        return "permission_denied"
    if error.status == 404:
        return "no_such_run"
    if "not supported" in error.message:
        return "not_supported"
    if error.status < 500:
        return "invalid_argument"
    return "unknown_error"


def _run_body(params: dict[str, Any]) -> RunCreateStateful:
    try:
        return RunCreateStateful.model_validate(params)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise CommandError("invalid_argument", f"params.{where}: {first.get('msg')}", "validation_error") from None


@dataclass(frozen=True)
class Caller:
    """Who sent a command, and on what: the HTTP request's Idempotency-Key
    (a WebSocket frame has no headers of its own), and the seq of the last
    event this connection delivered (LangGraph's `applied_through_seq`)."""

    principal: Principal
    idempotency_key: str | None = None
    delivered_seq: int = 0

    @property
    def owner(self) -> str:
        return self.principal.owner


async def _start(caller: Caller, thread_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A command's run: a protocol run like any other, under the caller's Idempotency-Key."""
    run = await runs.start_run(
        principal=caller.principal,
        key=thread_id,
        body=_run_body(fields),
        idempotency_key=caller.idempotency_key,
        thread_stream=True,
    )
    return {"run_id": str(run.run_id)}


async def _run_start(caller: Caller, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    assistant = params.get("assistant_id")
    if not isinstance(assistant, str):
        raise CommandError("invalid_argument", "params.assistant_id is required", "validation_error")
    fields: dict[str, Any] = {"assistant_id": assistant, "if_not_exists": "create", "stream_mode": []}
    for name in ("input", "metadata", "config"):
        if params.get(name) is not None:
            fields[name] = params[name]
    if await _waits_on_an_interrupt(caller, thread_id):
        # As LangGraph's server reads a run.start on a paused thread (what
        # RemoteGraph sends for `Command(resume=…)`): the input answers it.
        fields["command"] = {"resume": fields.pop("input", None)}
    return await _start(caller, thread_id, fields)


async def _waits_on_an_interrupt(caller: Caller, thread_id: str) -> bool:
    try:
        session = await db(threads.thread_of, owner=caller.owner, key=thread_id)
    except ApiError:  # not made yet: run.start makes it
        return False
    return bool(session.interrupts)


def _namespace(raw: Any) -> list[str]:
    if raw is None:
        return []
    if (
        not isinstance(raw, list)
        or len(raw) > MAX_SEGMENTS
        or not all(isinstance(s, str) and len(s) <= MAX_SEGMENT_LENGTH for s in raw)
    ):
        raise CommandError(
            "invalid_argument",
            f"params.namespace must be a list of at most {MAX_SEGMENTS} strings of at most {MAX_SEGMENT_LENGTH}",
            "validation_error",
        )
    return raw


MAX_RESPONSES = 64


def _respond_entries(params: dict[str, Any]) -> list[tuple[str, Any]]:
    """(interrupt id, response) of each answer: `interrupt_id`/`response`,
    or a `responses` batch of them (several interrupts pending at once). A
    subgraph's interrupt is answered by its id, which LangGraph makes from
    the subgraph's namespace: a `namespace` is checked for its shape only,
    as LangGraph's server does for an interrupt it has not seen on the
    connection."""
    raw = params.get("responses")
    if raw is None:
        raw = [params]
    elif not isinstance(raw, list) or not 0 < len(raw) <= MAX_RESPONSES or not all(isinstance(r, dict) for r in raw):
        message = f"params.responses must be 1 to {MAX_RESPONSES} objects"
        raise CommandError("invalid_argument", message, "validation_error")
    entries = []
    for entry in raw:
        interrupt_id = entry.get("interrupt_id")
        if not isinstance(interrupt_id, str) or len(interrupt_id) > MAX_SEGMENT_LENGTH:
            raise CommandError("invalid_argument", "params.interrupt_id is required", "validation_error")
        _namespace(entry.get("namespace"))
        entries.append((interrupt_id, entry.get("response")))
    return entries


async def _input_respond(caller: Caller, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    entries = _respond_entries(params)
    session = await db(threads.thread_of, owner=caller.owner, key=thread_id)
    pending = {i.get("id") for i in (session.interrupts or ()) if isinstance(i, dict)}
    missing = [i for i, _ in entries if i not in pending]
    # Answered already: only a retry under the same Idempotency-Key goes on,
    # to be replayed (docs/turn-protocol.md, "Idempotency"); else it is no
    # interrupt the thread waits on.
    retried = False
    if missing and caller.idempotency_key:
        retried = await db(
            turn_selectors.has_turn_with_key, owner=caller.owner, key=thread_id, idempotency_key=caller.idempotency_key
        )
    if missing and not retried:
        raise CommandError("no_such_interrupt", f"the thread waits on no interrupt {missing[0][:80]!r}")
    # LangGraph's map of answers by interrupt id, as its server sends it:
    # the same request whatever else waits, so a retry is the same request.
    resume = dict(entries)
    # With the thread's own assistant, as LangGraph's server resumes (its
    # config and context, as a run of it with a Command would have them):
    # every run keeps it in the thread's metadata (runs._stamp); a thread
    # made by /api/ has none, and runs its graph.
    stamped = (session.metadata or {}).get("assistant_id") if isinstance(session.metadata, dict) else None
    assistant = stamped if isinstance(stamped, str) and stamped else session.graph
    # What else LangGraph's server forwards of the command: `update` and
    # `goto` in the same Command as the resume (one checkpoint for all),
    # `config` and `metadata` as the run's, checked and bounded as a run's.
    run = _given(params, ("config", "metadata"))
    command = {"resume": resume, **_given(params, ("update", "goto"))}
    fields = {"assistant_id": assistant, "command": command, "stream_mode": [], **run}
    await _start(caller, thread_id, fields)
    return {}


def _given(params: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    # A null is absent, as LangGraph's server reads these.
    return {name: params[name] for name in names if params.get(name) is not None}


async def _agent_get_tree(caller: Caller, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
    await check_thread(caller.principal, "read", thread_id)
    session = await db(threads.thread_of, owner=caller.owner, key=thread_id)
    return {"tree": await thread_tree.tree_of(owner=caller.owner, key=thread_id, graph=session.graph)}


COMMANDS = {"run.start": _run_start, "input.respond": _input_respond, "agent.getTree": _agent_get_tree}
# Served on the WebSocket only (consumers.ThreadStreamSocket): over HTTP a
# subscription is the `POST /threads/{id}/stream/events` connection itself.
SOCKET_COMMANDS = frozenset({"subscription.subscribe", "subscription.unsubscribe"})


def check_envelope(payload: Any) -> dict[str, Any] | None:
    """The error answer for a command that is not `{"id": int, "method": str, "params"?: object}`, else None."""
    command_id = payload.get("id") if isinstance(payload, dict) else None
    if (
        not isinstance(payload, dict)
        or isinstance(command_id, bool)
        or not isinstance(command_id, int)
        or not 0 <= command_id <= MAX_COMMAND_ID
        or not isinstance(payload.get("method"), str)
    ):
        return errors.command_error(
            command_id if isinstance(command_id, int) and not isinstance(command_id, bool) else None,
            "invalid_argument",
            "Protocol commands must include an integer id and string method.",
            "validation_error",
        )
    if payload.get("params") is not None and not isinstance(payload["params"], dict):
        return errors.command_error(command_id, "invalid_argument", "params must be an object", "validation_error")
    return None


def success(command_id: int, result: dict[str, Any], caller: Caller) -> dict[str, Any]:
    meta = {"applied_through_seq": caller.delivered_seq}
    return {"type": "success", "id": command_id, "result": result, "meta": meta}


async def run_command(caller: Caller, thread_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One command (its envelope checked) → its answer, success or error."""
    command_id = payload["id"]
    method = payload["method"]
    params = payload.get("params") or {}
    handler = COMMANDS.get(method)
    if handler is None:
        if method in SOCKET_COMMANDS:
            message = f"{method} is served on the WebSocket; over HTTP, POST /threads/{{id}}/stream/events subscribes"
            return errors.command_error(command_id, "not_supported", message)
        return errors.command_error(command_id, "unknown_command", f"unknown command {method[:80]!r}")
    try:
        result = await handler(caller, thread_id, params)
    except CommandError as exc:
        return errors.command_error(command_id, exc.error, exc.message, exc.code)
    except ApiError as exc:
        return errors.command_error(command_id, _protocol_error(exc), exc.message, _code(exc))
    return success(command_id, result, caller)


# Not in our OpenAPI document: LangGraph's published spec (tests/langgraph_api/spec/) has
# no thread-stream endpoints to conform to.
@commands_router.post(
    "/threads/{thread_id}/commands", summary="A thread-stream protocol command", include_in_schema=False
)
async def thread_command(request: HttpRequest, thread_id: str):
    try:
        payload = parse_json(request.body)
    except ApiError as exc:
        return _error(None, "invalid_argument", exc.message, status=exc.status, code=_code(exc))
    refused = check_envelope(payload)
    if refused is not None:
        return JsonResponse(refused, status=400)
    # ProtocolAuth let the request in: ninja set `auth` to the caller's key.
    auth: Principal = request.auth  # type: ignore[attr-defined]
    caller = Caller(principal=auth, idempotency_key=request.headers.get("Idempotency-Key"))
    return JsonResponse(await run_command(caller, thread_id, payload))
