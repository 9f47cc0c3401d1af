"""A thread's history as the protocol answers it (`GET`/`POST
/threads/{id}/history`): its states newest first, each with the values the
graph had there (docs/agent-protocol.md, "History").

Each state carries its whole conversation, so an answer of every state of a
long thread grows with the square of its length. The work is bounded by
what is answered: `before` and the `metadata` filter are applied to what a
state is known by without reading its conversation; values are built only
for the states answered, at most `limit` of them, and the answer stops
growing once it passes `HISTORY_MAX_BYTES` (always one state at least, so a
client can page on). It is rendered to JSON text here, on the database
thread that built it: the event loop only sends bytes.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from ninja.responses import NinjaJSONEncoder

from core.errors import ValidationFailed
from langgraph_app import threads
from langgraph_app.ids import CheckpointRef, parse_checkpoint_id

# An answer stops taking states once it is this long; the client pages on
# with `before` = the last state's checkpoint (the `X-Pagination-Next`
# header names it whenever older states match).
HISTORY_MAX_BYTES = 4 * 2**20
NEXT_HEADER = "X-Pagination-Next"


def parse_before(raw: Any) -> CheckpointRef | None:
    """`before` as clients send it: a checkpoint id, a checkpoint
    ({"checkpoint_id"}) or a config ({"configurable": {"checkpoint_id"}})."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, dict):
        configurable = raw.get("configurable")
        if configurable is not None and not isinstance(configurable, dict):
            raise ValidationFailed("before.configurable must be an object with a checkpoint_id")
        raw = raw.get("checkpoint_id") or (configurable or {}).get("checkpoint_id")
    ref = parse_checkpoint_id(raw)
    if ref is None:
        raise ValidationFailed(f"before: {str(raw)[:80]!r} is not a checkpoint id of this server")
    return ref


class _LastConversation:
    """The messages up to one turn, read once for the states that share
    them (newest first, the state before turn n's reply and the state after
    turn n-1 both hold the conversation up to turn n-1). One entry: what is
    kept is never more than the state being built."""

    def __init__(self) -> None:
        self.turn_id: UUID | None = None
        self.messages: list[dict[str, Any]] | None = None

    def __call__(self, turn_id: UUID | None) -> list[dict[str, Any]]:
        if self.messages is None or turn_id != self.turn_id:
            self.turn_id, self.messages = turn_id, threads.messages_up_to(turn_id)
        return list(self.messages)


def _matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())


def history_page(
    *,
    owner: str,
    key: str,
    limit: int,
    before: CheckpointRef | None,
    metadata: dict[str, Any] | None,
    max_bytes: int | None = None,
) -> tuple[bytes, str | None]:
    """The answer's JSON text, and the checkpoint to page on from (None: no
    older state matches)."""
    budget = HISTORY_MAX_BYTES if max_bytes is None else max_bytes
    session = threads.thread_of(owner=owner, key=key)
    turns = threads.finished_turns(session)
    by_id = {t.id: t for t in turns}
    conversation = _LastConversation()
    rendered: list[str] = []
    size = 2  # the brackets
    full = False
    last: threads.State | None = None
    for state in threads.states_of(session, turns):
        if before is not None and not state.ref < before:
            continue
        if not _matches(threads.state_metadata(session, state), metadata):
            continue
        if full:
            # An older state matches: the client has more to page through.
            assert last is not None
            return _answer(rendered), last.ref.id
        text = json.dumps(threads.state_json(session, state, by_id, conversation), cls=NinjaJSONEncoder)
        rendered.append(text)
        size += len(text) + (2 if len(rendered) > 1 else 0)  # ASCII: ninja's encoder escapes the rest
        last = state
        full = len(rendered) == limit or size >= budget
    return _answer(rendered), None


def _answer(rendered: list[str]) -> bytes:
    # The separators json.dumps puts in a list: the same text ninja renders.
    return ("[" + ", ".join(rendered) + "]").encode()
