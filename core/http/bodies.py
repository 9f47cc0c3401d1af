"""JSON request bodies: parsed with bounds, checked for text no database can
store, validated into ninja schemas, with one error shape for all of it."""

from __future__ import annotations

import functools
import json
import math
from typing import Any, TypeVar

from django.conf import settings
from ninja import Schema
from pydantic import ValidationError

from core.errors import MalformedRequest, PayloadTooLarge, ValidationFailed

S = TypeVar("S", bound=Schema)

# Deeper than any real request; keeps every walk over a body cheap and far
# from Python's recursion limit.
MAX_JSON_DEPTH = 64


def parse_json(body: bytes) -> Any:
    """The body as JSON, or the error the client gets: 413 over
    DATA_UPLOAD_MAX_MEMORY_SIZE, 400 for anything that is not JSON (or nests
    deeper than MAX_JSON_DEPTH), 422 for text or numbers PostgreSQL cannot
    store (NUL, lone surrogates, NaN, ±Infinity, 1e400)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if limit is not None and len(body) > limit:
        raise PayloadTooLarge()
    try:
        data = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except NonFinite as exc:
        raise ValidationFailed(str(exc)) from None
    except RecursionError:
        raise MalformedRequest(f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:
        raise MalformedRequest() from None
    check_json(data)
    return data


class NonFinite(Exception):
    """Not a ValueError: json.loads would report it as malformed JSON."""


def _refuse_constant(name: str) -> Any:
    # Python's json accepts NaN and ±Infinity, which are not JSON and which
    # PostgreSQL's jsonb refuses (SQLite stores them).
    raise NonFinite(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFinite(f"the number {text[:40]} is out of range")
    return value


def check_json(data: Any, where: str = "body") -> None:
    """PostgreSQL cannot store U+0000 or lone surrogates in text or jsonb
    (SQLite can): refuse them at the door, the same way on both, instead of
    failing at the write. Also bounds the nesting."""
    stack: list[tuple[Any, str, int]] = [(data, where, 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise MalformedRequest(f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(value, str):
            check_text(value, path)
        elif isinstance(value, dict):
            for key, item in value.items():
                check_text(key, path)
                stack.append((item, f"{path}.{key}", depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))


def check_text(value: str, where: str) -> None:
    if "\x00" in value:
        raise ValidationFailed(f"{where}: the NUL character (U+0000) is not allowed")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationFailed(f"{where}: lone surrogates (U+D800–U+DFFF) are not allowed") from None


def validation_failed(errors: list[dict[str, Any]]) -> ValidationFailed:
    """pydantic's (or ninja's) error list as our 422: the first problem in
    the message, every problem in `details`."""
    details = [{"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "invalid")} for e in errors]
    first = details[0] if details else {"loc": [], "message": "invalid request"}
    where = ".".join(p for p in first["loc"] if p not in {"body", "payload"}) or "request"
    return ValidationFailed(f"{where}: {first['message']}", details=details)


class _Body(Schema):
    """A body wrapped as ninja wraps a body parameter: in `payload`."""

    payload: Any


@functools.cache
def _wrapper(schema: type[S]) -> type[_Body]:
    # ninja validates a body parameter as a field of a wrapper model; doing
    # the same gives the same messages (e.g. for a body that is not an object).
    return type(f"{schema.__name__}Body", (_Body,), {"__annotations__": {"payload": schema}})


def validate_body(schema: type[S], body: bytes) -> S:
    """A request body as ninja would parse and validate it into `schema`,
    for endpoints ninja does not serve (the SSE consumers)."""
    wrapper = _wrapper(schema)
    try:
        return wrapper.model_validate({"payload": parse_json(body)} if body else {}).payload
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise validation_failed(errors) from None
