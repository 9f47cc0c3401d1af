"""The graph both sides of the benchmark run: one chat node calling the
model, as a bare LangGraph app would. agentsite registers it by dotted path
(AGENT_GRAPHS) like any user's graph; the floor compiles it on its own."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_chat_graph(*, model, checkpointer=None):
    """One chat node: the model answers the conversation."""

    async def chat(state: ChatState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(ChatState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    return builder.compile(checkpointer=checkpointer, name="chat")
