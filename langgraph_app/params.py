"""The protocol's query parameters, as its endpoints read them."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.http import HttpRequest

from core.errors import ValidationFailed
from langgraph_app.schemas import PAGE_MAX

TRUE = frozenset({"1", "true", "yes", "on"})


def flag(request: HttpRequest, name: str) -> bool:
    return (request.GET.get(name) or "").strip().lower() in TRUE


def page(request: HttpRequest, default: int = 10) -> tuple[int, int]:
    try:
        limit = int(request.GET.get("limit") or default)
        offset = int(request.GET.get("offset") or 0)
    except ValueError:
        raise ValidationFailed("limit and offset must be whole numbers") from None
    if not (1 <= limit <= PAGE_MAX) or offset < 0:
        raise ValidationFailed(f"limit must be 1-{PAGE_MAX} and offset at least 0")
    return limit, offset


def select(item: dict[str, Any], fields: Collection[str] | None) -> dict[str, Any]:
    """Only the `fields` of `item` (all of them if none are named)."""
    return {k: v for k, v in item.items() if k in fields} if fields else item
