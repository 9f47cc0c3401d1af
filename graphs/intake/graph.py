"""The `intake` graph: fill the session's form through conversation.

extract -> reply. The protocol runs every turn on a fresh thread with the full
state as input, so both nodes overwrite the per-turn keys they own.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from graphs.intake.form_spec import (
    FieldValueError,
    coerce_value,
    missing_required,
    parse_form,
)
from graphs.prompts import TASK_EXTRACT, TASK_REPLY, render_task

STAGE_COLLECTING = "collecting"
STAGE_COMPLETE = "complete"

_FENCED_JSON_RE = re.compile(r"```(?:json)?\s*(?P<body>.*?)```", re.DOTALL | re.IGNORECASE)


class IntakeState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    form: list[dict]  # form_to_json output
    fields: dict  # current typed values
    field_changes: dict  # this turn's applied changes {name: new_value}
    rejected: list[dict]  # this turn's rejected values [{field, value, message}]
    stage: str  # "collecting" | "complete"
    asked_field: str | None  # the field the last reply asked for
    client_mode: str  # "chat" | "form"
    need_form_update: bool


def build_intake_graph(*, model: BaseChatModel, checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    async def extract(state: IntakeState) -> dict[str, Any]:
        fields = dict(state.get("fields") or {})
        if not state.get("need_form_update", True):
            return {"fields": fields, "field_changes": {}, "rejected": []}
        asked = state.get("asked_field")
        # A field set since the question (set-fields) is no longer the one asked:
        # the next message must not be read as its answer.
        if asked is not None and fields.get(asked) is not None:
            asked = None
        prompt = [
            SystemMessage(render_task(TASK_EXTRACT, {"form": state["form"], "fields": fields, "asked_field": asked})),
            HumanMessage(_latest_user_text(state["messages"])),
        ]
        # Tagged nostream: extraction JSON must never reach the client's token stream.
        response = await model.ainvoke(prompt, config={"tags": [TAG_NOSTREAM]})
        changes, rejected = _apply(state["form"], fields, parse_json_object(response.text))
        fields.update(changes)
        return {"fields": fields, "field_changes": changes, "rejected": rejected}

    async def reply(state: IntakeState) -> dict[str, Any]:
        fields = state.get("fields") or {}
        missing = missing_required(parse_form(state["form"]), fields)
        stage = STAGE_COLLECTING if missing else STAGE_COMPLETE
        payload = {
            "form": state["form"],
            "fields": fields,
            "missing": missing,
            "rejected": state.get("rejected") or [],
            "field_changes": state.get("field_changes") or {},
            "stage": stage,
            "client_mode": state.get("client_mode") or "chat",
        }
        prompt = [SystemMessage(render_task(TASK_REPLY, payload)), *state["messages"]]
        response = await model.ainvoke(prompt)
        # Plain-text content keeps the transcript simple; the streamed chunks
        # carry the same id, so langgraph does not emit the message twice.
        message = AIMessage(content=response.text, id=response.id)
        return {"messages": [message], "stage": stage, "asked_field": missing[0] if missing else None}

    builder = StateGraph(IntakeState)
    builder.add_node("extract", extract)
    builder.add_node("reply", reply)
    builder.add_edge(START, "extract")
    builder.add_edge("extract", "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer, name="intake")


def _latest_user_text(messages: list[AnyMessage]) -> str:
    if not messages or not isinstance(messages[-1], HumanMessage):
        raise ValueError("an intake turn must end with the user's message")
    return messages[-1].text


def _apply(
    form_json: list[dict], fields: dict[str, Any], found: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    specs = {spec.name: spec for spec in parse_form(form_json)}
    changes: dict[str, Any] = {}
    rejected: list[dict[str, Any]] = []
    for name, raw in found.items():
        spec = specs.get(name)
        # Unknown names are model noise; null means "not found", never "clear it".
        if spec is None or raw is None:
            continue
        try:
            value = coerce_value(spec, raw)
        except FieldValueError as exc:
            rejected.append({"field": name, "value": raw, "message": exc.message})
            continue
        if value != fields.get(name):
            changes[name] = value
    return changes, rejected


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer (bare, fenced or embedded); {} if none."""
    fenced = _FENCED_JSON_RE.search(text)
    candidates = [fenced["body"]] if fenced else []
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    return {}
