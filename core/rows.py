"""The turn's hot-path statements, written once per model and column list
instead of built by the ORM on every call: building a query cost more CPU
than PostgreSQL took to run it (docs/scale.md, "CPU").

Values still go through each field's own `get_db_prep_save` / `pre_save`
(JSON, UUIDs, `auto_now`) and rows come back through the backend's and the
field's converters, exactly as the ORM would do them; only the SQL text is
cached. Models, migrations, the admin and every other query stay the ORM's.
No signals are sent (none is connected to these models).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.functions import Now
from django.db.models.sql import Query

M = TypeVar("M", bound=Model)

# Rows per INSERT: well under SQLite's 32,766 bound variables for any model here.
INSERT_BATCH = 100

_compile_lock = threading.Lock()


def _quote(name: str | None) -> str:
    # Django types a field's column as optional: only a field without a
    # column (none of those reach these statements) has None.
    assert name is not None
    return connection.ops.quote_name(name)


def _field(model: type[Model], name: str) -> Field:
    """`name`'s field, a concrete one: the reverse side of a relation has no column."""
    field = model._meta.get_field(name)
    assert isinstance(field, Field), f"{model.__name__}.{name} is not a concrete field"
    return field


def _this_thread() -> BaseDatabaseWrapper:
    """This thread's connection itself, not Django's proxy to it: the proxy
    looks the thread's connection up (an asgiref Local) on every attribute
    read, and preparing a row's values read them dozens of times."""
    return connections[DEFAULT_DB_ALIAS]


def _prep(fields: Sequence[Field], instance: Model, *, add: bool) -> list[Any]:
    db = _this_thread()
    return [field.get_db_prep_save(field.pre_save(instance, add), db) for field in fields]


@cache
def _update_sql(vendor: str, model: type[Model], names: tuple[str, ...]) -> tuple[str, tuple[Field, ...]]:
    meta = model._meta
    fields = tuple(_field(model, n) for n in names)
    sets = ", ".join(f"{_quote(f.column)} = %s" for f in fields)
    return f"UPDATE {_quote(meta.db_table)} SET {sets} WHERE {_quote(meta.pk.column)} = %s", fields


Statement = tuple[str, list[Any]]


def update_statement(instance: Model, names: Sequence[str]) -> Statement:
    """`instance.save(update_fields=names)`, as a statement for `execute`."""
    model = type(instance)
    sql, fields = _update_sql(connection.vendor, model, tuple(names))
    params = _prep(fields, instance, add=False)
    params.append(model._meta.pk.get_db_prep_value(instance.pk, _this_thread()))
    return sql, params


def update_if_statement(
    instance: Model,
    names: Sequence[str],
    condition: str,
    params: Sequence[Any],
    *,
    expressions: dict[str, Statement] | None = None,
    returning_clock: bool = False,
) -> Statement:
    """`update_statement` for the row only where the SQL `condition` holds
    too, checked in the same statement (on PostgreSQL against the row as
    it is once locked). `expressions`: columns the database computes, as in
    `insert_if_statement`, set besides `names`. `returning_clock`: the
    statement returns the database's clock if it updated the row."""
    model = type(instance)
    meta = model._meta
    _, fields = _update_sql(connection.vendor, model, tuple(names))
    sets = [f"{_quote(f.column)} = %s" for f in fields]
    values = _prep(fields, instance, add=False)
    for name, (sql, sql_params) in (expressions or {}).items():
        sets.append(f"{_quote(_field(model, name).column)} = {sql}")
        values += sql_params
    sql = f"UPDATE {_quote(meta.db_table)} SET {', '.join(sets)} WHERE {_quote(meta.pk.column)} = %s AND ({condition})"
    if returning_clock:
        sql += f" RETURNING {_clock()[0]}"
    return sql, [*values, meta.pk.get_db_prep_value(instance.pk, _this_thread()), *params]


def update(instance: Model, names: Sequence[str]) -> int:
    """`instance.save(update_fields=names)`; returns the rows updated."""
    with connection.cursor() as cursor:
        cursor.execute(*update_statement(instance, names))
        return cursor.rowcount


@cache
def _insert_into(vendor: str, model: type[Model]) -> tuple[str, str, tuple[Field, ...]]:
    """`INSERT INTO table (columns)`, one row's placeholders, and the fields
    they stand for (all but a primary key the database generates)."""
    meta = model._meta
    # The ignore: django-stubs 5.2 lacks Field.db_returning (Django has it since 3.0).
    fields = tuple(f for f in meta.concrete_fields if not (f.primary_key and f.db_returning))  # type: ignore[attr-defined]
    columns = ", ".join(_quote(f.column) for f in fields)
    return f"INSERT INTO {_quote(meta.db_table)} ({columns})", ", ".join(["%s"] * len(fields)), fields


