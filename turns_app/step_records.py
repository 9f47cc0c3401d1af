"""A run's checkpoints as the turn commits them: one record per LangGraph
step (the input at step -1, then each superstep; a state update's one),
with what LangGraph's history shows of it — `source`, `step`, `next`, the
tasks (id, name, path, interrupts, error, result; a sent task's `Send` as
`send`, `{"node", "input"}`) — and its values by reference to the turn's
final state (docs/storage.md, "Checkpoints").

The records are LangGraph's own StateSnapshots of the run's in-memory
checkpoint thread (`aget_state_history`), taken when the run has finished
and before its checkpoints are let go; they reach the database only in the
commit's transaction, as a column of the turn's row, so an aborted turn
leaves none. A snapshot's messages are written as a count (the first n of
the turn's final conversation, the usual case) or as message ids of that
conversation, a message it does not hold written whole; its other channels
only where they differ from the final state. So a turn stores its steps in
bytes that grow with what it did, not with the conversation's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict
from langgraph.types import Send, StateSnapshot

from core.asyncdb import db
from graphs.runtime.registry import MESSAGES
from turns_app.graph_outcome import shown
from turns_app.history import dump_messages
from turns_app.models import AgentTurn
from turns_app.types import FROM_STEP, CheckpointRef, Claim, final_step, step_ref

# LangGraph's task that writes a run's input, and a task's usual path; a
# sent task's (`Send`) is [PUSH, its index in the checkpoint's TASKS].
START = "__start__"
PULL = "__pregel_pull"
PUSH = "__pregel_push"
TASKS = "__pregel_tasks"


def _config_id(config: Any) -> str | None:
    return (config or {}).get("configurable", {}).get("checkpoint_id")


async def run_steps(graph: Any, thread_id: str, known: set[str]) -> list[StateSnapshot]:
    """The run's checkpoints of its root graph, oldest first, less those
    that were there before it ran (`known`: a seed, the pause resumed)."""
    found = [
        snapshot
        async for snapshot in graph.aget_state_history({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        if _config_id(snapshot.config) not in known
    ]
    return found[::-1]


async def sent_tasks(graph: Any, snapshots: Sequence[StateSnapshot]) -> dict[str, list[Any]]:
    """The Sends each checkpoint with sent tasks holds, by its id: LangGraph
    keeps them in the checkpoint's TASKS channel, which a snapshot does
    not show, and a run from that checkpoint needs them again."""
    out: dict[str, list[Any]] = {}
    for snapshot in snapshots:
        checkpoint_id = _config_id(snapshot.config)
        if checkpoint_id and any(t.path and t.path[0] == PUSH for t in snapshot.tasks):
            saved = await graph.checkpointer.aget_tuple(snapshot.config)
            out[checkpoint_id] = list(saved.checkpoint["channel_values"].get(TASKS) or ()) if saved else []
    return out


def records(
    snapshots: Sequence[StateSnapshot], final: list[BaseMessage], sends: dict[str, list[Any]] | None = None
) -> list[dict[str, Any]]:
    """The stored form of a run's checkpoints; `final` is the conversation
    the turn commits (the last snapshot's messages); `sends`: sent_tasks'."""
    if not snapshots:
        return []
    positions = {m.id: i for i, m in enumerate(final) if m.id}
    last = snapshots[-1].values if isinstance(snapshots[-1].values, dict) else {}
    last_json = {k: shown(v) for k, v in last.items() if k != MESSAGES}
    return [
        _record(s, final, positions, last_json, (sends or {}).get(_config_id(s.config) or "", [])) for s in snapshots
    ]


def _record(
    snapshot: StateSnapshot,
    final: list[BaseMessage],
    positions: dict[str, int],
    last: dict[str, Any],
    sends: list[Any],
) -> dict[str, Any]:
    metadata = snapshot.metadata or {}
    values = snapshot.values if isinstance(snapshot.values, dict) else {}
    record: dict[str, Any] = {
        "step": metadata.get("step", -1),
        "source": metadata.get("source", "loop"),
        "created_at": snapshot.created_at,
    }
    if snapshot.next:
        record["next"] = list(snapshot.next)
    tasks = [_task(t, positions, sends) for t in snapshot.tasks]
    if tasks:
        record["tasks"] = tasks
    if record["source"] == "input":
        # The input's state is shown as the run applied it to its parent
        # state (langgraph_app.threads): nothing of its values is stored.
        return record
    messages = list(values.get(MESSAGES) or [])
    if len(messages) <= len(final) and all(a is b or _same(a, b) for a, b in zip(messages, final, strict=False)):
        record["message_count"] = len(messages)
    else:
        record["messages"] = _refs(messages, positions)
    changed = {}
    for name, value in values.items():
        if name == MESSAGES:
            continue
        as_json = shown(value)
        if as_json != last.get(name, _ABSENT):
            changed[name] = as_json
    if changed:
        record["values"] = changed
    absent = sorted(name for name in last if name not in values)
    if absent:
        record["absent"] = absent
    return record


_ABSENT = object()


def _same(a: Any, b: BaseMessage) -> bool:
    return isinstance(a, BaseMessage) and a.id is not None and a.id == b.id and a.content == b.content


def _refs(messages: Sequence[Any], positions: dict[str, int]) -> list[Any]:
    """Messages as the ids of the final conversation's messages (strings),
    each one it does not hold as its stored dict."""
    out: list[Any] = []
    for message in messages:
        if isinstance(message, BaseMessage) and message.id in positions:
            out.append(message.id)
        elif isinstance(message, BaseMessage):
            out.append(dump_messages([message])[0])
        else:
            out.append(shown(message))
    return out


def _task(task: Any, positions: dict[str, int], sends: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": task.id, "name": task.name}
    if list(task.path) != [PULL, task.name]:  # the usual path is not stored
        out["path"] = shown(list(task.path))
    index = task.path[1] if len(task.path) > 1 and task.path[0] == PUSH else None
    if isinstance(index, int) and index < len(sends) and isinstance(sends[index], Send):
        out["send"] = {"node": sends[index].node, "input": shown(sends[index].arg)}
    if task.interrupts:
        out["interrupts"] = [{"id": i.id, "value": shown(i.value)} for i in task.interrupts]
    if task.error is not None:
        out["error"] = repr(task.error)[:2000]
    result = getattr(task, "result", None)
    if task.name == START:
        pass  # the run's input: the whole state it started from, shown from the turn's request instead
    elif isinstance(result, dict):
        out["result"] = {
            k: (_refs(v, positions) if k == MESSAGES and isinstance(v, list) else shown(v)) for k, v in result.items()
        }
    elif result is not None:
        out["result"] = shown(result)
    return out


def step_messages(record: dict[str, Any], final: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A step's messages, from its record and its turn's final conversation
    (what `_record` wrote): the first n of it, or its messages by id and
    the ones it does not hold whole."""
    if "message_count" in record:
        return list(final[: int(record["message_count"])])
    by_id = {m.id: m for m in final if m.id}
    out: list[BaseMessage] = []
    for ref in record.get("messages") or ():
        if isinstance(ref, str) and ref in by_id:
            out.append(by_id[ref])
        elif isinstance(ref, dict) and isinstance(ref.get("data"), dict):
            out += messages_from_dict([ref])
    return out


# --- the ids a run streams ------------------------------------------------------------


def start_ref(
    *, epoch: int, base_version: int, parent_id: Any, rewinds: bool, inside: dict[str, Any] | None = None
) -> CheckpointRef:
    """The public id of the state a turn starts from: its parent turn's last
    checkpoint (the epoch's start without one), or, when the session had
    moved on from there without a turn (fields set), that state, or the
    step inside a later run it was started from (`inside`, the request's
    `from`), as the protocol's history names them (langgraph_app.threads)."""
    if inside is not None:
        within = AgentTurn.objects.only("base_version", "number").get(pk=inside["turn_id"])
        return step_ref(epoch, within.base_version, within.number, int(inside["step"]))
    if parent_id is None:
        after = CheckpointRef(epoch, 0, 0)
        version = 0
    else:
        parent = AgentTurn.objects.only("base_version", "number", "version", "steps").get(pk=parent_id)
        after = step_ref(epoch, parent.base_version, parent.number, final_step(parent.steps))
        version = parent.version or 0
    if not rewinds and base_version != version:
        return CheckpointRef(epoch, base_version, after.step)
    return after


class StreamIds:
    """The public ids of the checkpoints a run streams (stream modes
    `checkpoints`, `debug`), the ids its commit gives them: known before the
    commit, as a turn's checkpoints carry the version it started at."""

    def __init__(self, claim: Claim, known: set[str]) -> None:
        self.claim = claim
        self.known = known
        self.seen: dict[str, str] = {}
        self._start: str | None = None

    async def start(self) -> str:
        if self._start is None:
            claim = self.claim
            ref = await db(
                start_ref,
                epoch=claim.epoch,
                base_version=claim.base_version,
                parent_id=claim.parent_id,
                rewinds=claim.rewinds,
                inside=claim.request.get(FROM_STEP),
            )
            self._start = ref.id
        return self._start

    async def public(self, checkpoint_id: str, step: Any) -> str:
        if checkpoint_id in self.known or not isinstance(step, int):
            return await self.start()
        claim = self.claim
        public = self.seen[checkpoint_id] = step_ref(claim.epoch, claim.base_version, claim.number, step).id
        return public

    async def parent(self, checkpoint_id: str | None) -> str:
        return self.seen.get(checkpoint_id or "") or await self.start()
