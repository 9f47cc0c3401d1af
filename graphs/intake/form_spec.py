"""Form specs and typed field values.

Pure Python (no Django models, no DB) so the API, the services and the agent
graph all validate against exactly the same rules.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    model_validator,
)

FieldType = Literal["string", "integer", "number", "boolean", "date", "email", "enum"]

MAX_FIELDS = 50
MAX_STRING_LENGTH = 2000
MAX_DESCRIPTION_LENGTH = 500
MAX_ENUM_OPTIONS = 100
MAX_ENUM_OPTION_LENGTH = 200
# A whole form, as JSON: far above any real form (the default one is ~1 KB),
# and it bounds what every turn sends to the model and matches against.
MAX_FORM_BYTES = 65_536
# Integers beyond 2**53 lose precision in JavaScript clients reading the JSON.
MAX_SAFE_INTEGER = 2**53 - 1

_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
# Explicit [0-9]: `\d` would also accept other scripts' digits, which int() takes.
_INTEGER_RE = re.compile(r"^[+-]?[0-9]+$")
_NUMBER_RE = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
# Longer digit strings are out of range anyway; the cap keeps int() cheap.
_MAX_INTEGER_DIGITS = 20
_EMAIL_RE = re.compile(
    r"^(?P<local>[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"
    r"@(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63})$"
)
_TRUE_WORDS = frozenset({"yes", "true"})
_FALSE_WORDS = frozenset({"no", "false"})


class FormSpecError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class FieldValueError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class FieldsInvalid(ValueError):
    def __init__(self, errors: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors


class FieldSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME_PATTERN)
    type: FieldType
    required: StrictBool = False
    description: str = Field(default="", max_length=MAX_DESCRIPTION_LENGTH)
    enum: tuple[str, ...] | None = Field(default=None, max_length=MAX_ENUM_OPTIONS)

    @model_validator(mode="after")
    def _check_enum(self) -> FieldSpec:
        if self.type != "enum":
            if self.enum is not None:
                raise ValueError("'enum' is only allowed on fields of type enum")
            return self
        if not self.enum:
            raise ValueError("a field of type enum needs a non-empty 'enum' list")
        for option in self.enum:
            if not option.strip() or len(option) > MAX_ENUM_OPTION_LENGTH:
                raise ValueError(f"enum options must be 1 to {MAX_ENUM_OPTION_LENGTH} characters")
        # Values match options case-insensitively, so options must differ by more than case.
        if len({option.casefold() for option in self.enum}) != len(self.enum):
            raise ValueError("enum options must be unique")
        return self


def check_form_size(raw: Any) -> None:
    """For forms a client sends (stored forms were checked when they came in)."""
    try:
        size = len(json.dumps(raw, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        raise FormSpecError("a form must be JSON") from None
    if size > MAX_FORM_BYTES:
        raise FormSpecError(f"a form is at most {MAX_FORM_BYTES} bytes of JSON, this one is {size}")


def parse_form(raw: Any) -> list[FieldSpec]:
    if not isinstance(raw, list):
        raise FormSpecError("a form must be a list of field specs")
    if not raw:
        raise FormSpecError("a form needs at least one field")
    if len(raw) > MAX_FIELDS:
        raise FormSpecError(f"a form has at most {MAX_FIELDS} fields")
    form: list[FieldSpec] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise FormSpecError(f"field {index}: must be an object")
        try:
            form.append(FieldSpec.model_validate(item))
        except ValidationError as exc:
            raise FormSpecError(f"field {index}: {_describe_validation_error(exc)}") from None
    names = [spec.name for spec in form]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise FormSpecError(f"duplicate field names: {', '.join(duplicates)}")
    return form


def stored_form(raw: Any) -> list[FieldSpec]:
    """A session's stored form as specs. Stored forms were checked when they
    were set; an empty one belongs to a graph that fills no fields, so it
    holds no field (any value set against it is an unknown field)."""
    return parse_form(raw) if raw else []


def _describe_validation_error(exc: ValidationError) -> str:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def form_to_json(form: list[FieldSpec]) -> list[dict[str, Any]]:
    result = []
    for spec in form:
        item: dict[str, Any] = {
            "name": spec.name,
            "type": spec.type,
            "required": spec.required,
            "description": spec.description,
        }
        if spec.enum is not None:
            item["enum"] = list(spec.enum)
        result.append(item)
    return result


def coerce_value(spec: FieldSpec, value: Any) -> Any:
    """Return the typed JSON value for `value`, or None (unset) for None."""
    if value is None:
        return None
    try:
        return _COERCERS[spec.type](spec, value)
    except _Invalid as exc:
        raise FieldValueError(spec.name, str(exc)) from None


class _Invalid(Exception):
    pass


def _coerce_string(spec: FieldSpec, value: Any) -> str:
    # Models often emit phone numbers and the like as JSON numbers.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise _Invalid("must be text")
    text = value.strip()
    if not text:
        raise _Invalid("must not be empty")
    if len(text) > MAX_STRING_LENGTH:
        raise _Invalid(f"must be at most {MAX_STRING_LENGTH} characters")
    if "\x00" in text:  # a model's output may carry it; PostgreSQL cannot store it
        raise _Invalid("must not contain the NUL character")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # the same: lone surrogates
            raise _Invalid("must not contain lone surrogates (U+D800-U+DFFF)") from None
    return text


def _coerce_integer(spec: FieldSpec, value: Any) -> int:
    if isinstance(value, bool):
        raise _Invalid("must be a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise _Invalid("must be a whole number")
        value = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not _INTEGER_RE.match(text):
            raise _Invalid("must be a whole number")
        if len(text) > _MAX_INTEGER_DIGITS:
            raise _Invalid("is too large")
        value = int(text)
    elif not isinstance(value, int):
        raise _Invalid("must be a whole number")
    if abs(value) > MAX_SAFE_INTEGER:
        raise _Invalid("is too large")
    return value


def _coerce_number(spec: FieldSpec, value: Any) -> int | float:
    if isinstance(value, bool):
        raise _Invalid("must be a number")
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER_RE.match(text):
            raise _Invalid("must be a number")
        is_integer = _INTEGER_RE.match(text) and len(text) <= _MAX_INTEGER_DIGITS
        value = int(text) if is_integer else float(text)
    elif not isinstance(value, (int, float)):
        raise _Invalid("must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise _Invalid("must be a finite number")
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        raise _Invalid("is too large")
    return value


def _coerce_boolean(spec: FieldSpec, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise _Invalid("must be yes or no")


def _coerce_date(spec: FieldSpec, value: Any) -> str:
    if not isinstance(value, str) or not _DATE_RE.match(value.strip()):
        raise _Invalid("must be a date written YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise _Invalid("is not a real calendar date") from None


def _coerce_email(spec: FieldSpec, value: Any) -> str:
    match = _EMAIL_RE.match(value.strip()) if isinstance(value, str) else None
    if match is None or len(match.group(0)) > 254:
        raise _Invalid("must be an email address like name@example.com")
    return f"{match['local']}@{match['domain'].lower()}"


def _coerce_enum(spec: FieldSpec, value: Any) -> str:
    options = spec.enum or ()
    if isinstance(value, str):
        wanted = value.strip().casefold()
        for option in options:
            if option.casefold() == wanted:
                return option
    raise _Invalid(f"must be one of: {', '.join(options)}")


_COERCERS = {
    "string": _coerce_string,
    "integer": _coerce_integer,
    "number": _coerce_number,
    "boolean": _coerce_boolean,
    "date": _coerce_date,
    "email": _coerce_email,
    "enum": _coerce_enum,
}


def validate_fields(form: list[FieldSpec], values: dict[str, Any]) -> dict[str, Any]:
    """Coerce every value; raise FieldsInvalid listing every problem at once."""
    specs = {spec.name: spec for spec in form}
    coerced: dict[str, Any] = {}
    errors: list[dict[str, str]] = []
    for name, value in values.items():
        spec = specs.get(name)
        if spec is None:
            errors.append({"field": name, "message": "unknown field"})
            continue
        try:
            coerced[name] = coerce_value(spec, value)
        except FieldValueError as exc:
            errors.append({"field": name, "message": exc.message})
    if errors:
        raise FieldsInvalid(errors)
    return coerced


def missing_required(form: list[FieldSpec], fields: dict[str, Any]) -> list[str]:
    return [spec.name for spec in form if spec.required and fields.get(spec.name) is None]


DEFAULT_FORM: list[FieldSpec] = parse_form(
    [
        {"name": "name", "type": "string", "required": True, "description": "your full name"},
        {"name": "email", "type": "email", "required": True, "description": "your email address"},
        {"name": "phone", "type": "string", "description": "your phone number"},
        {
            "name": "preferred_date",
            "type": "date",
            "required": True,
            "description": "your preferred date (YYYY-MM-DD)",
        },
        {
            "name": "party_size",
            "type": "integer",
            "required": True,
            "description": "the number of people in your party",
        },
        {
            "name": "topic",
            "type": "enum",
            "required": True,
            "description": "the topic of your request (general, booking, support or billing)",
            "enum": ["general", "booking", "support", "billing"],
        },
        {"name": "notes", "type": "string", "description": "any notes for us"},
    ]
)
