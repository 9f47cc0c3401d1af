"""Chat endpoints: thin — parse, start or replay the turn, render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import Header, Router
from typing_extensions import Annotated

from agentsite.asyncdb import db
from sessions_app.selectors import check_session_key
from turns_app import selectors
from turns_app.execution import await_turn, start_turn
from turns_app.schemas import ChatIn, ChatOut, MessageOut, TurnOut
from turns_app.services import check_idempotency_key
from turns_app.types import Replay

router = Router(tags=["turns"])


@router.post(
    "/{key}/turns",
    response={200: ChatOut},
    summary="Chat: run one turn and answer after it committed",
)
async def chat(
    request: HttpRequest,
    key: str,
    payload: ChatIn,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
):
    started = await start_turn(
        owner=request.auth.owner,
        key=check_session_key(key),
        request=payload.canonical(),
        idempotency_key=check_idempotency_key(idempotency_key),
    )
    if isinstance(started, Replay):
        response = HttpResponse(started.body, content_type="application/json")
        response["Idempotent-Replayed"] = "true"
        return response
    # The stored body, verbatim: a later replay must be byte-identical.
    return HttpResponse(await await_turn(started), content_type="application/json")


@router.get("/{key}/turns", response=list[TurnOut])
async def turn_log(request: HttpRequest, key: str):
    return await db(selectors.turn_list, owner=request.auth.owner, key=key)


@router.get("/{key}/messages", response=list[MessageOut])
async def messages(request: HttpRequest, key: str):
    return await db(selectors.transcript, owner=request.auth.owner, key=key)