@cache
def _insert_sql(
    vendor: str, model: type[Model], rows: int, ignore_conflicts: bool, where: str | None = None
) -> tuple[str, tuple[Field, ...]]:
    head, placeholders, fields = _insert_into(vendor, model)
    values = f"VALUES {', '.join([f'({placeholders})'] * rows)}"
    sql = f"{head} {values}" if where is None else f'{head} SELECT * FROM ({values}) AS "rows" WHERE {where}'
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    return sql, fields


def insert_statements(
    objs: Iterable[Model], *, ignore_conflicts: bool = False, where: Statement | None = None
) -> list[Statement]:
    """`bulk_create` of one model's instances whose primary key is set (or
    generated by the database and not read back), as statements for
    `execute`; with `ignore_conflicts`, a row that breaks a unique
    constraint is skipped; with `where` (SQL and its parameters), the rows
    are inserted only where that condition holds, in the same statement."""
    objs = list(objs)
    if not objs:
        return []
    model = type(objs[0])
    statements = []
    for start in range(0, len(objs), INSERT_BATCH):
        batch = objs[start : start + INSERT_BATCH]
        sql, fields = _insert_sql(
            connection.vendor, model, len(batch), ignore_conflicts, where[0] if where is not None else None
        )
        params: list[Any] = []
        for obj in batch:
            params += _prep(fields, obj, add=True)
            obj._state.adding = False
        if where is not None:
            params += where[1]
        statements.append((sql, params))
    return statements


def insert(objs: Iterable[Model], *, ignore_conflicts: bool = False) -> int:
    """`insert_statements`, run; returns the rows inserted."""
    inserted = 0
    with connection.cursor() as cursor:
        for statement in insert_statements(objs, ignore_conflicts=ignore_conflicts):
            cursor.execute(*statement)
            inserted += cursor.rowcount
    return inserted


def insert_if_statement(
    obj: Model,
    condition: str,
    params: Sequence[Any],
    *,
    ignore_conflicts: bool = False,
    returning_clock: bool = False,
    expressions: dict[str, Statement] | None = None,
) -> Statement:
    """Insert `obj` only where the SQL `condition` holds, in the same
    statement (a check and its write with nothing between them).
    `expressions`: columns whose value the database computes, as SQL and
    its parameters (see `expression`), instead of the instance's value.
    `returning_clock`: the statement returns the database's clock for a
    row it inserted (see `inserted`)."""
    head, _, fields = _insert_into(connection.vendor, type(obj))
    expressions = expressions or {}
    values, row = [], []
    for field, value in zip(fields, _prep(fields, obj, add=True), strict=True):
        if field.attname in expressions:
            sql, sql_params = expressions[field.attname]
            values.append(sql)
            row += sql_params
        else:
            values.append("%s")
            row.append(value)
    # SQLite needs the WHERE to tell ON CONFLICT from a join's ON.
    sql = f"{head} SELECT {', '.join(values)} WHERE {condition}"
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    if returning_clock:
        sql += f" RETURNING {_clock()[0]}"
    return sql, [*row, *params]


def inserted(obj: Model, returned: Sequence[Any] | None) -> bool:
    """After `insert_if_statement(obj, …, returning_clock=True)` ran (see `first_row`): True
    if it inserted the row. An inserted row is read back from memory, not
    from the database: `obj` gets `db_now`, the database's clock, from the
    same statement, as `LockedRead` gives it — and the row is as good as
    locked, since no other transaction sees it before this one commits (a
    concurrent insert of the same key waits on the unique index)."""
    if returned is None:
        return False
    obj._state.adding, obj._state.db = False, connection.alias
    setattr(obj, "db_now", _clock()[1](returned[0]))  # noqa: B010  (an attribute of any model: not in its type)
    return True


def expression(value: Any) -> Statement:
    """A Django expression as SQL and parameters for this database (resolved
    first: date arithmetic, for one, compiles per backend only then)."""
    query = Query(None)
    sql, params = query.get_compiler(connection=connection).compile(value.resolve_expression(query))
    return sql, list(params)


def _converted(expression: Any) -> Callable[[Any], Any]:
    """A column's value as the compiler converts it: the backend's
    converters, then the expression's."""
    converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)

    def convert(value: Any) -> Any:
        for converter in converters:
            value = converter(value, expression, connection)
        return value

    return convert


@cache
def _clock_for(vendor: str) -> tuple[str, Callable[[Any], Any]]:
    now_sql, now_params = Query(None).get_compiler(connection=connection).compile(Now())
    assert not now_params
    return now_sql, _converted(Now())


def _clock() -> tuple[str, Callable[[Any], Any]]:
    """The database's clock as SQL, and how its value is converted."""
    return _clock_for(connection.vendor)


def clock() -> Statement:
    """The database's clock, as SQL for `expressions` and conditions."""
    return _clock()[0], []


