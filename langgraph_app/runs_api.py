"""The protocol's run endpoints that answer JSON: start a run in the
background or wait for it, list, read, join and cancel runs. Their SSE
twins are consumers (consumers.py)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.http import HttpResponse, JsonResponse
from ninja import Router

from core.asyncdb import db, interruptible
from core.errors import TurnCommitted, TurnNotFound, ValidationFailed
from langgraph_app import run_records, runs
from langgraph_app.auth import AuthedRequest
from langgraph_app.errors import run_not_found
from langgraph_app.params import flag, page
from langgraph_app.run_input import RunBody
from langgraph_app.schemas import RunCreateStateful, RunCreateStateless
from langgraph_app.thread_access import check_thread

runs_router = Router(tags=["Thread Runs"])
stateless_router = Router(tags=["Stateless Runs"])


def _located(payload: Any, run: runs.StartedRun, tail: str) -> HttpResponse:
    response = JsonResponse(payload, safe=False)
    for name, value in run.headers(tail=tail):
        response[name.decode()] = value.decode()
    return response


async def _start(
    request: AuthedRequest, thread_id: str | None, payload: RunBody, *, streamed: bool = True
) -> runs.StartedRun:
    return await runs.start_run(
        principal=request.auth,
        key=thread_id,
        body=payload,
        idempotency_key=request.headers.get("Idempotency-Key"),
        streamed=streamed,
    )


@runs_router.post("/threads/{thread_id}/runs", summary="Start a run in the background")
async def create_run(request: AuthedRequest, thread_id: str, payload: RunCreateStateful):
    run = await _start(request, thread_id, payload)
    return _located(await db(run_records.run_get, owner=run.owner, key=run.key, run_id=run.run_id), run, "stream")


@runs_router.post("/threads/{thread_id}/runs/wait", summary="Start a run and answer its final values")
async def wait_run(request: AuthedRequest, thread_id: str, payload: RunCreateStateful):
    run = await _start(request, thread_id, payload, streamed=False)
    return _located(await runs.wait_for(run), run, "join")


@stateless_router.post("/runs/wait", summary="A run on a throwaway thread; its final values")
async def wait_stateless(request: AuthedRequest, payload: RunCreateStateless):
    run = await _start(request, None, payload, streamed=False)
    try:
        answer = await runs.wait_for(run)
    finally:
        run.finish_in_background()
    return _located(answer, run, "join")


@stateless_router.post("/runs", summary="A run on a throwaway thread, in the background")
async def create_stateless(request: AuthedRequest, payload: RunCreateStateless):
    run = await _start(request, None, payload)
    answer = await db(run_records.run_get, owner=run.owner, key=run.key, run_id=run.run_id)
    run.finish_in_background()
    return _located({**answer, "thread_id": None} if run.delete_after else answer, run, "stream")


@runs_router.get("/threads/{thread_id}/runs", summary="The thread's runs, newest first")
async def list_runs(request: AuthedRequest, thread_id: str):
    limit, offset = page(request)
    status = request.GET.get("status") or None
    await check_thread(request.auth, "search", thread_id, metadata={}, status=status)
    return await interruptible(
        run_records.run_list, owner=request.auth.owner, key=thread_id, limit=limit, offset=offset, status=status
    )


@runs_router.get("/threads/{thread_id}/runs/{run_id}", summary="A run")
async def get_run(request: AuthedRequest, thread_id: str, run_id: str):
    await check_thread(request.auth, "read", thread_id, run_id=run_id)
    return await db(
        run_records.run_get, owner=request.auth.owner, key=thread_id, run_id=run_records.parse_run_id(run_id)
    )


@runs_router.get("/threads/{thread_id}/runs/{run_id}/join", summary="Wait for a run; its final values")
async def join_run(request: AuthedRequest, thread_id: str, run_id: str):
    owner = request.auth.owner
    run_uuid = run_records.parse_run_id(run_id)
    await check_thread(request.auth, "read", thread_id, run_id=run_id)
    await db(run_records.run_get, owner=owner, key=thread_id, run_id=run_uuid)
    return await runs.outcome(owner, thread_id, run_uuid)


@runs_router.post("/threads/{thread_id}/runs/{run_id}/cancel", summary="Cancel a run, on any process")
async def cancel_run(request: AuthedRequest, thread_id: str, run_id: str):
    action = request.GET.get("action") or "interrupt"
    if action not in ("interrupt", "rollback"):
        raise ValidationFailed("action must be interrupt or rollback")
    # As LangGraph's server answers a cancel: a run id that is no UUID is a
    # 422, an unknown run a 404, and a run that already ended is cancelled
    # already (202, or 204 with wait): nothing of it changes.
    try:
        run_uuid = UUID(run_id)
    except ValueError:
        raise ValidationFailed("Invalid run ID: must be a UUID") from None
    await check_thread(request.auth, "update", thread_id, run_id=run_id, action=action)
    try:
        await db(run_records.run_cancel, owner=request.auth.owner, key=thread_id, run_id=run_uuid)
    except TurnNotFound:
        raise run_not_found(run_id) from None
    except TurnCommitted:
        pass
    if flag(request, "wait"):
        # The abort is committed already; wait for the run's final event.
        await runs.final_event(run_uuid)
        return HttpResponse(status=204)
    return HttpResponse(status=202)
