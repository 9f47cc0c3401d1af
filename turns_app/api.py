"""Turn endpoints — chat, cancel, the turn log, the transcript, history,
rewind and fork — and the graph list: thin — parse, call one service or
selector, render."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Header, Query, Router, Status

from core.asyncdb import db, interruptible
from graphs.runtime.registry import describe
from sessions_app.auth import AuthedRequest
from sessions_app.schemas import PageIn, SessionOut
from sessions_app.selectors import check_session_key
from turns_app import selectors, services
from turns_app.execution import await_turn, start_turn
from turns_app.schemas import (
    CancelOut,
    ChatIn,
    ChatOut,
    ForkIn,
    GraphOut,
    HistoryPage,
    HistoryStateOut,
    MessageOut,
    RewindIn,
    TurnOut,
)
from turns_app.services import check_idempotency_key
from turns_app.types import Replay

router = Router(tags=["turns"])
graphs_router = Router(tags=["graphs"])


@router.post(
    "/{key}/turns",
    response={200: ChatOut},
    summary="Chat: run one turn and answer after it committed",
)
async def chat(
    request: AuthedRequest,
    key: str,
    payload: ChatIn,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
):
    started = await start_turn(
        owner=request.auth.owner,
        key=check_session_key(key),
        request=payload.canonical(),
        idempotency_key=check_idempotency_key(idempotency_key),
        # The client waits for the whole answer: no tokens to stream.
        deltas=False,
    )
    if isinstance(started, Replay):
        response = HttpResponse(started.body, content_type="application/json")
        response["Idempotent-Replayed"] = "true"
        return response
    # The stored body, verbatim: a later replay must be byte-identical.
    return HttpResponse(await await_turn(started), content_type="application/json")


@router.post("/{key}/turns/{turn_id}/cancel", response=CancelOut, summary="Cancel a running turn, on any process")
async def cancel(request: AuthedRequest, key: str, turn_id: UUID):
    turn = await db(services.turn_cancel, owner=request.auth.owner, key=check_session_key(key), turn_id=turn_id)
    return {"turn_id": turn.id, "status": turn.status, "error": turn.error}


@router.get("/{key}/turns", response=list[TurnOut])
async def turn_log(request: AuthedRequest, key: str):
    return await db(selectors.turn_list, owner=request.auth.owner, key=key)


@router.get("/{key}/messages", response=list[MessageOut], exclude_none=True)
async def messages(request: AuthedRequest, key: str):
    return await db(selectors.transcript, owner=request.auth.owner, key=key)


@router.get("/{key}/history", response=HistoryPage, summary="The session's committed states, newest first")
async def history(request: AuthedRequest, key: str, page: Query[PageIn]):
    items, count = await interruptible(
        selectors.history_page, owner=request.auth.owner, key=key, limit=page.limit, offset=page.offset
    )
    return {"items": items, "count": count, "limit": page.limit, "offset": page.offset}


@router.get("/{key}/history/{turn_id}", response=HistoryStateOut, summary="The state as of a committed turn")
async def history_state(request: AuthedRequest, key: str, turn_id: UUID):
    return await db(selectors.history_state, owner=request.auth.owner, key=key, turn_id=turn_id)


@router.post("/{key}/rewind", response=SessionOut, summary="Go back to just after a committed turn")
async def rewind(request: AuthedRequest, key: str, payload: RewindIn, response: HttpResponse):
    session = await db(
        services.session_rewind,
        owner=request.auth.owner,
        key=check_session_key(key),
        turn_id=payload.turn_id,
        expected_version=payload.expected_version,
    )
    response["ETag"] = f'"{session.version}"'
    return session


@router.post("/{key}/fork", response={201: SessionOut}, summary="A new session starting from a committed turn")
async def fork(request: AuthedRequest, key: str, payload: ForkIn):
    session = await db(
        services.session_fork,
        owner=request.auth.owner,
        key=check_session_key(key),
        turn_id=payload.turn_id,
        new_key=payload.new_key,
    )
    return Status(201, session)


@graphs_router.get("/graphs", response=list[GraphOut], summary="The registered graphs and their schemas")
async def graphs(request: HttpRequest):
    return [await db(describe, name=name) for name in settings.AGENT_GRAPHS]
