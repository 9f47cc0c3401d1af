"""The graphs every side of the benchmark runs. `build_chat_graph`: one chat
node calling the model, as a bare LangGraph app would. `build_tool_graph`:
LangChain's `create_agent` loop (model ⇄ tools, the booking graph's shape
without its approval step) with a scripted model that calls the `step`
tool `STEPS` times before it answers, so a run is a fixed number of
model and tool steps whatever the server. agentsite registers both by
dotted path (AGENT_GRAPHS) like any user's graph; the floor compiles the
chat graph on its own, and the peers load them from bench.peer_graphs."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

STEPS = 5


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


@tool
async def step(n: int) -> str:
    """Step `n` of the run's work."""
    return json.dumps({"step": n, "done": True})


class StepModel(BaseChatModel):
    """Calls `step` until this turn (since the last human message) has
    `steps` tool answers, then replies."""

    steps: int = STEPS

    @property
    def _llm_type(self) -> str:
        return "agentsite-bench-steps"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self  # the script knows its one tool

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        done = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                break
            done += isinstance(message, ToolMessage)
        if done < self.steps:
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            answer = AIMessage("", tool_calls=[{"name": step.name, "args": {"n": done + 1}, "id": call_id}])
        else:
            answer = AIMessage(f"Done in {done} steps.")
        return ChatResult(generations=[ChatGeneration(message=answer)])

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        # No I/O and little work: no thread hop (BaseChatModel's default).
        return self._generate(messages, stop, **kwargs)


def build_tool_graph(*, model=None, checkpointer=None):
    """create_agent's model ⇄ tools loop; `model` (agentsite passes its
    configured one) is ignored: the script is the model."""
    from langchain.agents import create_agent

    return create_agent(StepModel(), tools=[step], checkpointer=checkpointer, name="tools")
