"""The protocol's Run objects, read from a thread's turns: their status,
their JSON, a thread's runs, and cancelling one."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from core.errors import TurnNotFound
from langgraph_app import threads
from langgraph_app.errors import run_not_found
from langgraph_app.ids import assistant_id
from turns_app import selectors as turn_selectors
from turns_app.selectors import AgentTurn
from turns_app.services import turn_cancel

STATUS_OF_ERROR = {"turn_cancelled": "interrupted", "model_timeout": "timeout"}


def run_status(turn: AgentTurn) -> str:
    """LangGraph's run status: a run that paused on an interrupt succeeded
    (its thread is `interrupted`); a cancelled one is `interrupted`."""
    if turn.status == AgentTurn.Status.PENDING:
        return "running"
    if turn.status == AgentTurn.Status.ABORTED:
        code = (turn.error or {}).get("code")
        return STATUS_OF_ERROR.get(code, "error") if isinstance(code, str) else "error"
    return "success"


def run_json(key: str, turn: AgentTurn) -> dict[str, Any]:
    protocol = turn.request.get("protocol") or {}
    if "resume" in turn.request:
        kwargs_input, command = None, {"resume": turn.request["resume"]}
    else:
        kwargs_input, command = {"messages": [{"type": "human", "content": turn.request.get("text", "")}]}, None
    return {
        "run_id": str(turn.id),
        "thread_id": key,
        "assistant_id": protocol.get("assistant_id") or assistant_id(turn.graph),
        "created_at": threads.iso(turn.created_at),
        "updated_at": threads.iso(turn.finished_at or turn.created_at),
        "status": run_status(turn),
        "metadata": protocol.get("metadata") or {},
        "multitask_strategy": "enqueue",
        "kwargs": {
            "input": kwargs_input,
            "command": command,
            "stream_mode": protocol.get("stream_mode") or [],
            "config": {},
            "context": {},
        },
    }


def run_list(*, owner: str, key: str, limit: int, offset: int, status: str | None) -> list[dict[str, Any]]:
    """The thread's runs in its current epoch, newest first."""
    session = threads.thread_of(owner=owner, key=key)
    out = [run_json(key, t) for t in turn_selectors.turn_list_newest_first(session=session)]
    if status is not None:
        out = [r for r in out if r["status"] == status]
    return out[offset : offset + limit]


def run_get(*, owner: str, key: str, run_id: UUID) -> dict[str, Any]:
    session = threads.thread_of(owner=owner, key=key)
    turn = turn_selectors.turn_in_epoch(session=session, turn_id=run_id)
    if turn is None:
        raise run_not_found(run_id)
    return run_json(key, turn)


def run_cancel(*, owner: str, key: str, run_id: UUID) -> None:
    threads.thread_of(owner=owner, key=key)
    try:
        turn_cancel(owner=owner, key=key, turn_id=run_id)
    except TurnNotFound:
        raise run_not_found(run_id) from None


def parse_run_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise run_not_found(raw[:80]) from None
