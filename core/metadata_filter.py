"""A LangGraph auth handler's filter (`Auth.types.FilterType`) as a database
condition on a JSON metadata column, so a search's limit, offset and count
are of the rows the caller may see (docs/configuration.md, "Custom auth").

The filter language is LangGraph's server's: `{key: value}` and
`{key: {"$eq": value}}` (the top-level key equal, as JSON), `{key:
{"$contains": v}}` (the key a list holding v, or every item of a list v),
`{"$or": [f, f, …]}` and `{"$and": [f, f, …]}` (two filters or more, nested
two deep at most), the keys of one dict all holding. A filter outside that
language is the handler's bug: a 500 naming it, as LangGraph's server
answers."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTransform

from core.errors import InternalError

MAX_NESTING = 2
# Every JSON key transform gets an alias of its own, unique even when a
# query is filtered twice.
_ALIASES = itertools.count()


def _refused(detail: str) -> InternalError:
    return InternalError(f"Your auth handler returned an invalid filter: {detail}")


class _Builder:
    def __init__(self, field: str, column: str) -> None:
        self.field = field
        self.column = column
        self.aliases: dict[str, Any] = {}

    def key(self, name: str) -> str:
        alias = f"_authf{next(_ALIASES)}"
        self.aliases[alias] = KeyTransform(name, self.field)
        return alias

    def build(self, where: Mapping[str, Any], depth: int = 0) -> Q:
        if depth > MAX_NESTING:
            raise _refused(f"operators nested more than {MAX_NESTING} deep")
        condition = Q()
        for name, value in where.items():
            if name in ("$or", "$and"):
                if not isinstance(value, list) or len(value) < 2 or not all(isinstance(g, Mapping) for g in value):
                    raise _refused(f"{name} takes a list of at least 2 filter objects")
                parts = [self.build(group, depth + 1) for group in value]
                joined = parts[0]
                for part in parts[1:]:
                    joined = (joined | part) if name == "$or" else (joined & part)
                condition &= joined
            elif not isinstance(name, str) or name.startswith("$"):
                raise _refused(f"unknown operator {name!r}")
            elif isinstance(value, Mapping):
                condition &= self.operator(name, value)
            else:
                condition &= self.equal(name, value)
        return condition

    def equal(self, name: str, value: Any) -> Q:
        # A key transform, not `contains`: SQLite has no JSON containment,
        # and `metadata__<name>` would split a name holding "__".
        return Q(**{self.key(name): value})

    def operator(self, name: str, spec: Mapping[str, Any]) -> Q:
        if len(spec) != 1:
            raise _refused(f"{name!r}: one operator a key")
        op, operand = next(iter(spec.items()))
        if op == "$eq":
            return self.equal(name, operand)
        if op == "$contains":
            items = operand if isinstance(operand, list) else [operand]
            condition = Q(**{f"{self.key(name)}__isnull": False})
            for item in items:
                condition &= self.holds(name, item)
            return condition
        raise _refused(f"{name!r}: unknown operator {op!r}")

    def holds(self, name: str, item: Any) -> Q:
        """The list under `name` holds `item` (a list elsewhere matches nothing)."""
        if connection.vendor == "postgresql":
            return Q(**{f"{self.key(name)}__contains": [item]})
        # SQLite has no JSON containment: one of the list's elements is
        # `item` (json_each gives a scalar as its SQL value, an object or a
        # list as minified JSON, as json_extract gives the item).
        path = "$." + json.dumps(name)
        sql = (
            f"(json_type({self.column}, %s) = 'array' AND EXISTS "
            f"(SELECT 1 FROM json_each({self.column}, %s) AS e WHERE e.value = json_extract(%s, '$')))"
        )
        alias = f"_authf{next(_ALIASES)}"
        self.aliases[alias] = RawSQL(sql, (path, path, json.dumps(item)), output_field=BooleanField())
        return Q(**{alias: True})


def apply(queryset: Any, where: Mapping[str, Any] | None, *, field: str = "metadata") -> Any:
    """`queryset` with only the rows whose `field` matches the filter."""
    if not where:
        return queryset
    model = queryset.model
    column = f'"{model._meta.db_table}"."{model._meta.get_field(field).column}"'
    builder = _Builder(field, column)
    condition = builder.build(where)
    return queryset.alias(**builder.aliases).filter(condition)


def stamp_of(where: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keys a filter pins to one value (`{k: v}`, `{k: {"$eq": v}}`): what
    a thread created under it carries, so its creator's reads match it."""
    stamp: dict[str, Any] = {}
    for name, value in (where or {}).items():
        if name.startswith("$"):
            continue
        if isinstance(value, Mapping):
            if set(value) == {"$eq"}:
                stamp[name] = value["$eq"]
        else:
            stamp[name] = value
    return stamp


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None, depth: int = 0) -> bool:
    """The same filter on metadata held in memory (a system assistant's,
    never stored), with the same refusals."""
    if not where:
        return True
    if depth > MAX_NESTING:
        raise _refused(f"operators nested more than {MAX_NESTING} deep")
    for name, value in where.items():
        if name in ("$or", "$and"):
            if not isinstance(value, list) or len(value) < 2 or not all(isinstance(g, Mapping) for g in value):
                raise _refused(f"{name} takes a list of at least 2 filter objects")
            found = [matches(metadata, group, depth + 1) for group in value]
            if not (any(found) if name == "$or" else all(found)):
                return False
        elif not isinstance(name, str) or name.startswith("$"):
            raise _refused(f"unknown operator {name!r}")
        elif isinstance(value, Mapping):
            if len(value) != 1:
                raise _refused(f"{name!r}: one operator a key")
            op, operand = next(iter(value.items()))
            if op == "$eq":
                if name not in metadata or metadata[name] != operand:
                    return False
            elif op == "$contains":
                held = metadata.get(name)
                items = operand if isinstance(operand, list) else [operand]
                if not isinstance(held, list) or any(item not in held for item in items):
                    return False
            else:
                raise _refused(f"{name!r}: unknown operator {op!r}")
        elif name not in metadata or metadata[name] != value:
            return False
    return True
