"""A session's history is its turns. Each committed turn stores the messages
it added (or, when the graph rewrote earlier ones, the whole conversation),
the fields and stage after it and the graph's other channel values; each
points at the turn it started from (`parent_id`). The session's state is its
head turn's, and its conversation is the chain of turns up to the head.

So a commit writes what the turn added, however long the conversation; and
the conversation a turn starts from is read from the business tables (or
this process's cache of it), never from a checkpoint.
"""

from __future__ import annotations

import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection
from django.db.models import UUIDField
from langchain_core.messages import AIMessage, BaseMessage, message_to_dict, messages_from_dict

from core.asyncdb import db

# The chain from a turn back to the first one (or to the turn that rewrote
# the whole conversation), oldest first.
SQL_CHAIN = """
WITH RECURSIVE chain(id, parent_id, messages, replaces_history, depth) AS (
    SELECT id, parent_id, messages, replaces_history, 0 FROM agent_turns WHERE id = %s
    UNION ALL
    SELECT t.id, t.parent_id, t.messages, t.replaces_history, chain.depth + 1
    FROM agent_turns AS t JOIN chain ON t.id = chain.parent_id
    WHERE NOT chain.replaces_history
)
SELECT id, messages FROM chain ORDER BY depth DESC
"""

SQL_CHAIN_IDS = """
WITH RECURSIVE chain(id, parent_id, depth) AS (
    SELECT id, parent_id, 0 FROM agent_turns WHERE id = %s
    UNION ALL
    SELECT t.id, t.parent_id, chain.depth + 1 FROM agent_turns AS t JOIN chain ON t.id = chain.parent_id
)
SELECT id FROM chain ORDER BY depth DESC
"""

# Converts ids to and from the database's form (a column of no model).
_UUID: UUIDField[UUID | str, UUID] = UUIDField()
ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def _loads(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def chain_messages(head_turn_id: UUID | None) -> list[tuple[UUID, dict[str, Any]]]:
    """(turn id, message dict) of the conversation up to `head_turn_id`."""
    if head_turn_id is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(SQL_CHAIN, [_UUID.get_db_prep_value(head_turn_id, connection)])
        rows = cursor.fetchall()
    return [(_UUID.to_python(turn_id), message) for turn_id, messages in rows for message in _loads(messages)]


def chain_ids(head_turn_id: UUID | None) -> list[UUID]:
    """The turns from the first to `head_turn_id`, oldest first."""
    if head_turn_id is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(SQL_CHAIN_IDS, [_UUID.get_db_prep_value(head_turn_id, connection)])
        return [_UUID.to_python(row[0]) for row in cursor.fetchall()]


def conversation_json(head_turn_id: UUID | None) -> list[dict[str, Any]]:
    """The conversation up to `head_turn_id` as LangGraph's server writes
    messages (`model_dump(mode="json")`, what a `values` event holds)."""
    stored = [message for _, message in chain_messages(head_turn_id)]
    return [message.model_dump(mode="json") for message in messages_from_dict(stored)]


SQL_PARENT = "SELECT parent_id FROM agent_turns WHERE id = %s"


def starts_with_parent_chain(session_id: UUID, turn_id: UUID, messages: list[Any]) -> int:
    """How many of `messages` (a run's state) begin as the conversation up
    to the turn's parent does: the same objects this process's cache holds
    of it (what the run was seeded with), or else — a resume's checkpoint,
    a cold cache — equal to it as LangGraph writes messages."""
    with connection.cursor() as cursor:
        cursor.execute(SQL_PARENT, [_UUID.get_db_prep_value(turn_id, connection)])
        row = cursor.fetchone()
    if row is None or row[0] is None:
        return 0
    parent_id = _UUID.to_python(row[0])
    cached = cache().get(session_id, parent_id)
    if cached is not None and len(cached) <= len(messages) and all(map(operator.is_, cached, messages)):
        return len(cached)
    shared = 0
    for message, committed in zip(messages, conversation_json(parent_id), strict=False):
        if not isinstance(message, BaseMessage) or message.model_dump(mode="json") != committed:
            break
        shared += 1
    return shared


def dump_messages(messages: Iterable[BaseMessage]) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in messages]


