"""Reads of assistants: an owner's own (rows) and the system assistants (one
per registered graph, the same for every owner, never stored). Another
owner's assistant answers the same 404 as one that does not exist."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTransform

from assistants_app.models import Assistant, AssistantVersion
from core import metadata_filter
from core.errors import AssistantNotFound
from graphs.runtime.registry import describe

# LangGraph's server gives each graph a default assistant with this uuid5
# namespace; clients that stored such an id keep working against us.
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
# System assistants exist as long as the process: registered at start-up.
REGISTERED_AT = datetime.now(UTC)
SYSTEM_METADATA = {"created_by": "system"}
SORT_FIELDS = frozenset({"assistant_id", "created_at", "updated_at", "name", "graph_id"})


def system_assistant_id(graph: str) -> uuid.UUID:
    return uuid.uuid5(ASSISTANT_NAMESPACE, graph)


@functools.lru_cache(maxsize=64)
def _description(graph: str, path: str) -> str | None:
    return describe(graph)["description"] or None


def system_assistant(graph: str) -> Assistant:
    """The graph's system assistant, as an unsaved row (owner empty)."""
    return Assistant(
        owner="",
        assistant_id=system_assistant_id(graph),
        graph_id=graph,
        name=graph,
        description=_description(graph, settings.AGENT_GRAPHS[graph]),
        config={},
        context={},
        metadata=dict(SYSTEM_METADATA),
        version=1,
        created_at=REGISTERED_AT,
        updated_at=REGISTERED_AT,
    )


def system_graph_of(assistant_id: Any) -> str | None:
    """The registered graph whose system assistant this is: its name or its UUID."""
    if not isinstance(assistant_id, str | uuid.UUID):
        return None
    if isinstance(assistant_id, str) and assistant_id in settings.AGENT_GRAPHS:
        return assistant_id
    text = str(assistant_id).lower()
    return next((g for g in settings.AGENT_GRAPHS if str(system_assistant_id(g)) == text), None)


def parse_assistant_id(raw: Any) -> uuid.UUID | None:
    if not isinstance(raw, str | uuid.UUID) or len(str(raw)) > 64:
        return None
    try:
        return raw if isinstance(raw, uuid.UUID) else uuid.UUID(raw)
    except ValueError:
        return None


def assistant_get(*, owner: str, assistant_id: Any, where: Mapping[str, Any] | None = None) -> Assistant:
    """A system assistant (by graph name or UUID) or one of the owner's,
    matching `where` (an auth handler's filter): else not found."""
    graph = system_graph_of(assistant_id)
    if graph is not None:
        system = system_assistant(graph)
        if metadata_filter.matches(system.metadata, where):
            return system
    parsed = parse_assistant_id(assistant_id) if graph is None else None
    if parsed is not None:
        found = metadata_filter.apply(Assistant.objects.filter(owner=owner, assistant_id=parsed), where).first()
        if found is not None and found.graph_id in settings.AGENT_GRAPHS:
            return found
    raise AssistantNotFound(f"Assistant {str(assistant_id)[:80]} not found")


@dataclass(frozen=True)
class AssistantFilter:
    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    # An auth handler's filter, beside the client's (both hold).
    where: Mapping[str, Any] | None = None


def _rows(owner: str, filters: AssistantFilter) -> QuerySet[Assistant]:
    # Rows of a graph no longer registered stay stored but hidden, as
    # LangGraph's server hides them.
    rows = Assistant.objects.filter(owner=owner, graph_id__in=list(settings.AGENT_GRAPHS))
    rows = metadata_filter.apply(rows, filters.where)
    if filters.graph_id is not None:
        rows = rows.filter(graph_id=filters.graph_id)
    if filters.name is not None:
        rows = rows.filter(name__icontains=filters.name)
    for i, (name, value) in enumerate((filters.metadata or {}).items()):
        # As sessions_app's search: a key transform (SQLite has no JSON
        # containment), never `metadata__<name>` (a name may hold "__").
        rows = rows.alias(**{f"_meta{i}": KeyTransform(name, "metadata")}).filter(**{f"_meta{i}": value})
    return rows


def _systems(filters: AssistantFilter) -> list[Assistant]:
    found = [system_assistant(g) for g in settings.AGENT_GRAPHS]
    found = [a for a in found if metadata_filter.matches(a.metadata, filters.where)]
    if filters.graph_id is not None:
        found = [a for a in found if a.graph_id == filters.graph_id]
    if filters.name is not None:
        found = [a for a in found if filters.name.lower() in a.name.lower()]
    if filters.metadata:
        found = [a for a in found if all(a.metadata.get(k) == v for k, v in filters.metadata.items())]
    return found


def assistant_count(*, owner: str, filters: AssistantFilter) -> int:
    return _rows(owner, filters).count() + len(_systems(filters))


def assistant_search(
    *, owner: str, filters: AssistantFilter, sort_by: str | None, descending: bool, limit: int, offset: int
) -> tuple[list[Assistant], int]:
    """One page of the owner's and the system assistants in one order, and
    how many match. The few system assistants are placed among the rows by
    counting the rows before each, so a deep page reads only its own rows."""
    field = sort_by if sort_by in SORT_FIELDS else "created_at"
    rows = _rows(owner, filters)

    def key(a: Assistant) -> tuple[Any, str]:
        return (getattr(a, field) if field != "assistant_id" else str(a.assistant_id), str(a.assistant_id))

    systems = sorted(_systems(filters), key=key, reverse=descending)
    first = "gt" if descending else "lt"  # a row comes first when its value is greater (desc) or less (asc)
    placed: dict[int, Assistant] = {}
    for i, system in enumerate(systems):
        value = getattr(system, field)
        ahead = rows.filter(
            Q(**{f"{field}__{first}": value}) | Q(**{field: value, f"assistant_id__{first}": system.assistant_id})
        ).count()
        placed[i + ahead] = system
    in_page = [p for p in placed if offset <= p < offset + limit]
    skipped = sum(1 for p in placed if p < offset)
    order = [f"-{field}", "-assistant_id"] if descending else [field, "assistant_id"]
    start = offset - skipped
    own = list(rows.order_by(*order)[start : start + limit - len(in_page)])
    merged: list[Assistant] = []
    for position in range(offset, offset + limit):
        if position in placed:
            merged.append(placed[position])
        elif own:
            merged.append(own.pop(0))
        else:
            break
    return merged, rows.count() + len(systems)


def assistant_versions(
    *,
    owner: str,
    assistant_id: Any,
    metadata: dict[str, Any] | None,
    limit: int,
    offset: int,
    where: Mapping[str, Any] | None = None,
) -> list[Assistant | AssistantVersion]:
    """Newest first; a system assistant has its one version."""
    assistant = assistant_get(owner=owner, assistant_id=assistant_id, where=where)
    if assistant.pk is None:
        matches = all(assistant.metadata.get(k) == v for k, v in (metadata or {}).items())
        return [assistant][offset : offset + limit] if matches else []
    versions = AssistantVersion.objects.filter(assistant=assistant).select_related("assistant")
    for i, (name, value) in enumerate((metadata or {}).items()):
        versions = versions.alias(**{f"_meta{i}": KeyTransform(name, "metadata")}).filter(**{f"_meta{i}": value})
    return list(versions.order_by("-version")[offset : offset + limit])
