import pytest

from graphs.intake.form_spec import (
    DEFAULT_FORM,
    MAX_STRING_LENGTH,
    FieldsInvalid,
    FieldSpec,
    FieldType,
    FieldValueError,
    FormSpecError,
    coerce_value,
    form_to_json,
    missing_required,
    parse_form,
    validate_fields,
)


def spec(type_: FieldType, **extra) -> FieldSpec:
    return FieldSpec(name="f", type=type_, **extra)


TOPIC = spec("enum", enum=["general", "Booking"])


@pytest.mark.parametrize(
    "field, raw, expected",
    [
        (spec("string"), "  Ada Lovelace ", "Ada Lovelace"),
        (spec("string"), 5551234, "5551234"),
        (spec("integer"), 4, 4),
        (spec("integer"), " -12 ", -12),
        (spec("integer"), "+7", 7),
        (spec("integer"), 3.0, 3),
        (spec("number"), 2.5, 2.5),
        (spec("number"), "4", 4),
        (spec("number"), "-1.5e3", -1500.0),
        (spec("number"), ".5", 0.5),
        (spec("boolean"), True, True),
        (spec("boolean"), "YES", True),
        (spec("boolean"), " false ", False),
        (spec("boolean"), "no", False),
        (spec("date"), "2024-02-29", "2024-02-29"),
        (spec("date"), " 2025-06-01 ", "2025-06-01"),
        (spec("email"), "Ada.Lovelace+x@Example.COM", "Ada.Lovelace+x@example.com"),
        (TOPIC, "general", "general"),
        (TOPIC, " BOOKING ", "Booking"),
    ],
)
def test_coerce_valid(field, raw, expected):
    value = coerce_value(field, raw)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    "field, raw",
    [
        (spec("string"), ""),
        (spec("string"), "   "),
        (spec("string"), "x" * (MAX_STRING_LENGTH + 1)),
        (spec("string"), True),
        (spec("string"), ["a"]),
        (spec("integer"), True),
        (spec("integer"), 2.5),
        (spec("integer"), "2.5"),
        (spec("integer"), "four"),
        (spec("integer"), "١٢"),  # non-ASCII digits
        (spec("integer"), "9" * 30),
        (spec("integer"), 2**60),
        (spec("number"), False),
        (spec("number"), float("nan")),
        (spec("number"), float("inf")),
        (spec("number"), "1e999"),
        (spec("number"), "nan"),
        (spec("number"), "1_000"),
        (spec("number"), "abc"),
        (spec("boolean"), "maybe"),
        (spec("boolean"), 1),
        (spec("date"), "2024-02-30"),
        (spec("date"), "32/13/2024"),
        (spec("date"), "2024-2-3"),
        (spec("date"), 20240101),
        (spec("email"), "not-an-email"),
        (spec("email"), "a@b"),
        (spec("email"), "a b@example.com"),
        (spec("email"), "a..b@example.com"),
        (spec("email"), 42),
        (TOPIC, "sales"),
        (TOPIC, 1),
    ],
)
def test_coerce_invalid(field, raw):
    with pytest.raises(FieldValueError) as caught:
        coerce_value(field, raw)
    assert caught.value.field == "f"
    assert caught.value.message


def test_enum_error_lists_the_options():
    with pytest.raises(FieldValueError, match="general, Booking"):
        coerce_value(TOPIC, "sales")


@pytest.mark.parametrize("type_", ["string", "integer", "number", "boolean", "date", "email"])
def test_none_unsets_any_field(type_):
    assert coerce_value(spec(type_, required=True), None) is None


@pytest.mark.parametrize(
    "raw, needle",
    [
        ("not a list", "must be a list"),
        ([], "at least one field"),
        ([{"name": "a", "type": "string"}] * 51, "at most 50"),
        (["a"], "must be an object"),
        ([{"name": "a", "type": "color"}], "type"),
        ([{"name": "Name", "type": "string"}], "name"),
        ([{"name": "1a", "type": "string"}], "name"),
        ([{"name": "a" * 65, "type": "string"}], "name"),
        ([{"type": "string"}], "name"),
        ([{"name": "a", "type": "string", "label": "A"}], "label"),
        ([{"name": "a", "type": "string", "required": "yes"}], "required"),
        ([{"name": "a", "type": "enum"}], "enum"),
        ([{"name": "a", "type": "enum", "enum": []}], "enum"),
        ([{"name": "a", "type": "enum", "enum": ["x", "X"]}], "unique"),
        ([{"name": "a", "type": "enum", "enum": ["x", ""]}], "enum"),
        ([{"name": "a", "type": "enum", "enum": ["x", 1]}], "enum"),
        ([{"name": "a", "type": "string", "enum": ["x"]}], "only allowed"),
        ([{"name": "a", "type": "string"}, {"name": "a", "type": "integer"}], "duplicate field names: a"),
    ],
)
def test_parse_form_errors(raw, needle):
    with pytest.raises(FormSpecError) as caught:
        parse_form(raw)
    assert needle in caught.value.message


def test_form_json_round_trip_fills_defaults():
    form = parse_form([{"type": "enum", "name": "topic", "enum": ["a", "b"]}, {"name": "n", "type": "integer"}])
    as_json = form_to_json(form)
    assert as_json == [
        {"name": "topic", "type": "enum", "required": False, "description": "", "enum": ["a", "b"]},
        {"name": "n", "type": "integer", "required": False, "description": ""},
    ]
    assert list(as_json[0]) == ["name", "type", "required", "description", "enum"]
    assert parse_form(as_json) == form


def test_default_form():
    as_json = form_to_json(DEFAULT_FORM)
    assert [f["name"] for f in as_json] == [
        "name",
        "email",
        "phone",
        "preferred_date",
        "party_size",
        "topic",
        "notes",
    ]
    assert all(f["description"] for f in as_json)
    assert missing_required(DEFAULT_FORM, {}) == ["name", "email", "preferred_date", "party_size", "topic"]


def test_validate_fields_collects_every_error():
    values = {"email": "nope", "party_size": "many", "colour": "red", "name": "Ada", "topic": "sales"}
    with pytest.raises(FieldsInvalid) as caught:
        validate_fields(DEFAULT_FORM, values)
    assert [e["field"] for e in caught.value.errors] == ["email", "party_size", "colour", "topic"]
    assert caught.value.errors[2]["message"] == "unknown field"


def test_validate_fields_returns_typed_values():
    values = {"party_size": "4", "topic": "Support", "phone": None, "preferred_date": "2025-06-01"}
    assert validate_fields(DEFAULT_FORM, values) == {
        "party_size": 4,
        "topic": "support",
        "phone": None,
        "preferred_date": "2025-06-01",
    }


def test_missing_required_keeps_form_order_and_treats_none_as_missing():
    fields = {"topic": "general", "name": None, "email": "a@example.com"}
    assert missing_required(DEFAULT_FORM, fields) == ["name", "preferred_date", "party_size"]
