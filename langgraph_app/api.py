"""The protocol's JSON endpoints, a NinjaAPI mounted at /langgraph/ (its
SSE endpoints are consumers: consumers.py). Thin: parse, call the services
and selectors /api/ uses, render LangGraph's shapes. Errors are `{"detail",
"code"}` (errors.py)."""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import json
import logging
import uuid
from datetime import datetime, timezone
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI, Router
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from graphs.runtime.registry import build_graph, describe
from core.asyncdb import db, is_storage_error, retry_while_busy
from core.errors import (
    ApiError,
    InternalError,
    MalformedRequest,
    PayloadTooLarge,
    SessionExists,
    SessionNotFound,
    StorageUnavailable,
    TurnCommitted,
    TurnNotFound,
    Unauthorized,
    ValidationFailed,
    VersionConflict,
)
from core.http.bodies import parse_json, validation_failed
from sessions_app import selectors as sessions
from sessions_app import services as session_services
from turns_app import services as turn_services
from langgraph_app import runs, threads
from langgraph_app.auth import ProtocolAuth
from langgraph_app.errors import body_of, not_supported, run_not_found, status_of, thread_not_found
from langgraph_app.ids import (
    CheckpointRef,
    UnknownAssistant,
    assistant_id,
    graph_of_assistant,
    parse_checkpoint_id,
)
from langgraph_app.openapi import add_stream_endpoints
from turns_app.stream_parts import dumps
from langgraph_app.schemas import (
    PAGE_MAX,
    AssistantCountRequest,
    AssistantSearchRequest,
    RunCreateStateful,
    RunCreateStateless,
    ThreadCountRequest,
    ThreadCreate,
    ThreadPatch,
    ThreadSearchRequest,
    ThreadStateCheckpointRequest,
    ThreadStateSearch,
    ThreadStateUpdate,
)

logger = logging.getLogger(__name__)

TRUE = frozenset({"1", "true", "yes", "on"})
# Assistants are the registered graphs: they exist as long as the process.
REGISTERED_AT = datetime.now(timezone.utc).isoformat()


class JsonParser(Parser):
    def parse_body(self, request: HttpRequest) -> Any:
        return parse_json(request.body)


