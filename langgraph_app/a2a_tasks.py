"""A2A's tasks as this server's runs (docs/agent-protocol.md, "A2A"), as
langgraph-api maps them: an A2A context is a thread, a task is the run its
first message started (its id `<context id>:<run id>`, so a task is found
from its id alone), and the answer to a task that is `input-required` is a
resume run of the same task, noted in the run's metadata. A message's
`messageId` is the run's Idempotency-Key: a retried message replays the run.

Everything here reads the thread's turns (the database): a task's state is
the same on every process."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]  # no stubs pinned

from core.errors import ApiError
from langgraph_app import run_config, run_records, threads
from turns_app import selectors as turn_selectors
from turns_app.selectors import AgentTurn

SEPARATOR = ":"
# The run metadata naming the task a resume run answers, and the message a run came from.
TASK_KEY = "a2a_task_id"
MESSAGE_KEY = "a2a_message_id"
# A message with no contextId starts a thread whose id is derived from its
# owner and messageId, so a retry of it finds the run it started.
CONTEXTS = uuid.UUID("5a1c9b8e-7f0e-4d3a-9c1b-2a2a0a2a0a2a")
MESSAGE_ID_MAX = 255
TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED})


@dataclass(frozen=True)
class TaskRef:
    key: str  # the thread's id: the task's context id
    run_id: UUID  # the task's first run

    @property
    def id(self) -> str:
        return f"{self.key}{SEPARATOR}{self.run_id}"


def parse_task_id(raw: str) -> TaskRef:
    key, _, run = raw.rpartition(SEPARATOR)
    try:
        return TaskRef(key, UUID(run)) if key else _no_task(raw)
    except ValueError:
        return _no_task(raw)


def _no_task(raw: str) -> TaskRef:
    raise TaskNotFoundError(message=f"Task {raw[:120]} not found")


def context_for(owner: str, message_id: str) -> str:
    return str(uuid.uuid5(CONTEXTS, f"{owner}\0{message_id}"))


def idempotency_key(message_id: str) -> str:
    """The Idempotency-Key of a message: visible ASCII of a bounded length,
    whatever the client's messageId is."""
    if not message_id or len(message_id) > MESSAGE_ID_MAX:
        raise InvalidParamsError(message=f"message.messageId must be 1 to {MESSAGE_ID_MAX} characters")
    return "a2a-" + hashlib.sha256(message_id.encode()).hexdigest()


def _value(part: Part) -> Any:
    return MessageToDict(part.data)


def text_of(message: Message) -> str | None:
    texts = [part.text for part in message.parts if part.WhichOneof("content") == "text"]
    return "\n".join(texts) if texts else None


def data_of(message: Message) -> list[Any]:
    return [_value(part) for part in message.parts if part.WhichOneof("content") == "data"]


def run_input(message: Message) -> dict[str, Any]:
    """A new task's graph input: its text as a user message, or else its
    one data part as the graph's input channels."""
    text = text_of(message)
    if text is not None:
        return {"messages": [{"role": "user", "content": text}]}
    data = data_of(message)
    if len(data) == 1 and isinstance(data[0], dict):
        return data[0]
    raise InvalidParamsError(message="a message needs a text part, or one data part holding the graph's input")


def resume_value(message: Message) -> Any:
    """The answer to an interrupt: a data part's `resume` (or the data
    part itself), or else the text."""
    data = data_of(message)
    for value in data:
        if isinstance(value, dict) and "resume" in value:
            return value["resume"]
    if len(data) == 1:
        return data[0]
    text = text_of(message)
    if text is None:
        raise InvalidParamsError(message="an answer needs a text part or a data part")
    return text


# --- a task, read from its runs ------------------------------------------------------------


def metadata_of(turn: AgentTurn) -> dict[str, Any]:
    protocol = turn.request.get("protocol") or {}
    metadata = protocol.get("metadata") if isinstance(protocol, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def state_of(turn: AgentTurn, session_interrupt: dict[str, Any] | None) -> int:
    status = run_records.run_status(turn)
    if status == "running":
        return TaskState.TASK_STATE_WORKING
    if status == "interrupted":
        return TaskState.TASK_STATE_CANCELED
    if status != "success":
        return TaskState.TASK_STATE_FAILED
    paused = turn.status == AgentTurn.Status.INTERRUPTED
    if paused and session_interrupt and session_interrupt.get("turn_id") == str(turn.id):
        return TaskState.TASK_STATE_INPUT_REQUIRED
    return TaskState.TASK_STATE_COMPLETED


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict))
        )
    return ""


def interrupt_text(interrupts: list[dict[str, Any]]) -> str:
    """What the run asks, in words: a human-in-the-loop request's
    descriptions, or the interrupt's value as JSON."""
    lines: list[str] = []
    for item in interrupts:
        value = item.get("value")
        asked = value.get("action_requests") if isinstance(value, dict) else None
        if isinstance(asked, list) and asked:
            lines += [str(a.get("description") or a.get("name")) for a in asked if isinstance(a, dict)]
        else:
            lines.append(value if isinstance(value, str) else json.dumps(value, default=str))
    return "\n".join(lines)


