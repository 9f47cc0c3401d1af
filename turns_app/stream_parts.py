"""LangGraph's own stream parts as turn events, for runs started through the
Agent Protocol (langgraph_app).

A protocol client asks for stream modes (`values`, `updates`,
`messages-tuple`, `messages`, `custom`, `tasks`, `checkpoints`, `debug`)
whose chunks are LangGraph-native: full state snapshots, node updates,
message chunks with their metadata, task starts and results, checkpoints;
with `stream_subgraphs`, the subgraphs' parts too (`SUBGRAPH_MARK`). The claim
carries the modes a run wants (`Claim.stream_modes`, from its request); the
graph step hands each part to `NativeParts`, which logs it as an event of the
same name in the turn's one id sequence — so a protocol stream can be resumed
from any process with Last-Event-ID like every other event. /api/ turns ask
for none: no `values` snapshot per step is serialized or stored for them.

The token stream (`messages`) is logged as LangGraph's server sends it,
`messages/metadata` once per message, then `messages/partial` per chunk or
`messages/complete` — except that a partial is logged as its chunk only:
the server sends the message so far, which langgraph_app.stream adds up
when it sends it, so the log grows with the reply, not with its square.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import BaseMessageChunk
from langgraph.types import StreamMode, StreamPart

from core.asyncdb import db
from graphs.runtime import effects
from graphs.runtime.registry import MESSAGES
from turns_app import history
from turns_app.native_json import dumps
from turns_app.thread_stream_parts import PROTOCOL_EVENT
from turns_app.types import EVENTS_OF_MODE, NATIVE_EVENTS, SUBGRAPH_MARK

# The events native parts are logged as (the execution treats them like
# deltas), and a thread-stream run's protocol events (thread_stream_parts).
EVENTS = NATIVE_EVENTS | {PROTOCOL_EVENT}
Emit = Callable[[str, Any], Awaitable[None]]
# Modes the graph step asks LangGraph for only when a run wants them.
_ON_REQUEST: tuple[StreamMode, ...] = ("custom", "tasks", "checkpoints", "debug")
# Stands for the first n messages of the conversation the turn started from.
BASE = "$base"
_BASE_TEXT = f'{{"{BASE}":'


class Logged(str):
    """The JSON text of an event as sent, and (`stored`) the shorter text
    the event log keeps of it. A str, so the log shows its followers what
    it was given and every TurnEvent stays one text; only the writing of
    rows (turns_app.services.event_rows) asks for the stored form."""

    stored: str


def stored_form(data: str) -> str:
    """What the event log writes of an event's data."""
    return data.stored if isinstance(data, Logged) else data


