"""The store as a graph sees it during a turn (`get_store()`,
`runtime.store`): LangGraph's durable store, its namespaces the turn's
owner's, and the turn's own writes held back until the turn commits.

A write (`put`, `delete`) is staged, not done: it is recorded as the effect
`store.write` (graphs.runtime.effects), which the turn's commit applies in
its own transaction (turns_app.store_tables), so it lands exactly when the
turn commits, once, and an aborted, fenced or cancelled turn leaves none.
Reads during the turn see its staged writes over what the store holds: the
staged items live in an `InMemoryStore` of the turn (LangGraph's own
matching of filters and namespaces), the deletes in a set. With a store
index (AGENT_STORE_INDEX) a write's vectors are made when it is staged,
outside the commit's transaction, and ride in the effect; a `query` ranks
the staged items by them among the store's, by the same cosine score.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base import _validate_namespace as validate_namespace
from langgraph.store.memory import InMemoryStore

from graphs.runtime import effects
from graphs.runtime.embeddings import store_index, texts_to_embed
from graphs.runtime.sqlite_vectors import cosine
from graphs.runtime.store import external, get_store, internal, shown, ttl_config

STORE_WRITE = "store.write"


class StoreOutsideTurn(effects.EffectError):
    """A graph used the store while no agentsite turn ran it."""


@dataclass
class Staged:
    """One turn's writes, as its reads see them (namespaces as the owner
    names them)."""

    items: InMemoryStore = field(default_factory=InMemoryStore)
    deleted: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    vectors: dict[tuple[tuple[str, ...], str], list[list[float]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.deleted) + sum(len(keys) for keys in self.items._data.values())

    def hides(self, namespace: tuple[str, ...], key: str) -> bool:
        return (namespace, key) in self.deleted or key in self.items._data.get(namespace, {})


def _context() -> effects.TurnContext:
    context = effects.current_or_none()
    if context is None or context.owner is None:
        raise StoreOutsideTurn("the store is open to graphs while agentsite runs their turn")
    if context.staged is None:
        context.staged = Staged()
    return context


class TurnStore(BaseStore):
    """One per event loop (the durable store it reads cannot cross loops);
    which turn it serves is the running turn's context."""

    supports_ttl = True

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.ttl_config = ttl_config()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        # A sync node runs on a worker thread with the turn's context; the
        # durable store lives on the loop.
        context = _context()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise asyncio.InvalidStateError(
                "the store's synchronous methods would block the event loop here: use aget, aput, asearch, …"
            )
        return asyncio.run_coroutine_threadsafe(self._batch(list(ops), context), self.loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._batch(list(ops), _context())

    async def _batch(self, ops: list[Op], context: effects.TurnContext) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                await self._stage(op, context)
                results.append(None)
            elif isinstance(op, GetOp):
                results.append(await self._get(op, context))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op, context))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._namespaces(op, context))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    async def _stage(self, op: PutOp, context: effects.TurnContext) -> None:
        validate_namespace(op.namespace)
        assert context.owner is not None and isinstance(context.staged, Staged)
        value = None if op.value is None else dict(op.value)
        vectors: list[tuple[str, list[float]]] = []
        if value is not None:
            orjson.dumps(value)  # a value the store cannot hold fails the node now, not the commit
            if op.index is not False:
                vectors = await _embed(value, op.index)
        effects.record(
            STORE_WRITE,
            {
                "namespace": list(internal(context.owner, op.namespace)),
                "key": op.key,
                "value": value,
                "index": op.index,
                "ttl": op.ttl,
                "vectors": [[name, vector] for name, vector in vectors],
            },
        )
        staged = context.staged
        staged.vectors.pop((op.namespace, op.key), None)
        if value is None:
            staged.deleted.add((op.namespace, op.key))
            staged.items.delete(op.namespace, op.key)
        else:
            staged.deleted.discard((op.namespace, op.key))
            staged.items.put(op.namespace, op.key, value)
            if vectors:
                staged.vectors[(op.namespace, op.key)] = [vector for _, vector in vectors]

    async def _get(self, op: GetOp, context: effects.TurnContext) -> Item | None:
        assert context.owner is not None and isinstance(context.staged, Staged)
        staged = context.staged
        if (op.namespace, op.key) in staged.deleted:
            return None
        mine = staged.items.get(op.namespace, op.key)
        if mine is not None:
            return mine
        found = await (await get_store()).aget(
            internal(context.owner, op.namespace), op.key, refresh_ttl=op.refresh_ttl
        )
        return None if found is None else shown(found)

    async def _search(self, op: SearchOp, context: effects.TurnContext) -> list[SearchItem]:
        assert context.owner is not None and isinstance(context.staged, Staged)
        staged = context.staged
        index = store_index()
        ranked = bool(op.query) and index is not None
        if ranked:
            assert index is not None and op.query is not None
            mine = _ranked(staged, op, await index["embed"].aembed_query(op.query)) if staged.vectors else []
        else:
            mine = staged.items.search(op.namespace_prefix, filter=op.filter, limit=op.offset + op.limit)
        held = await (await get_store()).asearch(
            internal(context.owner, op.namespace_prefix),
            filter=op.filter,
            query=op.query,
            limit=op.offset + op.limit + len(staged),
            refresh_ttl=op.refresh_ttl,
        )
        rest = [shown(item) for item in held]
        rest = [item for item in rest if not staged.hides(item.namespace, item.key)]
        # The turn's writes are the newest: first, as a listing orders by
        # update; a query orders them all by score.
        combined: list[Any] = [*mine, *rest]
        if ranked:
            combined.sort(key=lambda item: -item.score if item.score is not None else math.inf)
        return combined[op.offset : op.offset + op.limit]

    async def _namespaces(self, op: ListNamespacesOp, context: effects.TurnContext) -> list[tuple[str, ...]]:
        assert context.owner is not None and isinstance(context.staged, Staged)
        conditions = list(op.match_conditions or ())
        prefix = next((tuple(c.path) for c in conditions if c.match_type == "prefix"), ())
        suffix = next((tuple(c.path) for c in conditions if c.match_type == "suffix"), None)
        held = await (await get_store()).alist_namespaces(
            prefix=internal(context.owner, prefix),
            suffix=suffix,
            max_depth=None if op.max_depth is None else op.max_depth + 1,
            limit=op.offset + op.limit + len(context.staged),
        )
        mine = await context.staged.items.alist_namespaces(
            prefix=prefix or None, suffix=suffix, max_depth=op.max_depth, limit=op.offset + op.limit
        )
        found = {external(ns) for ns in held} | set(mine)
        return sorted(found)[op.offset : op.offset + op.limit]


