"""A sync node that invokes a graph (`subgraph.invoke(...)`) checkpoints
through the run's checkpointer from a worker thread: RunCheckpoints serves
those sync calls (the run's own thread from memory, the durable saver
through its loop) instead of raising NotImplementedError, which failed the
resumed run of LangGraph's SDK suite graph at its subgraph node."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import Command, interrupt

from graphs.runtime.run_checkpoints import RunCheckpoints


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def _sub() -> object:
    builder = StateGraph(State)
    builder.add_node("inner", lambda state: {"items": ["inner"]})
    builder.set_entry_point("inner")
    builder.set_finish_point("inner")
    return builder.compile()


def build(saver: RunCheckpoints):
    sub = _sub()

    def ask(state: State) -> dict:
        return {"items": [f"asked:{interrupt('ok?')}"]}

    def call_sub(state: State) -> dict:  # sync: LangGraph runs it on a worker thread
        return {"items": sub.invoke({"items": []})["items"]}  # type: ignore[attr-defined]

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_node("call_sub", call_sub)
    builder.set_entry_point("ask")
    builder.add_edge("ask", "call_sub")
    builder.set_finish_point("call_sub")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("resumed", [False, True])
async def test_a_sync_subgraph_call_checkpoints_through_the_run(resumed):
    saver = RunCheckpoints(InMemorySaver())
    graph = build(saver)
    config = {"configurable": {"thread_id": "t"}}
    saver.begin("t", fresh=True)
    await graph.ainvoke({"items": []}, config)
    if resumed:
        # As a resume on another process: the pause persisted, memory gone.
        checkpoint_id = await saver.persist("t")
        saver.discard("t")
        saver.begin("t", fresh=False)
        config = {"configurable": {"thread_id": "t", "checkpoint_id": checkpoint_id}}
    final = await graph.ainvoke(Command(resume="yes"), config)
    saver.discard("t")
    assert final["items"] == ["asked:yes", "inner"]


def test_a_sync_call_on_the_loop_thread_is_refused():
    saver = RunCheckpoints(InMemorySaver())
    with pytest.raises(NotImplementedError):
        saver.get_tuple({"configurable": {"thread_id": "t"}})
