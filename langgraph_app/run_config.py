"""A run's assistant, config and context, as LangGraph's server merges them:
the assistant's config and context, with the run's over them
(`configurable` and context key by key), passed to the graph as
`config["configurable"]` (and tags, recursion_limit, metadata) and as its
run `context` (docs/agent-protocol.md, "Assistants"). Resolved when the
run is asked for, so the turn runs with what was asked even if the
assistant changes while it waits."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from assistants_app import selectors as assistants_read
from core.errors import AssistantNotFound, ValidationFailed
from langgraph_app.ids import assistant_id, unknown_assistant
from langgraph_app.run_input import RunBody

# Set by the server for every run; a client's value is not the run's.
SERVER_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "run_id", "assistant_id"})


class ConfigurableAndContext(ValidationFailed):
    status = 400
    default_message = (
        "Cannot specify both configurable and context. Prefer setting context alone "
        "(context is the LangGraph 0.6 replacement for configurable)."
    )


@dataclass(frozen=True)
class RunAssistant:
    graph: str
    assistant_id: str
    config: dict[str, Any]
    context: dict[str, Any]


def system_run_assistant(raw: Any) -> RunAssistant | None:
    """`resolve` for a graph's system assistant (named by its graph or its
    UUID), which is known without a read: a run naming one resolves it on
    the event loop, with no thread hop (docs/scale.md, "CPU"). None for
    any other name."""
    graph = assistants_read.system_graph_of(raw)
    if graph is None:
        return None
    return RunAssistant(graph=graph, assistant_id=assistant_id(graph), config={}, context={})


def resolve(owner: str, raw: str, where: dict[str, Any] | None = None) -> RunAssistant:
    """The assistant a run names: a graph (its system assistant) or one of
    the owner's matching `where` (the assistants.read handler's filter);
    anything else is LangGraph's 'Invalid assistant' (422)."""
    try:
        row = assistants_read.assistant_get(owner=owner, assistant_id=raw, where=where)
    except AssistantNotFound:
        raise unknown_assistant(raw) from None
    return RunAssistant(
        graph=row.graph_id,
        assistant_id=str(row.assistant_id) if row.pk is not None else assistant_id(row.graph_id),
        config=dict(row.config or {}),
        context=dict(row.context or {}),
    )


def _fields_of(schema: Any) -> set[str] | None:
    if dataclasses.is_dataclass(schema):
        return {f.name for f in dataclasses.fields(schema)}
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, dict):
        return set(fields)
    hints = getattr(schema, "__annotations__", None)
    return set(hints) if isinstance(hints, dict) else None


def _coerced(schema: Any) -> bool:
    """LangGraph builds a dataclass or pydantic context from the dict it is
    given (a TypedDict stays the dict): only those can fail to build."""
    return dataclasses.is_dataclass(schema) or isinstance(getattr(schema, "model_fields", None), dict)


def _check(schema: Any, context: dict[str, Any]) -> None:
    """Refused here, with what is wrong, rather than failing the run later."""
    try:
        TypeAdapter(schema).validate_python(context)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ValidationFailed(f"context{'.' + where if where else ''}: {first.get('msg')}") from None


def _own(configurable: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in configurable.items() if k not in SERVER_KEYS and not k.startswith("__")}


def merged(assistant: RunAssistant, body: RunBody, context_schema: Any) -> dict[str, Any]:
    """The run's protocol options `config` and `context` (each left out when empty)."""
    given = body.config.model_dump(exclude_none=True) if body.config is not None else {}
    asked_context = body.context or {}
    if given.get("configurable") and asked_context:
        raise ConfigurableAndContext()
    config = {**assistant.config, **{k: v for k, v in given.items() if k != "configurable"}}
    configurable = _own({**(assistant.config.get("configurable") or {}), **(given.get("configurable") or {})})
    context = {**assistant.context, **asked_context}
    # As LangGraph's server: what comes as context is in configurable too,
    # and configurable values stand in for a context not given.
    configurable = {**configurable, **_own(asked_context)}
    if not context:
        context = dict(configurable)
    if context_schema is not None:
        known = _fields_of(context_schema)
        if known is not None:
            context = {k: v for k, v in context.items() if k in known}
        if context and _coerced(context_schema):
            _check(context_schema, context)
    elif not asked_context and not assistant.context:
        context = {}  # no schema to hand configurable to
    out: dict[str, Any] = {}
    if configurable:
        config["configurable"] = configurable
    else:
        config.pop("configurable", None)
    if config:
        out["config"] = config
    if context:
        out["context"] = context
    return out