def agent_message(ref: TaskRef, message_id: str, text: str, data: Any = None) -> Message:
    message = Message(message_id=message_id, context_id=ref.key, task_id=ref.id, role=Role.ROLE_AGENT)
    if text:
        message.parts.add(text=text)
    if data is not None:
        message.parts.add().data.struct_value.update(data)
    return message


def user_message(ref: TaskRef, turn: AgentTurn) -> Message:
    message = Message(
        message_id=str(metadata_of(turn).get(MESSAGE_KEY) or turn.id),
        context_id=ref.key,
        task_id=ref.id,
        role=Role.ROLE_USER,
    )
    request = turn.request
    if "text" in request:
        message.parts.add(text=str(request["text"]))
    elif "resume" in request or "command" in request:
        resume = request.get("resume", (request.get("command") or {}).get("resume"))
        message.parts.add().data.struct_value.update({"resume": resume})
    elif isinstance(request.get("input"), dict):
        message.parts.add().data.struct_value.update(request["input"])
    return message


def reply_of(owner: str, key: str, turn: AgentTurn) -> tuple[str, str]:
    """The id and text of the AI message a finished run ended on ("" if none)."""
    if turn.status not in (AgentTurn.Status.COMMITTED, AgentTurn.Status.INTERRUPTED):
        return "", ""
    messages = threads.turn_values(owner=owner, key=key, turn_id=turn.id).get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("type") != "ai":
        return "", ""
    return str(last.get("id") or turn.id), content_text(last.get("content"))


def artifact_id(message_id: str) -> str:
    """One artifact per AI reply: the stream's pieces of it and tasks/get's whole of it."""
    return f"message-{message_id}"


def reply_artifact(message_id: str, text: str) -> Artifact:
    artifact = Artifact(artifact_id=artifact_id(message_id), name="Assistant Response")
    artifact.parts.add(text=text)
    return artifact


def runs_of(owner: str, ref: TaskRef) -> list[AgentTurn] | None:
    """The task's runs, oldest first (None: no such task of this owner)."""
    try:
        session = threads.thread_of(owner=owner, key=ref.key)
    except ApiError:
        return None
    turns = [
        t
        for t in turn_selectors.turn_list_newest_first(session=session)
        if t.id == ref.run_id or metadata_of(t).get(TASK_KEY) == ref.id
    ]
    if not any(t.id == ref.run_id for t in turns):
        return None
    return list(reversed(turns))


def of_assistant(owner: str, turn: AgentTurn, assistant_id: str) -> bool:
    """Whether the run was started through this assistant's agent (by its
    graph name or UUID): another agent's task is not found, as on LangGraph's server."""
    protocol = turn.request.get("protocol") or {}
    started_as = str(protocol.get("assistant_id") or "")
    if started_as == assistant_id:
        return True
    try:
        return (
            run_config.resolve(owner, started_as).assistant_id == run_config.resolve(owner, assistant_id).assistant_id
        )
    except ApiError:
        return False


def task_of(*, owner: str, assistant_id: str, ref: TaskRef, history_length: int | None = None) -> Task | None:
    """The task as its runs left it; None if the owner has no such task on this agent."""
    turns = runs_of(owner, ref)
    if turns is None or not of_assistant(owner, turns[0], assistant_id):
        return None
    session = threads.thread_of(owner=owner, key=ref.key)
    latest = turns[-1]
    state = state_of(latest, session.interrupt)
    task = Task(id=ref.id, context_id=ref.key)
    for turn in turns:
        task.history.append(user_message(ref, turn))
        reply_id, text = reply_of(owner, ref.key, turn)
        if text:
            task.history.append(agent_message(ref, reply_id, text))
            task.artifacts.append(reply_artifact(reply_id, text))
    task.status.CopyFrom(status_of(ref, latest, state))
    if history_length is not None:
        kept = list(task.history)[-history_length:] if history_length > 0 else []
        del task.history[:]
        task.history.extend(kept)
    return task


def status_of(ref: TaskRef, turn: AgentTurn, state: int) -> TaskStatus:
    status = TaskStatus(state=state)  # type: ignore[arg-type]
    status.timestamp.FromDatetime(turn.finished_at or turn.created_at)
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        interrupts = turn.interrupts or []
        data = {"interrupts": interrupts}
        status.message.CopyFrom(agent_message(ref, f"input-{turn.id}", interrupt_text(interrupts), data))
    elif state == TaskState.TASK_STATE_FAILED:
        error = turn.error or {}
        status.message.CopyFrom(agent_message(ref, f"error-{turn.id}", str(error.get("message") or "the run failed")))
    return status
