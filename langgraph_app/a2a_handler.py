"""A2A's methods on this server's runs: a2a-sdk's RequestHandler, which its
JSON-RPC dispatcher (langgraph_app.a2a_app) calls with parsed requests.
Every message starts a run through runs.start_run — the same claim → run →
commit path, idempotency and owner checks as /langgraph/ runs — and every
answer is read from the thread's turns and event log (a2a_tasks), never
from this process's memory: a task is the same on every process, and a
stream that broke is taken up again on any of them (SubscribeToTask)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from core.asyncdb import db
from core.errors import ApiError
from langgraph_app import a2a_tasks, runs, stream
from langgraph_app.a2a_tasks import TaskRef
from langgraph_app.schemas import RunCreateStateful
from turns_app.events import replay_from
from turns_app.services import turn_cancel
from turns_app.types import TERMINAL_EVENTS, TurnEvent

# The stream mode whose events carry the model's tokens: each a message chunk.
TOKENS = "messages-tuple"
AI_CHUNKS = frozenset({"AIMessageChunk", "ai"})


def caller(context: ServerCallContext) -> tuple[str, str]:
    """The owner and assistant a2a_app authenticated and routed the call for."""
    return context.state["owner"], context.state["assistant_id"]


def a2a_error(error: ApiError) -> A2AError:
    """A refusal of the run services, as the JSON-RPC error a client reads."""
    if error.status >= 500:
        return InternalError(message=error.message, data={"code": str(error.code)})
    return InvalidParamsError(message=error.message, data={"code": str(error.code)})


def _unsupported(what: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(message=f"{what} is not supported")


class RunsRequestHandler(RequestHandler):
    async def _task(self, context: ServerCallContext, ref: TaskRef, history_length: int | None = None) -> Task:
        owner, assistant_id = caller(context)
        task = await db(
            a2a_tasks.task_of, owner=owner, assistant_id=assistant_id, ref=ref, history_length=history_length
        )
        if task is None:
            raise TaskNotFoundError(message=f"Task {ref.id[:120]} not found")
        return task

    async def _start(self, params: SendMessageRequest, context: ServerCallContext, *, streamed: bool):
        owner, assistant_id = caller(context)
        message = params.message
        idempotency_key = a2a_tasks.idempotency_key(message.message_id)
        metadata: dict[str, Any] = {a2a_tasks.MESSAGE_KEY: message.message_id}
        command: dict[str, Any] | None = None
        run_input: dict[str, Any] | None = None
        ref: TaskRef | None = None
        if message.task_id:
            ref = a2a_tasks.parse_task_id(message.task_id)
            if message.context_id and message.context_id != ref.key:
                raise InvalidParamsError(message="contextId is not the task's context")
            task = await self._task(context, ref)
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                # A retry of the answer that resumed it replays that run.
                answered = await db(_answered_by, owner=owner, ref=ref, message_id=message.message_id)
                if not answered:
                    raise UnsupportedOperationError(message="the task is not waiting for input")
            command = {"resume": a2a_tasks.resume_value(message)}
            metadata[a2a_tasks.TASK_KEY] = ref.id
            key = ref.key
        else:
            run_input = a2a_tasks.run_input(message)
            key = message.context_id or a2a_tasks.context_for(owner, message.message_id)
        try:
            body = RunCreateStateful.model_validate(
                {
                    "assistant_id": assistant_id,
                    "input": run_input,
                    "command": command,
                    "metadata": metadata,
                    "if_not_exists": "create",
                    "stream_mode": [TOKENS] if streamed else [],
                    # A2A's client takes a broken stream up again with SubscribeToTask.
                    "on_disconnect": "continue",
                }
            )
            run = await runs.start_run(
                principal=context.state["principal"],
                key=key,
                body=body,
                idempotency_key=idempotency_key,
                streamed=streamed,
            )
        except ApiError as error:
            raise a2a_error(error) from None
        except ValueError as error:  # pydantic's, on a field the schema bounds
            raise InvalidParamsError(message=str(error)[:500]) from None
        return run, ref or TaskRef(key, run.run_id)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        run, ref = await self._start(params, context, streamed=False)
        if not params.configuration.return_immediately:
            await runs.final_event(run.run_id)
        history = params.configuration.history_length if params.configuration.HasField("history_length") else None
        return await self._task(context, ref, history)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        run, ref = await self._start(params, context, streamed=True)
        first = await self._task(context, ref)
        if run.run_id != ref.run_id or first.status.state in a2a_tasks.TERMINAL:
            first.status.state = TaskState.TASK_STATE_WORKING
        async for event in self._follow(context, ref, run.events(), first):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        owner = caller(context)[0]
        ref = a2a_tasks.parse_task_id(params.id)
        task = await self._task(context, ref)
        if task.status.state in a2a_tasks.TERMINAL:
            raise UnsupportedOperationError(message="the task has ended")
        latest = (await db(a2a_tasks.runs_of, owner=owner, ref=ref) or [])[-1]
        # The snapshot holds what the running run has not written yet; its
        # reply comes again from the start of its log, so the client builds
        # it whole, with no gap, whichever process it reconnected to.
        async for event in self._follow(context, ref, replay_from(latest.id, 0), task):
            yield event

    async def _follow(
        self, context: ServerCallContext, ref: TaskRef, events: Any, first: Task
    ) -> AsyncGenerator[Any, None]:
        yield first
        started: set[str] = set()
        try:
            async for event in events:
                if event.event in TERMINAL_EVENTS:
                    break
                update = _artifact_update(ref, event, started)
                if update is not None:
                    yield update
        finally:
            await stream.close(events)
        task = await self._task(context, ref)
        yield TaskStatusUpdateEvent(task_id=ref.id, context_id=ref.key, status=task.status)

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        history = params.history_length if params.HasField("history_length") else None
        return await self._task(context, a2a_tasks.parse_task_id(params.id), history)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        owner = caller(context)[0]
        ref = a2a_tasks.parse_task_id(params.id)
        task = await self._task(context, ref)
        if task.status.state in a2a_tasks.TERMINAL:
            raise TaskNotCancelableError(message="the task has ended")
        if task.status.state == TaskState.TASK_STATE_WORKING:
            latest = (await db(a2a_tasks.runs_of, owner=owner, ref=ref) or [])[-1]
            with contextlib.suppress(ApiError):  # it finished first: the task says what it became
                await db(turn_cancel, owner=owner, key=ref.key, turn_id=latest.id)
            await runs.final_event(latest.id)
        else:
            # Waiting for input: no run to cancel; the thread keeps its pause,
            # which an answer (or a /langgraph/ run) takes up.
            raise TaskNotCancelableError(message="a task waiting for input has no run to cancel")
        return await self._task(context, ref)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        raise _unsupported("ListTasks")

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise _unsupported("push notifications")

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise _unsupported("push notifications")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise _unsupported("push notifications")

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise _unsupported("push notifications")

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise _unsupported("the extended agent card")


def _answered_by(*, owner: str, ref: TaskRef, message_id: str) -> bool:
    turns = a2a_tasks.runs_of(owner, ref) or []
    return any(a2a_tasks.metadata_of(t).get(a2a_tasks.MESSAGE_KEY) == message_id for t in turns[1:])


def _artifact_update(ref: TaskRef, event: TurnEvent, started: set[str]) -> TaskArtifactUpdateEvent | None:
    """A token of the model's reply as a piece of the reply's artifact
    (one artifact per AI message, as tasks/get answers them)."""
    if event.event != "messages":
        return None
    try:
        chunk = json.loads(event.data)[0]
    except (ValueError, IndexError, KeyError, TypeError):
        return None
    if not isinstance(chunk, dict) or chunk.get("type") not in AI_CHUNKS:
        return None
    text = a2a_tasks.content_text(chunk.get("content"))
    message_id = str(chunk.get("id") or "")
    if not text or not message_id:
        return None
    artifact_id = a2a_tasks.artifact_id(message_id)
    update = TaskArtifactUpdateEvent(task_id=ref.id, context_id=ref.key, append=artifact_id in started)
    update.artifact.artifact_id = artifact_id
    update.artifact.name = "Assistant Response"
    update.artifact.parts.add(text=text)
    started.add(artifact_id)
    return update