def transcript(head_turn_id: UUID | None) -> list[dict[str, Any]]:
    """The conversation for people: `role`, `content` (its text), `turn_id`,
    and `tool_calls` / `tool_call_id` where a message has them."""
    out = []
    for turn_id, stored in chain_messages(head_turn_id):
        data = stored.get("data", {})
        kind = stored.get("type")
        entry: dict[str, Any] = {
            "role": ROLES.get(kind, kind) if isinstance(kind, str) else kind,
            "content": _text(data.get("content")),
            "turn_id": str(turn_id),
        }
        if data.get("tool_calls"):
            entry["tool_calls"] = [
                {"id": c.get("id"), "name": c.get("name"), "args": c.get("args")} for c in data["tool_calls"]
            ]
        if data.get("tool_call_id"):
            entry["tool_call_id"] = data["tool_call_id"]
        out.append(entry)
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or part.get("type") == "text"
        )
    return ""


# --- this process's cache of recent conversations ----------------------------------------


@dataclass
class _Entry:
    head_turn_id: UUID | None
    messages: list[BaseMessage]
    size: int
    # The stored form (message_to_dict) of the first len(stored) messages,
    # made when an answer asked for it (`ConversationCache.stored`).
    stored: list[dict[str, Any]] = field(default_factory=list)


class ConversationCache:
    """The message objects of recent sessions' heads, so a turn does not
    rebuild (about 3.5 µs a message) what the previous one ended with, and
    their stored form once an answer showed it. Keyed by the head turn,
    whose chain never changes once committed: any process may commit in
    between, and a stale entry is simply a miss. Bounded by an estimate of
    the bytes it holds."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[UUID, _Entry] = OrderedDict()
        self._bytes = 0

    def get(self, session_id: UUID, head_turn_id: UUID | None) -> list[BaseMessage] | None:
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is None or entry.head_turn_id != head_turn_id:
                return None
            self._entries.move_to_end(session_id)
            return list(entry.messages)

    def stored(self, session_id: UUID, head_turn_id: UUID | None) -> list[dict[str, Any]] | None:
        """The conversation up to the head in its stored form (what
        `chain_messages` reads; the caller copies what it changes), or None
        if this is not the head held. Each message is dumped once, the first time it is asked for:
        a thread's answers then cost what its last turns added, however long
        the thread (docs/scale.md, "The hot path")."""
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is None or entry.head_turn_id != head_turn_id:
                return None
            self._entries.move_to_end(session_id)
            added = entry.messages[len(entry.stored) :]
            if added:
                entry.stored += dump_messages(added)
                grown = sum(_size(m) for m in added)
                entry.size += grown
                self._bytes += grown
            out = list(entry.stored)
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))
        return out

    def put(self, session_id: UUID, head_turn_id: UUID | None, messages: list[BaseMessage]) -> None:
        with self._lock:
            previous = self._entries.get(session_id)
        # A turn's conversation is the one it started from plus what it
        # added: only the new messages are sized (and later dumped), so a
        # commit's cost does not grow with the conversation (docs/scale.md).
        known, size, stored = 0, 0, []
        if previous is not None:
            before = previous.messages
            if len(before) <= len(messages) and all(map(operator.is_, before, messages)):
                known, size, stored = len(before), previous.size, list(previous.stored)
        size += sum(_size(m) for m in messages[known:])
        with self._lock:
            self._drop(session_id)
            if size > self.max_bytes:
                return
            self._entries[session_id] = _Entry(head_turn_id, list(messages), size, stored)
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def forget(self, session_id: UUID) -> None:
        with self._lock:
            self._drop(session_id)

    def _drop(self, session_id: UUID) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._bytes -= entry.size


def _size(message: BaseMessage) -> int:
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    # Only AI messages have tool calls: getattr on the others costs a
    # pydantic AttributeError each.
    calls = message.tool_calls if isinstance(message, AIMessage) else ()
    return 256 + 2 * len(text) + 64 * len(calls)


_cache: ConversationCache | None = None


def cache() -> ConversationCache:
    global _cache
    if _cache is None:
        _cache = ConversationCache(settings.AGENT_CONVERSATION_CACHE_BYTES)
    return _cache


async def conversation(session_id: UUID, head_turn_id: UUID | None) -> list[BaseMessage]:
    """The message objects of the conversation up to `head_turn_id`."""
    if head_turn_id is None:
        return []  # a first turn: nothing to read, no thread hop for it (docs/scale.md)
    cached = cache().get(session_id, head_turn_id)
    if cached is not None:
        return cached
    stored = await db(chain_messages, head_turn_id=head_turn_id)
    messages = messages_from_dict([m for _, m in stored])
    cache().put(session_id, head_turn_id, messages)
    return list(messages)
