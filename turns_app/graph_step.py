"""Step 2 of the protocol, the graph adapter: run the graph for a claimed
turn and turn what it streams into turn events.

The run starts from the last *committed* state — the committed checkpoint, or
the session's snapshot when that checkpoint is missing — on the turn's own
checkpoint thread, and holds no transaction or row lock. It only proposes an
`Outcome`; `services.turn_commit` decides whether it lands.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from agentsite.agent.checkpointer import get_saver
from agentsite.agent.models import build_model
from agentsite.agent.registry import build_graph
from agentsite.agent.transcript import transcript_to_messages
from turns_app import faults
from turns_app.types import Claim, Outcome

logger = logging.getLogger(__name__)

Emit = Callable[[str, dict[str, Any]], Awaitable[None]]

# One compiled graph per saver: compiling per turn is wasted work, and a saver
# already belongs to exactly one event loop.
_graphs: "weakref.WeakKeyDictionary[BaseCheckpointSaver, Any]" = weakref.WeakKeyDictionary()


def graph_for(saver: BaseCheckpointSaver):
    graph = _graphs.get(saver)
    if graph is None:
        graph = build_graph(None, model=build_model(), checkpointer=saver)
        _graphs[saver] = graph
    return graph


async def committed_messages(claim: Claim, saver: BaseCheckpointSaver) -> list:
    """The conversation as of the last commit: the committed checkpoint's, or
    rebuilt from the business snapshot when that checkpoint is missing."""
    if claim.checkpoint_thread and claim.committed_checkpoint_id:
        config = {
            "configurable": {
                "thread_id": claim.checkpoint_thread,
                "checkpoint_ns": "",
                "checkpoint_id": claim.committed_checkpoint_id,
            }
        }
        found = await saver.aget_tuple(config)
        if found is not None:
            return list(found.checkpoint["channel_values"].get("messages", []))
        logger.warning(
            "committed checkpoint %s of session %s is missing; rebuilding from the snapshot",
            claim.committed_checkpoint_id,
            claim.session_id,
        )
    return transcript_to_messages(claim.snapshot.get("messages", []))


async def run_graph(claim: Claim, emit: Emit) -> Outcome:
    saver = await get_saver(str(claim.session_id))
    graph = graph_for(saver)
    prior = await committed_messages(claim, saver)
    text = claim.request["text"]
    state_in = {
        "messages": [*prior, HumanMessage(content=text, id=f"{claim.turn_id}:user")],
        # Fields, form and stage come from the session row, not the
        # checkpoint: set-fields changes the row without touching checkpoints.
        "form": claim.form,
        "fields": claim.fields,
        "stage": claim.stage,
        "asked_field": claim.snapshot.get("asked_field"),
        "client_mode": claim.request["client_mode"],
        "need_form_update": claim.request["need_form_update"],
    }
    config = {"configurable": {"thread_id": claim.thread_id}}
    streamed_any = False
    # durability="exit": one checkpoint per turn, written when the run ends.
    async for part in graph.astream(
        state_in, config, stream_mode=["messages", "updates"], version="v2", durability="exit"
    ):
        if part["type"] == "messages":
            chunk, meta = part["data"]
            if meta.get("langgraph_node") == "reply" and chunk.content:
                await emit("delta", {"text": chunk.content})
                if not streamed_any:
                    streamed_any = True
                    faults.hit("mid_stream")
        elif part["type"] == "updates":
            for node, update in (part["data"] or {}).items():
                if node == "extract" and update is not None:
                    await emit(
                        "fields",
                        {
                            "field_changes": update.get("field_changes", {}),
                            "rejected": update.get("rejected", []),
                        },
                    )
    state = await graph.aget_state(config)
    values = state.values
    # A model may emit U+0000, which PostgreSQL's jsonb cannot hold.
    reply = _last_reply(values.get("messages", [])).replace("\x00", "")
    transcript = [
        *claim.snapshot.get("messages", []),
        {"role": "user", "content": text, "turn_id": str(claim.turn_id)},
        {"role": "assistant", "content": reply, "turn_id": str(claim.turn_id)},
    ]
    return Outcome(
        reply=reply,
        field_changes=dict(values.get("field_changes") or {}),
        fields=dict(values.get("fields") or {}),
        stage=values.get("stage") or claim.stage,
        snapshot={"messages": transcript, "asked_field": values.get("asked_field")},
        checkpoint_id=state.config["configurable"].get("checkpoint_id"),
        thread_id=claim.thread_id,
    )


def _last_reply(messages: list) -> str:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            content = message.content
            return content if isinstance(content, str) else message.text
        if isinstance(message, HumanMessage):
            break
    raise RuntimeError("the graph finished without a reply")