class NativeParts:
    """Logs the parts of `graph.astream(..., version="v2")` a protocol run asked for."""

    def __init__(self, modes: frozenset[str], emit: Emit, thread_id: str | None = None) -> None:
        self.modes = modes
        self.events: frozenset[str] = frozenset().union(*(EVENTS_OF_MODE[m] for m in modes))
        self.emit = emit
        # The protocol's thread (its key): checkpoints name it, not the
        # run's private checkpoint thread.
        self.thread_id = thread_id
        # The conversation the run was seeded with (the message objects),
        # found in its first state; None until then.
        self._base: list[Any] | None = None
        # The public ids of the run's checkpoints (step_records.StreamIds),
        # set once the run knows what it starts from.
        self.ids: Any = None
        # Messages whose `messages/metadata` went out (one id per message).
        self._described: set[Any] = set()

    @property
    def wanted(self) -> bool:
        return bool(self.events)

    @property
    def wants_messages(self) -> bool:
        return "messages" in self.modes or "messages-tuple" in self.modes

    @property
    def extra_stream_modes(self) -> list[StreamMode]:
        """LangGraph stream modes the graph step does not ask for itself."""
        return [m for m in _ON_REQUEST if m in self.events]

    async def log(self, part: StreamPart) -> None:
        data: Any = part["data"]
        # A subgraph's part (the run asked for subgraphs): its namespace.
        ns = list(part.get("ns") or ())
        event = part["type"]
        if part["type"] == "messages":
            await self._message(data, ns)
            return
        if event not in self.events:
            return
        if part["type"] == "updates" and isinstance(data, dict) and "__interrupt__" in data:
            data = {**data, "__interrupt__": list(data["__interrupt__"])}
        elif part["type"] == "values" and part.get("interrupts") and isinstance(data, dict):
            # v2 parts carry interrupts beside the state; LangGraph's server
            # (and useStream, which reads them) has them in the values.
            data = {**data, "__interrupt__": list(part["interrupts"])}
        elif part["type"] == "checkpoints" and isinstance(data, dict):
            data = await self._checkpoint(data)
        elif part["type"] == "debug" and isinstance(data, dict) and data.get("type") == "checkpoint":
            payload = data.get("payload")
            data = {**data, "payload": await self._checkpoint(payload) if isinstance(payload, dict) else payload}
        if ns:
            await self.emit(event + SUBGRAPH_MARK, dumps([ns, data]))
        elif part["type"] == "values" and isinstance(data, dict):
            await self.emit(event, await self._values(data))
        else:
            await self.emit(event, dumps(data))

    async def _message(self, data: Any, ns: list[str]) -> None:
        """One message chunk (or whole message) of LangGraph's `messages`
        mode, as `messages-tuple` and as the token stream (`messages`)."""
        message, metadata = data
        metadata = {k: v for k, v in (metadata or {}).items() if not str(k).startswith("__")}
        if "messages" in self.events:
            if ns:
                await self.emit("messages" + SUBGRAPH_MARK, dumps([ns, [message, metadata]]))
            else:
                await self.emit("messages", dumps([message, metadata]))
        if "messages/partial" not in self.events:
            return
        key = getattr(message, "id", None)
        if key not in self._described:
            self._described.add(key)
            await self.emit("messages/metadata", dumps({key: {"metadata": metadata}}))
        if isinstance(message, BaseMessageChunk):
            await self.emit("messages/partial", dumps(message))
        else:
            await self.emit("messages/complete", dumps([message]))

    async def _checkpoint(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint payload with its configs on the protocol's thread,
        and, as LangGraph's server adds them, `checkpoint` and
        `parent_checkpoint` ({"thread_id", "checkpoint_ns", "checkpoint_id"}).
        Only those keys of a config are kept: the rest is the run's own.
        The ids are the public ones the thread's history shows: the run's
        own checkpoint by its step, its parent the previous one (the first's:
        the state the run started from)."""
        config = self._config(payload.get("config"))
        parent = self._config(payload.get("parent_config"))
        if self.ids is not None and config is not None:
            own = config["configurable"]["checkpoint_id"]
            step = (payload.get("metadata") or {}).get("step")
            parent_id = parent["configurable"]["checkpoint_id"] if parent is not None else None
            config["configurable"]["checkpoint_id"] = await self.ids.public(own, step)
            if own in self.ids.known:
                parent = None  # a state before the run: its parent is not the run's to name
            else:
                parent = {"configurable": {**config["configurable"], "checkpoint_id": await self.ids.parent(parent_id)}}
        tasks = [_task(t) for t in payload.get("tasks") or ()]
        return {
            **payload,
            "config": config,
            "parent_config": parent,
            "checkpoint": config["configurable"] if config else None,
            "parent_checkpoint": parent["configurable"] if parent else None,
            "tasks": tasks,
        }

    def _config(self, config: Any) -> dict[str, Any] | None:
        configurable = config.get("configurable") if isinstance(config, dict) else None
        if not isinstance(configurable, dict) or not configurable.get("checkpoint_id"):
            return None
        return {
            "configurable": {
                "thread_id": self.thread_id or configurable.get("thread_id"),
                "checkpoint_ns": configurable.get("checkpoint_ns") or "",
                "checkpoint_id": configurable["checkpoint_id"],
            }
        }

    async def _values(self, data: dict[str, Any]) -> str:
        sent = dumps(data)
        messages = data.get(MESSAGES)
        if not isinstance(messages, list):
            return sent
        if self._base is None:
            self._base = await _seeded_with(messages)
        shared = 0
        for seeded, message in zip(self._base, messages, strict=False):
            if seeded is not message:
                break
            shared += 1
        if not shared:
            return sent
        logged = Logged(sent)
        logged.stored = dumps({**data, MESSAGES: [{BASE: shared}, *messages[shared:]]})
        return logged


def _task(task: Any) -> Any:
    """A checkpoint's task, its subgraph state config (if any) as
    `checkpoint`, as LangGraph's server sends it."""
    if not isinstance(task, dict):
        return task
    state = task.get("state")
    if isinstance(state, dict) and state.get("configurable"):
        return {**{k: v for k, v in task.items() if k != "state"}, "checkpoint": state["configurable"]}
    return task


async def _seeded_with(messages: list[Any]) -> list[Any]:
    """The messages of the run's first state that are the committed
    conversation up to the turn's parent. A run given one new user message
    (id `<turn id>:user`) is seeded with that conversation and the message,
    which `add_messages` keeps in order as the same objects: what precedes
    it. Any other run (a protocol input, a resume from its paused
    checkpoint) is compared with that conversation once, on a database
    thread."""
    try:
        context = effects.current()
    except effects.EffectError:
        return []
    if not messages:
        return []
    if getattr(messages[-1], "id", None) == f"{context.turn_id}:user":
        return messages[:-1]
    shared = await db(
        history.starts_with_parent_chain, session_id=context.session_id, turn_id=context.turn_id, messages=messages
    )
    return messages[:shared]


def by_reference(stored: str) -> int:
    """How many messages of the turn's starting conversation a stored
    `values` event names by reference (0: it is stored whole)."""
    if _BASE_TEXT not in stored:  # a JSON string escapes its quotes: no false hit there
        return 0
    value = json.loads(stored)
    messages = value.get(MESSAGES) if isinstance(value, dict) else None
    if not (isinstance(messages, list) and messages and isinstance(messages[0], dict) and set(messages[0]) == {BASE}):
        return 0
    shared = messages[0][BASE]
    return shared if isinstance(shared, int) and shared > 0 else 0


def expanded(stored: str, base: list[dict[str, Any]]) -> str:
    """A stored `values` event as it was sent: `base` is the starting
    conversation's messages as JSON (at least the ones it names)."""
    value = json.loads(stored)
    shared = value[MESSAGES][0][BASE]
    value[MESSAGES] = [*base[:shared], *value[MESSAGES][1:]]
    return dumps(value)
