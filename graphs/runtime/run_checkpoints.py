"""The checkpointer a turn's graph runs on: checkpoints held in memory as the
objects LangGraph made, written to the database's saver only when a run
pauses.

A turn's lasting state is its business rows (turns_app: the messages it
added, the fields, the other channels), committed with the turn, so a run
that finishes needs no checkpoint at all: serialising the whole conversation
into one on every turn, and reading it back on the next, was most of a
turn's cost (docs/field-notes.md, "Where a turn's time goes"). A run that calls
`interrupt()` must be resumable after a restart and from any process:
`persist()` writes its checkpoint and pending writes to the durable saver
before the turn commits, and a resume reads them back from there.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

_Key = tuple[str, str]  # (thread_id, checkpoint_ns)
_T = TypeVar("_T")
# A sync call from a worker thread waits this long for the durable saver.
SYNC_DURABLE_SECONDS = 60.0


class RunCheckpoints(BaseCheckpointSaver):
    """One per event loop, shared by every graph compiled on it. A thread
    lives in memory from `begin()` to `discard()`; any other thread (a paused
    run being resumed) is read from the durable saver."""

    def __init__(self, durable: BaseCheckpointSaver) -> None:
        super().__init__(serde=durable.serde)
        self.durable = durable
        # (thread, ns) -> {checkpoint_id: (checkpoint, metadata, parent_id)}
        self._checkpoints: dict[_Key, dict[str, tuple[Checkpoint, CheckpointMetadata, str | None]]] = defaultdict(dict)
        # (thread, ns, checkpoint_id) -> {(task_id, idx): (task_id, channel, value, task_path)}
        self._writes: dict[tuple[str, str, str], dict[tuple[str, int], tuple[str, str, Any, str]]] = defaultdict(dict)
        self._fresh: set[str] = set()
        self._threads: set[str] = set()
        # The loop the durable saver's connections live on (one saver per
        # loop): a sync call from a worker thread reaches it through there.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    # -- a run's life -----------------------------------------------------------------------

    def begin(self, thread_id: str, *, fresh: bool) -> None:
        """A run starts on `thread_id`; `fresh` when nothing is stored for it
        anywhere (a new turn's thread), so no read goes to the database."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
        self._threads.add(thread_id)
        if fresh:
            self._fresh.add(thread_id)

    def discard(self, thread_id: str) -> None:
        self._threads.discard(thread_id)
        self._fresh.discard(thread_id)
        for key in [k for k in self._checkpoints if k[0] == thread_id]:
            del self._checkpoints[key]
        for write_key in [k for k in self._writes if k[0] == thread_id]:
            del self._writes[write_key]

    def checkpoint_ids(self, thread_id: str) -> set[str]:
        """The ids of the thread's root checkpoints held in memory."""
        return set(self._checkpoints.get((thread_id, ""), {}))

    async def persist(self, thread_id: str) -> str | None:
        """Write this run's newest checkpoint of each namespace, with its
        pending writes, to the durable saver: all a resume reads (the run's
        earlier steps are committed with the turn, as records of its own:
        turns_app's step_records). Returns the newest checkpoint id of the
        root namespace."""
        latest = None
        for (thread, ns), stored in list(self._checkpoints.items()):
            if thread != thread_id or not stored:
                continue
            checkpoint_id = max(stored)
            checkpoint, metadata, parent = stored[checkpoint_id]
            config: RunnableConfig = {
                "configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent}
            }
            saved = await self.durable.aput(config, checkpoint, metadata, dict(checkpoint["channel_versions"]))
            by_task: dict[tuple[str, str], list[tuple[str, Any]]] = defaultdict(list)
            for task_id, channel, value, task_path in self._writes.get((thread, ns, checkpoint_id), {}).values():
                by_task[(task_id, task_path)].append((channel, value))
            for (task_id, task_path), writes in by_task.items():
                await self.durable.aput_writes(saved, writes, task_id, task_path)
            if ns == "":
                latest = checkpoint_id
        return latest

    # -- BaseCheckpointSaver ------------------------------------------------------------------

    def _in_memory(self, thread_id: str) -> bool:
        return thread_id in self._threads

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id = config["configurable"]["thread_id"]
        if not self._in_memory(thread_id):
            return await self.durable.aget_tuple(config)
        ns = config["configurable"].get("checkpoint_ns", "")
        stored = self._checkpoints.get((thread_id, ns))
        if not stored:
            return None if thread_id in self._fresh else await self.durable.aget_tuple(config)
        checkpoint_id = get_checkpoint_id(config) or max(stored)
        if checkpoint_id not in stored:
            return None if thread_id in self._fresh else await self.durable.aget_tuple(config)
        return self._tuple(thread_id, ns, checkpoint_id)

    def _tuple(self, thread_id: str, ns: str, checkpoint_id: str) -> CheckpointTuple:
        checkpoint, metadata, parent = self._checkpoints[(thread_id, ns)][checkpoint_id]
        writes = self._writes.get((thread_id, ns, checkpoint_id), {})
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}},
            checkpoint={**checkpoint, "channel_values": dict(checkpoint["channel_values"])},
            metadata=metadata,
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
                if parent
                else None
            ),
            pending_writes=[(task_id, channel, value) for task_id, channel, value, _ in writes.values()],
        )

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread_id = config["configurable"]["thread_id"] if config else None
        if config is None or thread_id is None or not self._in_memory(thread_id):
            async for item in self.durable.alist(config, filter=filter, before=before, limit=limit):
                yield item
            return
        ns = config["configurable"].get("checkpoint_ns", "")
        for checkpoint_id in sorted(self._checkpoints.get((thread_id, ns), {}), reverse=True):
            yield self._tuple(thread_id, ns, checkpoint_id)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id = config["configurable"]["thread_id"]
        ns = config["configurable"].get("checkpoint_ns", "")
        if not self._in_memory(thread_id):
            return await self.durable.aput(config, checkpoint, metadata, new_versions)
        # The objects themselves: nothing is serialised until persist().
        kept: Checkpoint = {**checkpoint, "channel_values": dict(checkpoint["channel_values"])}
        self._checkpoints[(thread_id, ns)][checkpoint["id"]] = (
            kept,
            get_checkpoint_metadata(config, metadata),
            config["configurable"].get("checkpoint_id"),
        )
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id = config["configurable"]["thread_id"]
        if not self._in_memory(thread_id):
            return await self.durable.aput_writes(config, writes, task_id, task_path)
        key = (thread_id, config["configurable"].get("checkpoint_ns", ""), config["configurable"]["checkpoint_id"])
        stored = self._writes[key]
        for idx, (channel, value) in enumerate(writes):
            inner = (task_id, WRITES_IDX_MAP.get(channel, idx))
            if inner[1] >= 0 and inner in stored:
                continue  # as every saver does: a task's write is stored once; special ones are replaced
            stored[inner] = (task_id, channel, value, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.discard(thread_id)
        await self.durable.adelete_thread(thread_id)

    # -- the sync interface --------------------------------------------------------------------
    # A sync node that invokes a graph (a subgraph called with `.invoke()`)
    # runs on a worker thread and checkpoints through these: the run's own
    # thread is served from memory as by the async methods; what is read
    # from or written to the durable saver goes through the saver's loop.

    def _on_loop(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._loop is None or threading.get_ident() == self._loop_thread:
            coro.close()
            raise NotImplementedError("RunCheckpoints: sync calls are served from a worker thread only")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(SYNC_DURABLE_SECONDS)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._on_loop(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [item async for item in self.alist(config, filter=filter, before=before, limit=limit)]

        return iter(self._on_loop(collect()))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._on_loop(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._on_loop(self.aput_writes(config, writes, task_id, task_path))

    def get_next_version(self, current: Any, channel: None) -> Any:
        # Versions must read the same once persisted to the durable saver.
        return self.durable.get_next_version(current, channel)
