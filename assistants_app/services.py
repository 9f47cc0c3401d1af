"""Writes of assistants, each in its own durable transaction: create (with
its first version), patch (a new version, which becomes the assistant's),
set latest (an earlier version's values become the assistant's) and
delete (every version with it). Everything is checked before anything is
written: the graph is registered, config, context and metadata are JSON
objects of bounded size, and a system assistant is never changed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from assistants_app.models import Assistant, AssistantVersion
from assistants_app.selectors import assistant_get, parse_assistant_id, system_graph_of
from core import metadata_filter
from core.errors import AssistantExists, AssistantNotFound, SystemAssistant, UnknownGraph, ValidationFailed

# What one assistant may hold, each of config, context and metadata: they
# are copied into every run of it and every version.
VALUE_MAX_BYTES = 16 * 1024
NAME_MAX = 255
DESCRIPTION_MAX = 4096
VERSIONED = ("graph_id", "name", "description", "config", "context", "metadata")


def check_graph_id(graph_id: Any) -> str:
    if not isinstance(graph_id, str) or graph_id not in settings.AGENT_GRAPHS:
        graphs = ", ".join(settings.AGENT_GRAPHS)
        raise UnknownGraph(f"Graph {str(graph_id)[:80]!r} not found. Expected one of: {graphs}")
    return graph_id


def check_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationFailed(f"{what} must be a JSON object")
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError):
        raise ValidationFailed(f"{what} must be JSON") from None
    if size > VALUE_MAX_BYTES:
        raise ValidationFailed(f"{what} is {size} bytes as JSON; at most {VALUE_MAX_BYTES}")
    return value


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise ValidationFailed(f"{what} must be a string of at most {limit} characters")
    return value


def _snapshot(assistant: Assistant) -> None:
    AssistantVersion.objects.create(
        assistant=assistant, version=assistant.version, **{f: getattr(assistant, f) for f in VERSIONED}
    )


def assistant_create(
    *,
    owner: str,
    graph_id: Any,
    assistant_id: Any = None,
    config: Any = None,
    context: Any = None,
    metadata: Any = None,
    name: Any = None,
    description: Any = None,
    if_exists: str = "raise",
    where: Mapping[str, Any] | None = None,
) -> tuple[Assistant, bool]:
    """(the assistant, whether it was created). `if_exists="do_nothing"`
    answers the one that has the id already (mine or a system one) if it
    matches `where` (an auth handler's filter): one that does not is a
    conflict, as LangGraph's server answers."""
    graph_id = check_graph_id(graph_id)
    values = {
        "graph_id": graph_id,
        "config": check_object(config or {}, "config"),
        "context": check_object(context or {}, "context"),
        "metadata": check_object(metadata or {}, "metadata"),
        "name": _text(name or "Untitled", "name", NAME_MAX),
        "description": None if description is None else _text(description, "description", DESCRIPTION_MAX),
    }
    parsed = uuid.uuid4() if assistant_id is None else parse_assistant_id(assistant_id)
    if parsed is None:
        raise ValidationFailed("Invalid assistant ID: must be a UUID")
    if system_graph_of(parsed) is not None:
        system = assistant_get(owner=owner, assistant_id=parsed)
        if if_exists == "do_nothing" and metadata_filter.matches(system.metadata, where):
            return system, False
        raise AssistantExists(f"Assistant {parsed} exists (a graph's system assistant)")
    try:
        with transaction.atomic(durable=True):
            assistant = Assistant.objects.create(owner=owner, assistant_id=parsed, version=1, **values)
            _snapshot(assistant)
    except IntegrityError:
        existing = Assistant.objects.filter(owner=owner, assistant_id=parsed).first()
        if existing is None:
            raise
        mine = not where or metadata_filter.apply(Assistant.objects.filter(pk=existing.pk), where).exists()
        if if_exists == "do_nothing" and mine:
            return existing, False
        raise AssistantExists(f"Assistant {parsed} exists") from None
    return assistant, True


def _own_locked(owner: str, assistant_id: Any, where: Mapping[str, Any] | None) -> Assistant:
    """The owner's assistant, locked, if it matches `where` (an auth
    handler's filter, in the query): else not found, as one not there."""
    if system_graph_of(assistant_id) is not None:
        raise SystemAssistant()
    parsed = parse_assistant_id(assistant_id)
    found = None
    if parsed is not None:
        rows = Assistant.objects.select_for_update().filter(owner=owner, assistant_id=parsed)
        found = metadata_filter.apply(rows, where).first()
    if found is None:
        raise AssistantNotFound(f"Assistant {str(assistant_id)[:80]} not found")
    return found


def assistant_patch(
    *,
    owner: str,
    assistant_id: Any,
    graph_id: Any = None,
    config: Any = None,
    context: Any = None,
    metadata: Any = None,
    name: Any = None,
    description: Any = None,
    where: Mapping[str, Any] | None = None,
) -> Assistant:
    """A new version: the values given replace the current ones, except
    metadata, which is merged into them (as LangGraph's server does)."""
    changes: dict[str, Any] = {}
    if graph_id is not None:
        changes["graph_id"] = check_graph_id(graph_id)
    if config is not None:
        changes["config"] = check_object(config, "config")
    if context is not None:
        changes["context"] = check_object(context, "context")
    if name is not None:
        changes["name"] = _text(name, "name", NAME_MAX)
    if description is not None:
        changes["description"] = _text(description, "description", DESCRIPTION_MAX)
    if metadata is not None:
        check_object(metadata, "metadata")
    with transaction.atomic(durable=True):
        assistant = _own_locked(owner, assistant_id, where)
        if metadata is not None:
            changes["metadata"] = check_object({**assistant.metadata, **metadata}, "metadata")
        for field, value in changes.items():
            setattr(assistant, field, value)
        newest = AssistantVersion.objects.filter(assistant=assistant).aggregate(n=Max("version"))["n"] or 0
        assistant.version = newest + 1
        assistant.save()
        _snapshot(assistant)
    return assistant


def assistant_set_latest(
    *, owner: str, assistant_id: Any, version: int, where: Mapping[str, Any] | None = None
) -> Assistant:
    with transaction.atomic(durable=True):
        assistant = _own_locked(owner, assistant_id, where)
        chosen = AssistantVersion.objects.filter(assistant=assistant, version=version).first()
        if chosen is None:
            raise AssistantNotFound(f"Assistant {assistant.assistant_id} has no version {version}")
        for field in VERSIONED:
            setattr(assistant, field, getattr(chosen, field))
        assistant.version = version
        assistant.updated_at = timezone.now()
        assistant.save()
    return assistant


def assistant_delete(*, owner: str, assistant_id: Any, where: Mapping[str, Any] | None = None) -> None:
    with transaction.atomic(durable=True):
        _own_locked(owner, assistant_id, where).delete()
