"""What a client may put in a session — its form, metadata, graph — checked
into the stored shape, and the stage its fields put it in. Bad input is a
4xx with its own code (core.errors), never a 500."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from core.errors import InvalidForm, UnknownGraph, ValidationFailed
from graphs.intake import form_spec
from graphs.runtime.registry import UnknownGraph as UnregisteredGraph
from graphs.runtime.registry import fills_fields

METADATA_MAX_BYTES = 16_384


def default_form() -> list[dict[str, Any]]:
    return form_spec.form_to_json(form_spec.DEFAULT_FORM)


def default_form_for(graph: str) -> list[dict[str, Any]]:
    """A new session's form: the default one for a graph that fills fields
    (a `fields` channel), none for the others — a form nobody fills would
    show its required fields as missing forever."""
    return default_form() if fills_fields(graph) else []


def graph_fills_fields(graph: str) -> bool:
    """Whether a session's graph fills its form; a graph no longer
    registered is taken to (its stored form is then shown as it is)."""
    try:
        return fills_fields(graph)
    except UnregisteredGraph:
        return True


def check_form(raw: Any, graph: str) -> list[dict[str, Any]]:
    """A form sent for a session running `graph`. An empty one is what a
    graph without a `fields` channel gets by default, so it is valid for
    such a graph (and a fork or copy of its session keeps it); a graph that
    fills fields needs at least one."""
    if raw == [] and not fills_fields(graph):
        return []
    try:
        form_spec.check_form_size(raw)
        return form_spec.form_to_json(form_spec.parse_form(raw))
    except form_spec.FormSpecError as exc:
        raise InvalidForm(str(exc)) from None


def check_metadata(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValidationFailed("metadata must be a JSON object")
    if len(json.dumps(raw)) > METADATA_MAX_BYTES:
        raise ValidationFailed(f"metadata must be at most {METADATA_MAX_BYTES} bytes of JSON")
    return raw


def stage_for(form: list[dict[str, Any]], fields: dict[str, Any]) -> str:
    """A form-filling session's stage: complete once every required field is."""
    missing = form_spec.missing_required(form_spec.parse_form(form), fields) if form else []
    return "collecting" if missing else "complete"


def check_graph(raw: Any) -> str:
    if raw is None:
        return settings.AGENT_GRAPH
    if not isinstance(raw, str) or raw not in settings.AGENT_GRAPHS:
        raise UnknownGraph(f"no graph named {raw!r} is registered; GET /api/graphs lists them")
    return raw