async def _embed(value: dict[str, Any], paths: Sequence[str] | None) -> list[tuple[str, list[float]]]:
    texts = texts_to_embed(value, paths)
    index = store_index()
    if not texts or index is None:
        return []
    vectors = await index["embed"].aembed_documents([text for _, text in texts])
    return [(name, [float(x) for x in vector]) for (name, _), vector in zip(texts, vectors, strict=True)]


def _ranked(staged: Staged, op: SearchOp, query: list[float]) -> list[SearchItem]:
    """The staged items a query finds: those with vectors, each scored by
    its best field, as the stores score theirs."""
    found = staged.items.search(op.namespace_prefix, filter=op.filter, limit=max(len(staged), 1))
    ranked: list[SearchItem] = []
    for item in found:
        scores = [s for v in staged.vectors.get((item.namespace, item.key), []) if (s := cosine(v, query)) is not None]
        if scores:
            item.score = max(scores)
            ranked.append(item)
    return ranked


_by_loop: dict[asyncio.AbstractEventLoop, TurnStore] = {}


def turn_store() -> TurnStore:
    """This event loop's TurnStore (what registry.graph_for gives graphs)."""
    loop = asyncio.get_running_loop()
    store = _by_loop.get(loop)
    if store is None or store.loop is not loop:
        for stale in [other for other in _by_loop if other.is_closed()]:
            del _by_loop[stale]
        store = _by_loop[loop] = TurnStore()
    return store