def flushed_by_next_commit() -> list[Statement]:
    """Put first in a transaction whose loss in a *database* crash costs
    nothing a later transaction does not decide: on PostgreSQL it commits
    without waiting for its WAL to reach the disk (`synchronous_commit =
    off` for this transaction only). It is visible to everyone at once, as
    any commit is; it is durable once the WAL writer flushes it (within
    3 × wal_writer_delay) or once any later synchronous commit does, since
    WAL is flushed in order. The flush was a third of a claim's time
    (docs/turn-protocol.md, "Claim durability on PostgreSQL"). SQLite:
    nothing (its durability is per connection)."""
    if connection.vendor != "postgresql":
        return []
    return [("SET LOCAL synchronous_commit TO OFF", [])]


def _one_round_trip() -> bool:
    options = connection.settings_dict.get("OPTIONS") or {}
    return connection.vendor == "postgresql" and not options.get("server_side_binding")


def _one_query(cursor: Any, statements: list[Statement]) -> str:
    """PostgreSQL: the statements as one query text, each bound on its own.
    psycopg remembers how to bind a query of at most 50 parameters; a whole
    batch has more and would be parsed afresh every time (docs/scale.md,
    "Round trips")."""
    return "; ".join(cursor.cursor.mogrify(sql, params) for sql, params in statements)


def execute(statements: Iterable[Statement]) -> None:
    """Statements whose results nobody reads. On PostgreSQL they go in one
    round trip: Django binds parameters on the client (psycopg's
    ClientCursor), so several statements can share one query string — one
    wait for the network instead of one each. SQLite runs them one by one
    (in-process, no round trip to save)."""
    _run(list(statements), read_first=False)


def first_row(statements: Iterable[Statement]) -> tuple | None:
    """`execute`, returning the first row the *first* statement answered
    (None if it answered none)."""
    return _run(list(statements), read_first=True)


def _run(statements: list[Statement], *, read_first: bool) -> tuple | None:
    if not statements:
        return None
    with connection.cursor() as cursor:
        if len(statements) > 1 and _one_round_trip():
            # psycopg leaves the cursor on the first statement's result.
            cursor.execute(_one_query(cursor, statements))
            return cursor.fetchone() if read_first else None
        cursor.execute(*statements[0])
        row = cursor.fetchone() if read_first else None
        for statement in statements[1:]:
            cursor.execute(*statement)
        return row


def first_row_in_own_transaction(statements: Iterable[Statement]) -> tuple | None:
    """`first_row`, as a transaction of its own. On PostgreSQL, one query in
    autocommit mode, which the server runs as one implicit transaction (all
    or nothing): no BEGIN and no COMMIT round trip. Elsewhere (or inside a
    transaction already), in `transaction.atomic`."""
    statements = list(statements)
    if _one_round_trip() and connection.get_autocommit():
        return first_row(statements)
    with transaction.atomic():
        return first_row(statements)


class LockedRead(Generic[M]):
    """`SELECT <every column>, <the database's clock> FROM <table> WHERE
    <columns> = … [FOR UPDATE]` for one model and one set of equality (and
    IS NULL) conditions: the row as a model instance with `db_now` set, or
    None."""

    def __init__(self, model: type[M], equal: Sequence[str], null: Sequence[str] = ()) -> None:
        self.model, self.equal, self.null = model, tuple(equal), tuple(null)
        self._compiled: dict[str, tuple[str, list, list]] = {}

    def _compile(self) -> tuple[str, list, list]:
        meta = self.model._meta
        fields = list(meta.concrete_fields)
        now_sql, convert_now = _clock()
        where = [f"{_quote(_field(self.model, n).column)} = %s" for n in self.equal]
        where += [f"{_quote(_field(self.model, n).column)} IS NULL" for n in self.null]
        sql = (
            f"SELECT {', '.join(_quote(f.column) for f in fields)}, {now_sql} "
            f"FROM {_quote(meta.db_table)} WHERE {' AND '.join(where)}"
        )
        if connection.features.has_select_for_update:
            sql += " FOR UPDATE"
        converters = [_converted(f.get_col(meta.db_table)) for f in fields] + [convert_now]
        return sql, fields, converters

    def one(self, **values: Any) -> M | None:
        vendor = connection.vendor
        compiled = self._compiled.get(vendor)
        if compiled is None:
            with _compile_lock:
                compiled = self._compiled.setdefault(vendor, self._compile())
        sql, fields, converters = compiled
        params = [_field(self.model, n).get_db_prep_value(values[n], connection) for n in self.equal]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        converted = [convert(value) for value, convert in zip(row, converters, strict=True)]
        instance = self.model.from_db(connection.alias, [f.attname for f in fields], converted[:-1])
        setattr(instance, "db_now", converted[-1])  # noqa: B010  (an attribute of any model: not in its type)
        return instance
