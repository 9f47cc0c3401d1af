"""Session endpoints: thin — parse, call one service, render."""

from __future__ import annotations

import re
from typing import Annotated

from django.http import HttpResponse
from ninja import Header, Query, Router, Status

from core.asyncdb import db, retry_while_busy
from core.errors import PreconditionRequired, ValidationFailed
from sessions_app import selectors, services
from sessions_app.auth import AuthedRequest
from sessions_app.models import AgentSession
from sessions_app.schemas import (
    FieldsPatchIn,
    FieldsPatchOut,
    PageIn,
    SessionCreateIn,
    SessionOut,
    SessionPage,
)

router = Router(tags=["sessions"])

_IF_MATCH = re.compile(r'^\s*(?:W/)?"?(\d{1,18})"?\s*$')


def etag(session: AgentSession) -> str:
    return f'"{session.version}"'


@router.post("", response={201: SessionOut})
async def create_session(request: AuthedRequest, payload: SessionCreateIn):
    session = await db(
        services.session_create,
        owner=request.auth.owner,
        key=payload.key,
        form=payload.form,
        metadata=payload.metadata,
        graph=payload.graph,
    )
    return Status(201, session)


@router.get("", response=SessionPage)
async def list_sessions(request: AuthedRequest, page: Query[PageIn]):
    items, count = await db(selectors.session_page, owner=request.auth.owner, limit=page.limit, offset=page.offset)
    return {"items": items, "count": count, "limit": page.limit, "offset": page.offset}


@router.get("/{key}", response=SessionOut)
async def get_session(request: AuthedRequest, key: str, response: HttpResponse):
    session = await db(selectors.session_get, owner=request.auth.owner, key=key)
    response["ETag"] = etag(session)
    return session


def expected_version(if_match: str | None, body_version: int | None) -> int:
    header_version = None
    if if_match is not None:
        match = _IF_MATCH.match(if_match)
        if not match:
            raise ValidationFailed('If-Match must be a session version such as "3"')
        header_version = int(match.group(1))
    if header_version is not None and body_version is not None and header_version != body_version:
        raise ValidationFailed("If-Match and expected_version disagree")
    version = header_version if header_version is not None else body_version
    if version is None:
        raise PreconditionRequired()
    return version


@router.patch("/{key}/fields", response=FieldsPatchOut)
async def set_fields(
    request: AuthedRequest,
    key: str,
    payload: FieldsPatchIn,
    response: HttpResponse,
    if_match: Annotated[str | None, Header(alias="If-Match")] = None,
):
    selectors.check_session_key(key)
    update = await retry_while_busy(
        services.session_set_fields,
        owner=request.auth.owner,
        key=key,
        values=payload.fields,
        expected_version=expected_version(if_match, payload.expected_version),
    )
    response["ETag"] = etag(update.session)
    out = SessionOut.from_orm(update.session).dict()
    return {**out, "field_changes": update.changes}


@router.delete("/{key}", response={204: None})
async def delete_session(request: AuthedRequest, key: str):
    await db(services.session_delete_for_owner, owner=request.auth.owner, key=key)
    return Status(204, None)