class ProtocolApi(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        return add_stream_endpoints(schema, self.get_root_path(path_params or {}) if path_prefix is None else path_prefix)


api = ProtocolApi(
    parser=JsonParser(),
    title="agentsite: LangGraph Agent Protocol",
    version="1.0",
    description=(
        "LangGraph's Agent Server API over agentsite's sessions and turns: assistants are graphs, "
        "threads are sessions, runs are turns. Errors are `{\"detail\", \"code\"}`."
    ),
    auth=ProtocolAuth(),
    urls_namespace="langgraph",
)


def error_response(request: HttpRequest, error: ApiError) -> HttpResponse:
    return api.create_response(request, body_of(error), status=status_of(error))


@api.exception_handler(ApiError)
def on_api_error(request, exc):
    return error_response(request, exc)


@api.exception_handler(ValidationError)
def on_validation_error(request, exc):
    return error_response(request, validation_failed(exc.errors))


@api.exception_handler(AuthenticationError)
def on_auth_error(request, exc):
    return error_response(request, Unauthorized())


@api.exception_handler(RequestDataTooBig)
def on_too_big(request, exc):
    return error_response(request, PayloadTooLarge())


@api.exception_handler(HttpError)
def on_http_error(request, exc):
    if isinstance(exc.__cause__, ApiError):
        return error_response(request, exc.__cause__)
    if isinstance(exc.__cause__, RequestDataTooBig):
        return error_response(request, PayloadTooLarge())
    if exc.status_code == 400:
        return error_response(request, MalformedRequest())
    error = ApiError(str(exc))
    error.status = exc.status_code
    return error_response(request, error)


@api.exception_handler(Exception)
def on_unexpected(request, exc):
    if is_storage_error(exc):
        logger.warning("storage unavailable: %r", exc)
        return error_response(request, StorageUnavailable())
    logger.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(request, InternalError())


def not_found(request: HttpRequest, rest: str) -> JsonResponse:
    """Unmatched paths under /langgraph/ answer in the protocol's shape."""
    return JsonResponse({"detail": f"no endpoint at {request.path}", "code": "not_found"}, status=404)


def _flag(request: HttpRequest, name: str) -> bool:
    return (request.GET.get(name) or "").strip().lower() in TRUE


def _page(request: HttpRequest, default: int = 10) -> tuple[int, int]:
    try:
        limit = int(request.GET.get("limit") or default)
        offset = int(request.GET.get("offset") or 0)
    except ValueError:
        raise ValidationFailed("limit and offset must be whole numbers") from None
    if not (1 <= limit <= PAGE_MAX) or offset < 0:
        raise ValidationFailed(f"limit must be 1-{PAGE_MAX} and offset at least 0")
    return limit, offset


def _select(item: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k in select} if select else item


# --- meta --------------------------------------------------------------------------------------

meta = Router(tags=["System"])


@meta.get("/info", auth=None, summary="Server information (reachable without a key)")
async def info(request: HttpRequest):
    return {
        "version": "agentsite-1.0",
        "langgraph_py_version": importlib.metadata.version("langgraph"),
        "flags": {"assistants": True, "crons": False, "langsmith": False, "langsmith_tracing_replicas": False},
        "host": {"kind": "self-hosted", "project_id": None, "revision_id": None, "tenant_id": None},
        "metadata": {},
    }


def _database_answers() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


@meta.get("/ok", auth=None, summary="Liveness; ?check_db=1 also asks the database")
async def ok(request: HttpRequest):
    if _flag(request, "check_db"):
        try:
            await asyncio.wait_for(db(_database_answers), 3)
        except Exception:
            raise StorageUnavailable() from None
    return {"ok": True}


# --- assistants = registered graphs ----------------------------------------------------------------

assistants = Router(tags=["Assistants"])


@functools.lru_cache(maxsize=64)
def _description(graph: str) -> str | None:
    return describe(graph)["description"] or None


def _assistant(graph: str) -> dict[str, Any]:
    return {
        "assistant_id": assistant_id(graph),
        "graph_id": graph,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "name": graph,
        "description": _description(graph),
        "version": 1,
        "created_at": REGISTERED_AT,
        "updated_at": REGISTERED_AT,
    }


def _graph_or_404(raw: str) -> str:
    try:
        return graph_of_assistant(raw)
    except UnknownAssistant:
        raise SessionNotFound(f"Assistant {raw[:80]} not found") from None


def _assistants(filters: AssistantSearchRequest | AssistantCountRequest) -> list[dict[str, Any]]:
    found = [_assistant(graph) for graph in settings.AGENT_GRAPHS]
    if filters.graph_id is not None:
        found = [a for a in found if a["graph_id"] == filters.graph_id]
    if filters.name is not None:
        found = [a for a in found if filters.name.lower() in a["name"].lower()]
    if filters.metadata:
        found = [a for a in found if all(a["metadata"].get(k) == v for k, v in filters.metadata.items())]
    return found


@assistants.post("/assistants/search", summary="The registered graphs, as assistants")
async def search_assistants(request: HttpRequest, payload: AssistantSearchRequest):
    found = await asyncio.to_thread(_assistants, payload)
    if payload.sort_by:
        found.sort(key=lambda a: str(a[payload.sort_by]), reverse=payload.sort_order == "desc")
    return [_select(a, payload.select) for a in found[payload.offset : payload.offset + payload.limit]]


@assistants.post("/assistants/count")
async def count_assistants(request: HttpRequest, payload: AssistantCountRequest):
    return len(await asyncio.to_thread(_assistants, payload))


@assistants.get("/assistants/{assistant_id}", summary="An assistant: a graph name or its UUID")
async def get_assistant(request: HttpRequest, assistant_id: str):
    return await asyncio.to_thread(_assistant, _graph_or_404(assistant_id))


def _drawable(graph: str, xray: bool | int) -> dict[str, Any]:
    return json.loads(dumps(build_graph(graph, checkpointer=None).get_graph(xray=xray).to_json()))


@assistants.get("/assistants/{assistant_id}/graph", summary="The graph's nodes and edges")
async def get_assistant_graph(request: HttpRequest, assistant_id: str):
    graph = _graph_or_404(assistant_id)
    raw = (request.GET.get("xray") or "false").strip().lower()
    xray: bool | int = int(raw) if raw.isdigit() and 0 < int(raw) <= 16 else raw in TRUE
    return await asyncio.to_thread(_drawable, graph, xray)


def _schemas(graph: str) -> dict[str, Any]:
    compiled = build_graph(graph, checkpointer=None)
    described = describe(graph)

    def schema(get) -> Any:
        try:
            return get()
        except Exception:  # a channel type pydantic cannot describe
            return None

    return {
        "graph_id": graph,
        "input_schema": described["input_schema"],
        "output_schema": schema(compiled.get_output_jsonschema),
        "state_schema": described["state_schema"],
        "config_schema": schema(compiled.get_config_jsonschema),
        "context_schema": schema(compiled.get_context_jsonschema),
    }


@assistants.get("/assistants/{assistant_id}/schemas", summary="The graph's JSON Schemas")
async def get_assistant_schemas(request: HttpRequest, assistant_id: str):
    return await asyncio.to_thread(_schemas, _graph_or_404(assistant_id))


@assistants.get("/assistants/{assistant_id}/subgraphs", summary="Subgraphs: none (graphs run as one)")
async def get_assistant_subgraphs(request: HttpRequest, assistant_id: str):
    _graph_or_404(assistant_id)
    return {}


# --- threads = sessions ---------------------------------------------------------------------------

threads_router = Router(tags=["Threads"])


def _create_thread(owner: str, payload: ThreadCreate) -> dict[str, Any]:
    if payload.ttl is not None:
        raise not_supported("ttl")
    if payload.supersteps:
        raise not_supported("supersteps")
    key = payload.thread_id or str(uuid.uuid4())
    metadata = payload.metadata or {}
    graph = metadata.get("graph_id") if metadata.get("graph_id") in settings.AGENT_GRAPHS else None
    try:
        session = session_services.session_create(owner=owner, key=key, metadata=metadata, graph=graph)
    except SessionExists:
        if payload.if_exists != "do_nothing":
            raise SessionExists(f"Thread {key} already exists") from None
        session = sessions.session_get(owner=owner, key=key)
    return threads.thread_json(session)


@threads_router.post("/threads", summary="Create a thread (a session)")
async def create_thread(request: HttpRequest, payload: ThreadCreate):
    return await db(_create_thread, owner=request.auth.owner, payload=payload)


def _search(owner: str, payload: ThreadSearchRequest | ThreadCountRequest, limit: int, offset: int):
    if payload.values:
        raise not_supported("a values filter")
    if getattr(payload, "extract", None):
        raise not_supported("extract")
    if payload.status == "error":
        return [], 0  # a failed run commits nothing: no thread is ever in error
    sort_by = getattr(payload, "sort_by", None)
    if sort_by == "status":
        raise not_supported("sort_by status")
    order = {"thread_id": "key", None: "updated_at"}.get(sort_by, sort_by)
    found, total = sessions.session_search(
        owner=owner,
        metadata=payload.metadata,
        keys=getattr(payload, "ids", None),
        state=payload.status,
        order_by=order,
        descending=getattr(payload, "sort_order", None) != "asc",
        limit=limit,
        offset=offset,
    )
    select = getattr(payload, "select", None)
    with_values = not select or "values" in select
    return [_select(threads.thread_json(s, with_values=with_values), select) for s in found], total


@threads_router.post("/threads/search", summary="Search your threads (metadata: top-level keys equal)")
async def search_threads(request: HttpRequest, payload: ThreadSearchRequest, response: HttpResponse):
    found, total = await db(_search, owner=request.auth.owner, payload=payload, limit=payload.limit, offset=payload.offset)
    response["X-Pagination-Total"] = str(total)
    if payload.offset + len(found) < total:
        response["X-Pagination-Next"] = str(payload.offset + payload.limit)
    return found


@threads_router.post("/threads/count")
async def count_threads(request: HttpRequest, payload: ThreadCountRequest):
    _, total = await db(_search, owner=request.auth.owner, payload=payload, limit=1, offset=0)
    return total


@threads_router.get("/threads/{thread_id}", summary="A thread: metadata, status, current values")
async def get_thread(request: HttpRequest, thread_id: str):
    return await db(threads.thread_get, owner=request.auth.owner, key=thread_id)


def _patch(owner: str, key: str, payload: ThreadPatch) -> dict[str, Any]:
    if payload.ttl is not None:
        raise not_supported("ttl")
    try:
        session = session_services.session_merge_metadata(owner=owner, key=key, metadata=payload.metadata or {})
    except SessionNotFound:
        raise thread_not_found(key) from None
    return threads.thread_json(session)


@threads_router.patch("/threads/{thread_id}", summary="Merge metadata into a thread")
async def patch_thread(request: HttpRequest, thread_id: str, payload: ThreadPatch):
    sessions.check_session_key(thread_id)
    thread = await db(_patch, owner=request.auth.owner, key=thread_id, payload=payload)
    if "return=minimal" in (request.headers.get("Prefer") or ""):
        return HttpResponse(status=204)
    return thread


@threads_router.delete("/threads/{thread_id}", summary="Delete a thread: purge, keep a tombstone (204)")
async def delete_thread(request: HttpRequest, thread_id: str):
    try:
        await db(session_services.session_delete_for_owner, owner=request.auth.owner, key=thread_id)
    except SessionNotFound:
        raise thread_not_found(thread_id) from None
    return HttpResponse(status=204)


def _copy(owner: str, key: str) -> dict[str, Any]:
    session = threads.thread_of(owner=owner, key=key)
    if session.interrupt is not None:
        raise TurnCommitted("a thread waiting on an interrupt cannot be copied: resume it first")
    copy = turn_services.session_fork(owner=owner, key=key, turn_id=session.head_turn_id, new_key=str(uuid.uuid4()))
    return threads.thread_json(copy)


@threads_router.post("/threads/{thread_id}/copy", summary="A new thread with this one's history")
async def copy_thread(request: HttpRequest, thread_id: str):
    return await db(_copy, owner=request.auth.owner, key=thread_id)


def _ref(raw: Any) -> CheckpointRef:
    if isinstance(raw, dict):
        raw = raw.get("checkpoint_id") or (raw.get("configurable") or {}).get("checkpoint_id")
    ref = parse_checkpoint_id(raw)
    if ref is None:
        raise ValidationFailed(f"{str(raw)[:80]!r} is not a checkpoint id of this server")
    return ref


@threads_router.get("/threads/{thread_id}/state", summary="The thread's current state")
async def get_state(request: HttpRequest, thread_id: str):
    return await db(threads.thread_state, owner=request.auth.owner, key=thread_id)


@threads_router.post("/threads/{thread_id}/state/checkpoint", summary="The state at a checkpoint")
async def post_state_at(request: HttpRequest, thread_id: str, payload: ThreadStateCheckpointRequest):
    if payload.checkpoint.checkpoint_ns:
        raise not_supported("a subgraph checkpoint (checkpoint_ns)")
    ref = _ref(payload.checkpoint.checkpoint_id) if payload.checkpoint.checkpoint_id else None
    return await db(threads.thread_state, owner=request.auth.owner, key=thread_id, ref=ref)


@threads_router.get("/threads/{thread_id}/state/{checkpoint_id}", summary="The state at a checkpoint")
async def get_state_at(request: HttpRequest, thread_id: str, checkpoint_id: str):
    return await db(threads.thread_state, owner=request.auth.owner, key=thread_id, ref=_ref(checkpoint_id))


def _expected_version(owner: str, key: str, ref: CheckpointRef | None) -> int:
    session = threads.thread_of(owner=owner, key=key)
    if ref is None:
        return session.version
    # A state of another epoch can never be current; -1 matches no version.
    return ref.version if ref.epoch == session.epoch else -1


@threads_router.post("/threads/{thread_id}/state", summary="Set the thread's business fields")
async def update_state(request: HttpRequest, thread_id: str, payload: ThreadStateUpdate):
    if payload.as_node:
        raise not_supported("as_node")
    values = payload.values
    if not isinstance(values, dict) or set(values) != {"fields"} or not isinstance(values["fields"], dict):
        raise not_supported('a state update other than {"fields": {…}}')
    raw = payload.checkpoint.checkpoint_id if payload.checkpoint is not None else payload.checkpoint_id
    ref = _ref(raw) if raw else None
    owner = request.auth.owner
    sessions.check_session_key(thread_id)
    expected = await db(_expected_version, owner=owner, key=thread_id, ref=ref)
    try:
        await retry_while_busy(
            session_services.session_set_fields, owner=owner, key=thread_id, values=values["fields"], expected_version=expected
        )
    except VersionConflict as conflict:
        raise VersionConflict("the thread is no longer at that checkpoint", details=conflict.details) from None
    state = await db(threads.thread_state, owner=owner, key=thread_id)
    return {"checkpoint": state["checkpoint"]}


def _before(raw: Any) -> CheckpointRef | None:
    return None if raw in (None, "") else _ref(raw)


@threads_router.post("/threads/{thread_id}/history", summary="The thread's states, newest first")
async def post_history(request: HttpRequest, thread_id: str, payload: ThreadStateSearch):
    if payload.checkpoint is not None and payload.checkpoint.checkpoint_ns:
        return []  # no subgraphs, so no states in a subgraph namespace
    return await db(
        threads.thread_history,
        owner=request.auth.owner,
        key=thread_id,
        limit=payload.limit,
        before=_before(payload.before),
        metadata=payload.metadata,
    )


@threads_router.get("/threads/{thread_id}/history", summary="The thread's states, newest first")
async def get_history(request: HttpRequest, thread_id: str):
    limit, _ = _page(request)
    return await db(
        threads.thread_history,
        owner=request.auth.owner,
        key=thread_id,
        limit=limit,
        before=_before(request.GET.get("before")),
        metadata=None,
    )


# --- runs = turns (their SSE endpoints are consumers) -----------------------------------------------

runs_router = Router(tags=["Thread Runs"])
stateless_router = Router(tags=["Stateless Runs"])


def _located(payload: Any, run: runs.StartedRun, tail: str) -> HttpResponse:
    response = JsonResponse(payload, safe=False)
    for name, value in run.headers(tail=tail):
        response[name.decode()] = value.decode()
    return response


async def _start(
    request: HttpRequest, thread_id: str | None, payload: RunCreateStateless, *, streamed: bool = True
) -> runs.StartedRun:
    return await runs.start_run(
        owner=request.auth.owner,
        key=thread_id,
        body=payload,
        idempotency_key=request.headers.get("Idempotency-Key"),
        streamed=streamed,
    )


@runs_router.post("/threads/{thread_id}/runs", summary="Start a run in the background")
async def create_run(request: HttpRequest, thread_id: str, payload: RunCreateStateful):
    run = await _start(request, thread_id, payload)
    return _located(await db(runs.run_get, owner=run.owner, key=run.key, run_id=run.run_id), run, "stream")


@runs_router.post("/threads/{thread_id}/runs/wait", summary="Start a run and answer its final values")
async def wait_run(request: HttpRequest, thread_id: str, payload: RunCreateStateful):
    run = await _start(request, thread_id, payload, streamed=False)
    return _located(await runs.wait_for(run), run, "join")


@stateless_router.post("/runs/wait", summary="A run on a throwaway thread; its final values")
async def wait_stateless(request: HttpRequest, payload: RunCreateStateless):
    run = await _start(request, None, payload, streamed=False)
    try:
        answer = await runs.wait_for(run)
    finally:
        run.finish_in_background()
    return _located(answer, run, "join")


@stateless_router.post("/runs", summary="A run on a throwaway thread, in the background")
async def create_stateless(request: HttpRequest, payload: RunCreateStateless):
    run = await _start(request, None, payload)
    answer = await db(runs.run_get, owner=run.owner, key=run.key, run_id=run.run_id)
    run.finish_in_background()
    return _located({**answer, "thread_id": None} if run.delete_after else answer, run, "stream")


@runs_router.get("/threads/{thread_id}/runs", summary="The thread's runs, newest first")
async def list_runs(request: HttpRequest, thread_id: str):
    limit, offset = _page(request)
    status = request.GET.get("status") or None
    return await db(runs.run_list, owner=request.auth.owner, key=thread_id, limit=limit, offset=offset, status=status)


@runs_router.get("/threads/{thread_id}/runs/{run_id}", summary="A run")
async def get_run(request: HttpRequest, thread_id: str, run_id: str):
    return await db(runs.run_get, owner=request.auth.owner, key=thread_id, run_id=runs.parse_run_id(run_id))


@runs_router.get("/threads/{thread_id}/runs/{run_id}/join", summary="Wait for a run; its final values")
async def join_run(request: HttpRequest, thread_id: str, run_id: str):
    owner = request.auth.owner
    run_uuid = runs.parse_run_id(run_id)
    await db(runs.run_get, owner=owner, key=thread_id, run_id=run_uuid)
    return await runs.outcome(owner, thread_id, run_uuid)


@runs_router.post("/threads/{thread_id}/runs/{run_id}/cancel", summary="Cancel a run, on any process")
async def cancel_run(request: HttpRequest, thread_id: str, run_id: str):
    action = request.GET.get("action") or "interrupt"
    if action not in ("interrupt", "rollback"):
        raise ValidationFailed("action must be interrupt or rollback")
    run_uuid = runs.parse_run_id(run_id)
    try:
        await db(runs.run_cancel, owner=request.auth.owner, key=thread_id, run_id=run_uuid)
    except TurnNotFound:
        raise run_not_found(run_id) from None
    if _flag(request, "wait"):
        # The abort is committed already; wait for the run's final event.
        await runs.final_event(run_uuid)
        return HttpResponse(status=204)
    return HttpResponse(status=202)


api.add_router("", meta)
api.add_router("", assistants)
api.add_router("", threads_router)
api.add_router("", runs_router)
api.add_router("", stateless_router)
