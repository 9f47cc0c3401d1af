"""The booking graph: agent ⇄ tools, with a human's approval before a
table is booked.

    START → agent ─┬─ tool calls without book_table → tools → agent
                   ├─ a book_table call → approve (interrupt) → agent
                   └─ no tool call → END

`approve` pauses the run with the proposed booking; the resume answers
`{"action": "approve"}`, `{"action": "edit", "args": {…}}` or
`{"action": "reject", "reason": "…"}` (the reason is optional).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolCall, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt
from typing_extensions import TypedDict

from graphs.booking.tools import (
    BookingArgsError,
    book_table,
    check_availability,
    clean_args,
)
from graphs.prompts import render_task

TASK_BOOKING = "booking"
TOOLS = {t.name: t for t in (check_availability, book_table)}
INSTRUCTIONS = """\
You book restaurant tables. Collect the guest's name, the date (YYYY-MM-DD),
the time (HH:MM) and the party size; ask for what is missing. When you have
them all, call check_availability, and if a table is free, call book_table.
After book_table answers, confirm the booking (with its reference) or say why
it was not made. Never claim a table is booked unless book_table said so."""


class BookingState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_booking_graph(*, model: BaseChatModel, checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """Books restaurant tables with tools, asking a human to approve each booking."""
    bound = model.bind_tools([check_availability, book_table])
    prompt = SystemMessage(render_task(TASK_BOOKING, {}, instructions=INSTRUCTIONS))

    async def agent(state: BookingState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([prompt, *state["messages"]])]}

    async def approve(state: BookingState) -> dict[str, Any]:
        answers: list[ToolMessage] = []
        asking = state["messages"][-1]
        assert isinstance(asking, AIMessage)  # the model's turn routed here: it asked for tools
        for call in asking.tool_calls:
            if call["name"] != "book_table":
                content = await TOOLS[call["name"]].ainvoke(call["args"])
                answers.append(ToolMessage(content=content, tool_call_id=call["id"], name=call["name"]))
                continue
            # The node runs again from the top when resumed: nothing before
            # the interrupt may have effects.
            decision = interrupt(
                {
                    "action": "book_table",
                    "args": call["args"],
                    "tool_call_id": call["id"],
                    "description": "Book this table? Answer approve, edit (with args) or reject (with a reason).",
                }
            )
            answers.append(await _decide(call, decision))
        return {"messages": answers}

    builder = StateGraph(BookingState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([check_availability, book_table]))
    builder.add_node("approve", approve)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", "approve", END])
    builder.add_edge("tools", "agent")
    builder.add_edge("approve", "agent")
    return builder.compile(checkpointer=checkpointer, name="booking")


def _route(state: BookingState) -> str:
    last = state["messages"][-1]
    calls = last.tool_calls if isinstance(last, AIMessage) else []
    if not calls:
        return END
    return "approve" if any(c["name"] == "book_table" for c in calls) else "tools"


async def _decide(call: ToolCall, decision: Any) -> ToolMessage:
    action = decision.get("action") if isinstance(decision, dict) else None
    if action == "approve":
        args = call["args"]
    elif action == "edit" and isinstance(decision.get("args"), dict):
        args = {**call["args"], **decision["args"]}
    else:
        if action == "reject":
            refusal = decision.get("reason") or "rejected"  # a reason is welcome, not required
        else:
            refusal = "the answer was not approve, edit or reject"
        return ToolMessage(
            content=json.dumps({"booked": False, "reason": f"not approved: {refusal}"}),
            tool_call_id=call["id"],
            name="book_table",
            status="error",
        )
    try:
        clean_args(**{k: args.get(k) for k in ("name", "date", "time", "party_size")})
    except BookingArgsError as exc:
        return ToolMessage(
            content=json.dumps({"booked": False, "reason": str(exc)}),
            tool_call_id=call["id"],
            name="book_table",
            status="error",
        )
    content = await book_table.ainvoke(args)
    return ToolMessage(content=content, tool_call_id=call["id"], name="book_table")
