"""Graphs that exist only for the tests, registered by dotted path like any
user's (AGENT_GRAPHS): they prove the graph contract without anything of
intake's."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class EchoState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns_seen: int  # carried from turn to turn


def build_echo_graph(*, model, checkpointer=None):
    """Answers by streaming the model's reply; counts the turns it has seen."""

    async def answer(state: EchoState) -> dict[str, Any]:
        reply = await model.ainvoke(state["messages"])
        return {"messages": [AIMessage(content=reply.text, id=reply.id)], "turns_seen": state.get("turns_seen", 0) + 1}

    builder = StateGraph(EchoState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=checkpointer, name="echo")


async def _fixed(state: EchoState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"you said: {state['messages'][-1].text}")]}


_builder = StateGraph(EchoState)
_builder.add_node("fixed", _fixed)
_builder.add_edge(START, "fixed")
# A compiled graph (not a factory): registered as it is.
fixed_graph = _builder.compile(name="fixed")


class NoMessages(TypedDict):
    count: int


def build_graph_without_messages(*, model, checkpointer=None):
    builder = StateGraph(NoMessages)
    builder.add_node("count", lambda state: {"count": 1})
    builder.add_edge(START, "count")
    return builder.compile(checkpointer=checkpointer)
