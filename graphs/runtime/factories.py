"""Graph factories as langgraph-api calls them (docs/graphs.md, "Bring your
own graph"): a function of no argument, of `config`, of a `ServerRuntime`
(told by its annotation), or of both by keyword, sync or async, returning a
compiled graph (or a StateGraph, compiled here). Such a factory is called
each time a graph is needed: for a run, with the run's config and an
execution runtime (`access_context="threads.create_run"`, the run's
context); for everything else, with a read runtime (`assistants.read`).
agentsite's own factories take `model=` and `checkpointer=` instead, and
are told apart by those parameter names.

The runtime's store: for a run, the turn's store (graphs.runtime.turn_store,
what the graph itself gets); outside a run, a BaseStore that refuses every
operation, since nothing there could keep a write."""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any, get_args, get_origin

from django.core.exceptions import ImproperlyConfigured
from langchain_core.runnables import RunnableConfig
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore, Op, Result
from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime, _ReadRuntime

OURS = frozenset({"model", "checkpointer"})
_HINT_NAMES = {"ServerRuntime": ServerRuntime, "RunnableConfig": RunnableConfig, "Config": RunnableConfig}


class UnservedStore(BaseStore):
    """`runtime.store` of a factory called outside a run (schemas, drawings,
    start-up): every call says so."""

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        raise NotImplementedError("a graph factory's store is served during a run only")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)


STORE = UnservedStore()


def is_ours(target: Callable) -> bool:
    """A factory of ours: it takes `model=` or `checkpointer=`."""
    return bool(OURS & set(inspect.signature(target).parameters))


def _is_runtime(annotation: Any) -> bool:
    if annotation is ServerRuntime:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, _ExecutionRuntime | _ReadRuntime)
    origin = get_origin(annotation)
    if origin is ServerRuntime:
        return True
    args = get_args(annotation)
    return bool(origin is not None and args and _is_runtime(args[0]))


def _arguments(target: Callable, where: str) -> Callable[[RunnableConfig, Any], dict[str, Any]]:
    """How to call `target`, as langgraph-api reads its signature."""
    params = list(inspect.signature(target).parameters.values())
    try:
        hints = typing.get_type_hints(target, localns=_HINT_NAMES)
    except Exception:  # an annotation that does not resolve: read it as written
        hints = {}
    runtime = [p.name for p in params if _is_runtime(hints.get(p.name, p.annotation))]
    if not params:
        return lambda config, rt: {}
    if len(params) == 1:
        name = params[0].name
        return (lambda config, rt: {name: rt}) if runtime else (lambda config, rt: {name: config})
    if len(params) == 2 and len(runtime) == 1:
        other = next(p.name for p in params if p.name != runtime[0])
        return lambda config, rt: {runtime[0]: rt, other: config}
    names = ", ".join(p.name for p in params)
    raise ImproperlyConfigured(f"{where}: a factory takes nothing, config, a ServerRuntime or both, not ({names})")


def _compiled(value: Any, where: str) -> Pregel:
    if isinstance(value, StateGraph):
        value = value.compile()
    if hasattr(value, "__enter__") or hasattr(value, "__aenter__"):
        raise ImproperlyConfigured(f"{where}: context-manager graph factories are not supported yet")
    if not isinstance(value, Pregel):
        raise ImproperlyConfigured(f"{where}: the factory returned {type(value).__name__}, not a compiled graph")
    return value


def _in_own_loop(coroutine: Any) -> Any:
    """An async factory's result, from sync code that may run on a loop."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def call_for_read(target: Callable, where: str) -> Pregel:
    runtime: _ReadRuntime[Any] = _ReadRuntime(access_context="assistants.read", store=STORE)
    value = target(**_arguments(target, where)({"configurable": {}}, runtime))
    if inspect.isawaitable(value):
        value = _in_own_loop(value)
    return _compiled(value, where)


async def call_for_run(target: Callable, where: str, config: RunnableConfig, context: Any, store: BaseStore) -> Pregel:
    runtime: _ExecutionRuntime[Any] = _ExecutionRuntime(
        access_context="threads.create_run", store=store, context=copy.copy(context) if context is not None else None
    )
    value = target(**_arguments(target, where)(config, runtime))
    if inspect.isawaitable(value):
        value = await value
    return _compiled(value, where)
