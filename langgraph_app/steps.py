"""A turn's checkpoints as the protocol shows them, from the records its
commit stored of each LangGraph step (turns_app's step_records): `next`,
`tasks` (id, name, path, error, interrupts, result) and `metadata`'s
`source`, `step` and `writes`, and an intermediate step's values, rebuilt
from the turn's final state (docs/agent-protocol.md, "History")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage, messages_from_dict
from langgraph.graph.message import add_messages
from langgraph.pregel import Pregel

from graphs.runtime.registry import MESSAGES, GraphShape
from turns_app.graph_input import folded, with_message_ids
from turns_app.native_json import message_json
from turns_app.types import final_step

# LangGraph's name for what a run was given: a checkpoint of source `input`
# was written by it.
START = "__start__"
# The node LangGraph reports a paused run waiting in, for a state with no
# record of its step: the interrupt itself does not say which node raised it.
PAUSED_NODE = "__interrupt__"


class Conversation:
    """A turn's final conversation (message dicts as the protocol shows
    them), with its messages by id: what a record names. Read when first
    needed (a state of the turn's input names none of its messages)."""

    def __init__(self, read: Callable[[], list[dict[str, Any]]]) -> None:
        self._read = read
        self._messages: list[dict[str, Any]] | None = None
        self._by_id: dict[str, dict[str, Any]] | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        if self._messages is None:
            self._messages = self._read()
        return self._messages

    def by_id(self, message_id: str) -> dict[str, Any] | None:
        if self._by_id is None:
            self._by_id = {m["id"]: m for m in self.messages if isinstance(m.get("id"), str)}
        return self._by_id.get(message_id)

    def resolve(self, refs: list[Any]) -> list[Any]:
        """Messages a record names: an id of this conversation, or a message
        it does not hold, stored whole (message_to_dict)."""
        out = []
        for ref in refs:
            if isinstance(ref, str):
                found = self.by_id(ref)
                out.append(found if found is not None else {"id": ref})
            elif isinstance(ref, dict) and isinstance(ref.get("data"), dict):
                data = dict(ref["data"])
                data.setdefault("type", ref.get("type"))
                out.append(data)
            else:
                out.append(ref)
        return out


def with_input(built: tuple[Pregel, GraphShape] | None, values: dict[str, Any], turn: Any) -> dict[str, Any]:
    """`values` (the state a run started from) with its protocol input
    applied as the run applied it: each channel by its own reducer,
    `add_messages` for the messages, which carry the ids the run gave them
    (turns_app's graph_input). For a graph no longer registered (`built`
    None), only the messages are added (by `add_messages`) and the other
    channels stay as they were."""
    given = dict(turn.request["input"])
    if MESSAGES in given:
        given[MESSAGES] = with_message_ids(given[MESSAGES], turn.id)
    state = {**values, MESSAGES: messages_from_dict([{"type": m["type"], "data": m} for m in values[MESSAGES]])}
    if built is not None:
        state = folded(built[0], state, given, built[1])
    elif MESSAGES in given:
        state[MESSAGES] = add_messages(state[MESSAGES], given[MESSAGES])
    return {**state, MESSAGES: [message_json(m) for m in state[MESSAGES] or []]}


def given_to(built: tuple[Pregel, GraphShape] | None, values: dict[str, Any], turn: Any) -> dict[str, Any]:
    """A run's input state, `values` being the state it started from: its
    text as one more message, or its input through the reducers."""
    if "text" in turn.request:
        human = HumanMessage(content=turn.request["text"], id=f"{turn.id}:user")
        return {**values, MESSAGES: [*values[MESSAGES], message_json(human)]}
    return with_input(built, values, turn) if turn.request.get("input") is not None else values


def step_of(kind: str, record: dict[str, Any] | None, turn: Any) -> int:
    """LangGraph's step of a state: its record's; -1 for the start and a
    turn's input, the head turn's last plus one for a state reached without
    a turn (`now`)."""
    if record is not None:
        return int(record["step"])
    if kind == "now":
        return final_step(turn.steps) + 1 if turn is not None else 0
    return 0 if kind == "after" else -1


def step_values(record: dict[str, Any], final: dict[str, Any], conversation: Conversation) -> dict[str, Any]:
    """A step's values: the turn's final state, with the step's messages
    (a count of the final conversation's, or named one by one) and the
    channels that differed there."""
    values = {k: v for k, v in final.items() if k not in set(record.get("absent") or ())}
    if "message_count" in record:
        values[MESSAGES] = conversation.messages[: record["message_count"]]
    else:
        values[MESSAGES] = conversation.resolve(record.get("messages") or [])
    values.update(record.get("values") or {})
    return values


def tasks_json(
    record: dict[str, Any], request: dict[str, Any], turn_id: Any, conversation: Conversation
) -> list[dict[str, Any]]:
    return [
        {
            "id": task["id"],
            "name": task["name"],
            "path": task.get("path") or ["__pregel_pull", task["name"]],
            "error": task.get("error"),
            "interrupts": task.get("interrupts") or [],
            "checkpoint": None,
            "state": None,
            "result": _given(request, turn_id) if task["name"] == START else _result(task.get("result"), conversation),
        }
        for task in record.get("tasks") or ()
    ]


def _result(result: Any, conversation: Conversation) -> Any:
    if not isinstance(result, dict):
        return result
    return {k: conversation.resolve(v) if k == MESSAGES and isinstance(v, list) else v for k, v in result.items()}


def interrupts_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for task in record.get("tasks") or () for i in task.get("interrupts") or ()]


def writes(
    record: dict[str, Any],
    previous: dict[str, Any] | None,
    request: dict[str, Any],
    turn_id: Any,
    conversation: Conversation,
) -> dict[str, Any] | None:
    """`metadata.writes` as LangGraph wrote it before 1.0: what made this
    checkpoint — the run's input (`__start__`), the results of the tasks
    of the step before it, or a state update's values as its node."""
    source = record.get("source")
    if source == "input":
        return {START: _given(request, turn_id)}
    if source == "update":
        spec = request.get("state") or {}
        node = spec.get("as_node")
        return {node: spec.get("values")} if node else None
    done = [t for t in (previous or {}).get("tasks") or () if "result" in t or t["name"] == START]
    if not done:
        return None
    return {
        t["name"]: _given(request, turn_id) if t["name"] == START else _result(t["result"], conversation) for t in done
    }


def _given(request: dict[str, Any], turn_id: Any) -> Any:
    if "text" in request:
        return {MESSAGES: [message_json(HumanMessage(content=request["text"], id=f"{turn_id}:user"))]}
    given = request.get("input")
    if isinstance(given, dict) and MESSAGES in given:
        # The messages with the ids the run gave them (what history shows of them).
        return {**given, MESSAGES: [message_json(m) for m in with_message_ids(given[MESSAGES], turn_id)]}
    return given


def unrecorded_tasks(
    kind: str, waiting: str, interrupts: list[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    """`next` and `tasks` of a state with no record of its step: the
    current state of a paused session, the start, and the states of a turn
    committed without records."""
    if interrupts:
        task = {
            "id": waiting,
            "name": PAUSED_NODE,
            "path": ["__pregel_pull", PAUSED_NODE],
            "error": None,
            "interrupts": interrupts,
            "checkpoint": None,
            "state": None,
            "result": None,
        }
        return [PAUSED_NODE], [task]
    if kind == "input":
        return [START], []
    return [], []
