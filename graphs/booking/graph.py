"""The booking graph: LangChain's `create_agent` (model ⇄ tools) with its
`HumanInTheLoopMiddleware` asking a human before a table is booked.

    START → model → review ─┬─ tool calls → tools → model
                            └─ no tool call → END

`review` (the middleware's `after_model`) pauses the run on a `book_table`
call with LangChain's interrupt value, `{"action_requests": [{"name",
"args", "description"}], "review_configs": [{"action_name",
"allowed_decisions"}]}`, and reads LangChain's answer, `{"decisions":
[{"type": "approve"} | {"type": "edit", "edited_action": {"name", "args"}}
| {"type": "reject", "message": "…"}]}` — what agent-chat-ui's Approve /
Edit / Reject widget sends. The answers agentsite took before it used the
middleware still work: `graphs.booking.decisions` translates them.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.human_in_the_loop import HITLRequest, InterruptOnConfig
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from graphs.booking.decisions import decisions_from
from graphs.booking.tools import book_table, check_availability
from graphs.prompts import render_task

TASK_BOOKING = "booking"
INSTRUCTIONS = """\
You book restaurant tables. Collect the guest's name, the date (YYYY-MM-DD),
the time (HH:MM) and the party size; ask for what is missing. When you have
them all, call check_availability, and if a table is free, call book_table.
After book_table answers, confirm the booking (with its reference) or say why
it was not made. Never claim a table is booked unless book_table said so."""
# What a reviewer may answer: agent-chat-ui offers these three.
ALLOWED_DECISIONS: list[Any] = ["approve", "edit", "reject"]


def describe_booking(call: ToolCall, state: Any, runtime: Any) -> str:
    args = call["args"]
    return (
        f"Book a table for {args.get('party_size')} on {args.get('date')} at {args.get('time')} "
        f"under {args.get('name')}? Approve, edit the booking, or reject it (with a reason)."
    )


class BookingReview(HumanInTheLoopMiddleware):
    """LangChain's middleware, batched (one interrupt per model turn, the
    shape agent-chat-ui reads), which reads each answer through
    `decisions_from` before the middleware's own decision handling: so an
    answer in agentsite's older shape, or one that cannot be read, is a
    decision too (the unreadable one a reject: nothing is booked on an
    unclear answer) instead of an exception that fails the turn."""

    def after_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        gated = [c for c in (last.tool_calls if last is not None else []) if c["name"] in self.interrupt_on]
        if not gated:
            # Nothing to ask: the library's own bookkeeping (it drops an earlier turn's edits).
            return super().after_model(state, runtime)
        asked = [self._create_action_and_config(c, self.interrupt_on[c["name"]], state, runtime) for c in gated]
        requests = [request for request, _ in asked]
        # The node runs again from the top when resumed: nothing before the
        # interrupt may have effects (building the request has none).
        answer = interrupt(HITLRequest(action_requests=requests, review_configs=[config for _, config in asked]))
        refusals: list[ToolMessage] = []
        edited: dict[str, Any] = {}
        for call, decision in zip(gated, decisions_from(answer, requests), strict=True):
            _, refusal = self._process_decision(decision, call, self.interrupt_on[call["name"]])
            if refusal is not None:
                refusals.append(refusal)
            call_id = call.get("id")
            if decision["type"] == "edit" and call_id:
                edited[call_id] = decision["edited_action"]
        # The model's message stays as it is (the middleware runs the edited
        # call in its place, noting the edit in the tool's result); only the
        # refusals are new messages.
        return {"messages": refusals, "hitl_edited_tool_calls": edited}

    async def aafter_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_model(state, runtime)


def build_booking_graph(*, model: BaseChatModel, checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """Books restaurant tables with tools, asking a human to approve each booking."""
    review: InterruptOnConfig = {"allowed_decisions": ALLOWED_DECISIONS, "description": describe_booking}
    return create_agent(
        model,
        tools=[check_availability, book_table],
        system_prompt=render_task(TASK_BOOKING, {}, instructions=INSTRUCTIONS),
        middleware=[BookingReview(interrupt_on={book_table.name: review})],
        checkpointer=checkpointer,
        name="booking",
    )
