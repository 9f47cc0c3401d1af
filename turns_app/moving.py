"""Moving every session from this database to a PostgreSQL one
(`manage.py move_sessions --to postgres://…`): for the user who started on
the embedded SQLite file and outgrew it. PostgreSQL → PostgreSQL works too.

What moves: every row of every model of the apps that hold conversations
(`MOVED_APPS`: sessions and their tombstones, API keys, turns with their
history, turn events, bookings), with primary keys, versions, epochs and
timestamps as they are; and every LangGraph checkpoint thread, through the
savers' own API. A conversation continues from its turns rows (the history
is in the business tables, turns_app.history), so those need no checkpoint;
the threads that matter are those of paused runs (a pending `interrupt()`),
which a resume reads back from the checkpointer, and they are copied with
their pending writes. Django's own tables (admin accounts, their browser
sessions, content types, login throttling) are not moved: `NOT_MOVED` says
why, and a test fails when a model is in neither list.

How: the target is migrated first (it may be a fresh, empty database); one
that already holds any moved row is refused unless `replace=True`, which
empties those tables and the checkpointer's first. Rows are read in
primary-key order, `BATCH_SIZE` at a time, and written in one transaction
on the target, so a failed move leaves the target's tables as they were.
The source is read inside one transaction too: on SQLite that is an
IMMEDIATE one, so nothing can write the file while it is read, and the
server's file lock (agentsite.startup) is taken for the whole move, so a
server neither serves the file during it nor starts in the middle.
"""

from __future__ import annotations

import fcntl
import re
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psycopg
from django.apps import apps
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, models, transaction
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver

from core.database import (
    explain_connect_error,
    is_postgres,
    migration_problem,
    postgres_conninfo,
    sqlite_lock_path,
)
from turns_app.checkpoint_tables import SQLITE_TIMEOUT_SECONDS, checkpoint_tables, schema_problem

# The apps whose models hold what a user would lose: every model in them moves.
MOVED_APPS = ("sessions_app", "turns_app", "booking")
# Installed models that stay behind, and why (tests/turns_app/test_move_sessions.py
# fails when a model is in neither MOVED_APPS nor here).
NOT_MOVED = {
    "auth.user": "admin accounts: create them again with `manage.py createsuperuser`",
    "auth.group": "admin permissions refer to content-type ids, which differ between databases",
    "auth.permission": "created by `migrate` on the target",
    "contenttypes.contenttype": "created by `migrate` on the target",
    "admin.logentry": "the admin's change log refers to content-type ids",
    "sessions.session": "admin browser logins; people log in again",
    "axes.accessattempt": "admin login throttling, per deployment",
    "axes.accessattemptexpiration": "admin login throttling, per deployment",
    "axes.accesslog": "admin login throttling, per deployment",
    "axes.accessfailurelog": "admin login throttling, per deployment",
}

# Models of MOVED_APPS whose rows are not copied, and why: the target's
# database derives them from the moved rows (its triggers), or they belong
# to the source's running processes.
DERIVED = {
    "sessions_app.ownersessioncount": "each owner's live sessions, counted by the target's triggers as sessions move",
    "turns_app.turnfollower": "clients of the source's processes waiting on its turns, not the target's",
}

BATCH_SIZE = 500
THREAD_BATCH_SIZE = 200
# The target's connection alias while a move runs; never one settings define.
TARGET_ALIAS = "move_sessions_target"
POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}
URL_FORM = "postgres://USER:PASSWORD@HOST:5432/NAME"

# Identifies one database on one running server (a host name and an address
# may name the same one).
SQL_DATABASE_IDENTITY = (
    "SELECT current_database(), pg_postmaster_start_time()::text, "
    "coalesce(inet_server_port(), 0)"
)
SQL_REPEATABLE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
SQL_THREADS_AFTER = (
    "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > %s ORDER BY thread_id LIMIT %s"
)
# A checkpoint's pending writes with what the saver's list() leaves out
# (task_path, idx), which orders them when LangGraph reads them back.
SQL_WRITES = {
    "sqlite": (
        "SELECT task_id, task_path, idx, channel, type, value FROM writes "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s "
        "ORDER BY task_path, task_id, idx"
    ),
    "postgresql": (
        "SELECT task_id, task_path, idx, channel, type, blob FROM checkpoint_writes "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s "
        "ORDER BY task_path, task_id, idx"
    ),
}
SQL_DELETE_ALL = "DELETE FROM {table}"


class MoveRefused(Exception):
    """The move cannot (or must not) run; the message says why, in one line,
    and nothing was written to the target's tables."""


@dataclass
class MoveReport:
    rows: dict[str, int] = field(default_factory=dict)  # db_table -> rows copied
    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    seconds: float = 0.0


def moved_models() -> list[type[models.Model]]:
    """Every model of MOVED_APPS, parents before the models that point at them."""
    found = [
        m
        for label in MOVED_APPS
        for m in apps.get_app_config(label).get_models()
        if m._meta.label_lower not in DERIVED
    ]
    ordered: list[type[models.Model]] = []

    def visit(model: type[models.Model], path: tuple = ()) -> None:
        if model in ordered or model in path:
            return
        for f in model._meta.concrete_fields:
            if f.is_relation and f.related_model in found and f.related_model is not model:
                visit(f.related_model, (*path, model))
        ordered.append(model)

    for model in found:
        visit(model)
    return ordered


# --- the target ----------------------------------------------------------------------------


def target_settings(url: str) -> dict[str, Any]:
    """Django settings for the database `url` names; only PostgreSQL."""
    import dj_database_url

    scheme = urlsplit(url).scheme if "://" in url else ""
    if scheme not in POSTGRES_SCHEMES:
        raise MoveRefused(f"--to must be a PostgreSQL URL ({URL_FORM}), got {_masked(url)!r}")
    try:
        config = dj_database_url.parse(url, conn_max_age=0)
    except ValueError as exc:
        raise MoveRefused(f"--to {_masked(url)!r} is not a database URL ({exc}): use {URL_FORM}") from None
    if not config.get("NAME"):
        raise MoveRefused(f"--to {_masked(url)!r} names no database: use {URL_FORM}")
    config.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    return config


def _masked(url: str) -> str:
    return re.sub(r"(//[^:/@]*:)[^@]*@", r"\1***@", url)


@contextmanager
def _target_connection(config: dict[str, Any]) -> Iterator[str]:
    """`config` as a connection alias for as long as the block runs; closed
    and forgotten after. The alias is not one the settings define, so it can
    never stand in for `default`."""
    if TARGET_ALIAS in connections.settings or TARGET_ALIAS == DEFAULT_DB_ALIAS:
        raise RuntimeError(f"the connection alias {TARGET_ALIAS!r} is already in use")
    full = connections.configure_settings(
        {DEFAULT_DB_ALIAS: dict(connections.settings[DEFAULT_DB_ALIAS]), TARGET_ALIAS: config}
    )
    connections.settings[TARGET_ALIAS] = full[TARGET_ALIAS]
    try:
        yield TARGET_ALIAS
    finally:
        try:
            connections[TARGET_ALIAS].close()
        finally:
            if hasattr(connections._connections, TARGET_ALIAS):
                del connections[TARGET_ALIAS]
            del connections.settings[TARGET_ALIAS]


def _probe(config: dict[str, Any]) -> None:
    import psycopg

    try:
        psycopg.connect(postgres_conninfo(config)).close()
    except psycopg.Error as exc:
        raise MoveRefused(explain_connect_error(exc, config)) from None


def _identity(alias: str) -> tuple:
    with connections[alias].cursor() as cursor:
        cursor.execute(SQL_DATABASE_IDENTITY)
        return tuple(cursor.fetchone())


def _held_rows(alias: str) -> dict[str, int]:
    held = {}
    for model in moved_models():
        count = model._base_manager.using(alias).count()
        if count:
            held[model._meta.db_table] = count
    return held


def _empty_target(alias: str) -> None:
    """The business tables only: the checkpoint tables are emptied on the
    connection that then writes them (one transaction holding row locks the
    other waits for would hang the move)."""
    conn = connections[alias]
    with conn.cursor() as cursor:
        for model in reversed(moved_models()):
            cursor.execute(SQL_DELETE_ALL.format(table=conn.ops.quote_name(model._meta.db_table)))


# --- the source ------------------------------------------------------------------------------


@contextmanager
def _source_not_served() -> Iterator[None]:
    """Hold the server's lock on the SQLite file for the whole move: refused
    while a server serves it, and no server starts until the move is over."""
    settings_dict = connections[DEFAULT_DB_ALIAS].settings_dict
    if is_postgres(settings_dict):
        yield
        return
    path = sqlite_lock_path(settings_dict["NAME"])
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise MoveRefused(
                f"an agentsite server (pid {holder}) is serving {settings_dict['NAME']}: "
                "stop it first, so that no turn changes the sessions while they move"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # and the lock with it


def _source_saver() -> tuple[BaseCheckpointSaver, Callable[[], None]]:
    settings_dict = connections[DEFAULT_DB_ALIAS].settings_dict
    if is_postgres(settings_dict):
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        conn = psycopg.connect(
            postgres_conninfo(settings_dict), autocommit=True, row_factory=dict_row, prepare_threshold=None
        )
        return PostgresSaver(conn), conn.close
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.is_setup = True  # migrate made the tables; setup() would commit and rewrite pragmas
    return saver, conn.close


# --- copying ---------------------------------------------------------------------------------


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return False


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_without_nul(v) for v in value)
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    return value


def _check_nul(obj: models.Model, fields: list[models.Field], strip_nul: bool) -> None:
    """PostgreSQL stores no U+0000 in text or jsonb; SQLite does. The service
    refuses it in requests and strips it from model output, but rows written
    before that (or by hand) may hold it."""
    for f in fields:
        value = getattr(obj, f.attname)
        if not _has_nul(value):
            continue
        if not strip_nul:
            raise MoveRefused(
                f"{obj._meta.db_table} row {obj.pk} holds the NUL character (U+0000) in `{f.attname}`, "
                "which PostgreSQL cannot store: rerun with --strip-nul to drop it from every value"
            )
        setattr(obj, f.attname, _without_nul(value))


def _copy_model(
    model: type[models.Model], target: str, *, batch_size: int, strip_nul: bool
) -> int:
    """Copy every row of `model`, `batch_size` at a time in primary-key order.
    `_insert(raw=True)` is what loaddata's `save_base(raw=True)` ends in: it
    writes the values read, where bulk_create would stamp `auto_now` /
    `auto_now_add` fields with the time of the move."""
    fields = list(model._meta.local_concrete_fields)
    source_rows = model._base_manager.using(DEFAULT_DB_ALIAS).order_by("pk")
    target_rows = model._base_manager.using(target)
    ops = connections[target].ops
    copied = 0
    last = None
    while True:
        page = source_rows if last is None else source_rows.filter(pk__gt=last)
        batch = list(page[:batch_size])
        if not batch:
            return copied
        for obj in batch:
            _check_nul(obj, fields, strip_nul)
        step = max(ops.bulk_batch_size(fields, batch), 1)
        for start in range(0, len(batch), step):
            target_rows._insert(batch[start:start + step], fields=fields, using=target, raw=True)
        copied += len(batch)
        last = batch[-1].pk
        _forget_queries(target)


def _forget_queries(target: str) -> None:
    # Under DEBUG every statement (a whole batch's values) is kept in memory.
    connections[DEFAULT_DB_ALIAS].queries_log.clear()
    connections[target].queries_log.clear()


def _reset_sequences(target: str) -> None:
    conn = connections[target]
    with conn.cursor() as cursor:
        for sql in conn.ops.sequence_reset_sql(no_style(), moved_models()):
            cursor.execute(sql)


def _thread_ids(batch_size: int) -> Iterator[str]:
    last = ""
    while True:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute(SQL_THREADS_AFTER, [last, batch_size])
            page = [row[0] for row in cursor.fetchall()]
        yield from page
        if len(page) < batch_size:
            return
        last = page[-1]


def _pending_writes(saver: BaseCheckpointSaver, config: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """(task_id, task_path, channel, value) of a checkpoint, in the order
    LangGraph applies them."""
    conn = connections[DEFAULT_DB_ALIAS]
    c = config["configurable"]
    with conn.cursor() as cursor:
        cursor.execute(SQL_WRITES[conn.vendor], [c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"]])
        rows = cursor.fetchall()
    return [
        (task_id, task_path, channel, saver.serde.loads_typed((type_, bytes(value))))
        for task_id, task_path, _idx, channel, type_, value in rows
    ]


def _put_writes(target: BaseCheckpointSaver, config: dict[str, Any], writes: list[tuple[str, str, str, Any]]) -> None:
    """As the run stored them: a task's special writes (interrupt, resume,
    error) each take their fixed index; its other writes go in one call, so
    they get 0, 1, … in their order."""
    groups: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for task_id, task_path, channel, value in writes:
        if channel in WRITES_IDX_MAP:
            target.put_writes(config, [(channel, value)], task_id, task_path)
        else:
            groups.setdefault((task_id, task_path), []).append((channel, value))
    for (task_id, task_path), regular in groups.items():
        target.put_writes(config, regular, task_id, task_path)


def _copy_thread(
    thread_id: str, source: BaseCheckpointSaver, target: BaseCheckpointSaver, report: MoveReport, strip_nul: bool
) -> None:
    # One thread's checkpoints at a time (a paused run has a handful), put
    # oldest first: a checkpoint after its parent, its writes after it.
    tuples = list(source.list({"configurable": {"thread_id": thread_id}}))
    for item in sorted(tuples, key=lambda t: t.config["configurable"]["checkpoint_id"]):
        c = item.config["configurable"]
        checkpoint = item.checkpoint
        inline = {k: v for k, v in checkpoint["channel_values"].items() if isinstance(v, str)}
        if _has_nul(inline):
            if not strip_nul:
                raise MoveRefused(
                    f"checkpoint thread {thread_id} holds the NUL character (U+0000) in a channel value, "
                    "which PostgreSQL cannot store: rerun with --strip-nul to drop it from every value"
                )
            checkpoint = {**checkpoint, "channel_values": {**checkpoint["channel_values"], **_without_nul(inline)}}
        parent = item.parent_config["configurable"]["checkpoint_id"] if item.parent_config else None
        saved = target.put(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": c["checkpoint_ns"], "checkpoint_id": parent}},
            checkpoint,
            item.metadata,
            dict(checkpoint["channel_versions"]),
        )
        writes = _pending_writes(source, item.config)
        _put_writes(target, saved, writes)
        report.checkpoints += 1
        report.writes += len(writes)
    report.threads += 1


def _copy_checkpoints(
    target_alias: str, report: MoveReport, *, replace: bool, strip_nul: bool
) -> Callable[[], None]:
    """Copy every checkpoint thread into the target, on a connection of the
    saver's own (PostgresSaver wants binary server-side parameters, which
    Django's cursors refuse) in one transaction; returns its commit.
    `replace`: empty the target's checkpoint tables first, in that transaction."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    source, close_source = _source_saver()
    conn = psycopg.connect(
        postgres_conninfo(connections[target_alias].settings_dict),
        autocommit=False,
        row_factory=dict_row,
        prepare_threshold=None,
    )
    try:
        if replace:
            for table in checkpoint_tables(connections[target_alias].settings_dict):
                conn.execute(SQL_DELETE_ALL.format(table=table))
        target = PostgresSaver(conn)
        for thread_id in _thread_ids(THREAD_BATCH_SIZE):
            _copy_thread(thread_id, source, target, report, strip_nul)
            _forget_queries(target_alias)
    except BaseException:
        conn.close()
        raise
    finally:
        close_source()

    def commit() -> None:
        try:
            conn.commit()
        finally:
            conn.close()

    return commit


# --- the move -------------------------------------------------------------------------------


def move_sessions(
    *,
    to: str,
    replace: bool = False,
    strip_nul: bool = False,
    batch_size: int = BATCH_SIZE,
    say: Callable[[str], None] = lambda line: None,
) -> MoveReport:
    """Copy every session of the default database into the PostgreSQL
    database `to` names. Raises MoveRefused (nothing written to the target's
    tables) when it cannot or must not."""
    started = time.monotonic()
    config = target_settings(to)
    problem = migration_problem()
    if problem is not None:
        raise MoveRefused(f"the source database is not migrated ({problem})")
    source_settings = connections[DEFAULT_DB_ALIAS].settings_dict
    if not is_postgres(source_settings) and not os.path.exists(source_settings["NAME"]):
        raise MoveRefused(f"the source SQLite file {source_settings['NAME']} does not exist")
    _probe(config)
    report = MoveReport()
    with _source_not_served(), _target_connection(config) as target:
        if is_postgres(source_settings) and _identity(target) == _identity(DEFAULT_DB_ALIAS):
            raise MoveRefused("--to names the database this server already uses: give another database")
        say(f"migrating {_masked(to)}")
        call_command("migrate", database=target, interactive=False, verbosity=0)
        problem = migration_problem(target) or schema_problem(target)
        if problem is not None:
            raise MoveRefused(f"the target is not ready after migrate: {problem}")
        held = _held_rows(target)
        if held and not replace:
            what = ", ".join(f"{n} row(s) in {table}" for table, n in held.items())
            raise MoveRefused(
                f"the target already holds {what}: give an empty database, or pass --replace to delete them first"
            )
        try:
            with transaction.atomic(using=DEFAULT_DB_ALIAS), transaction.atomic(using=target):
                if is_postgres(source_settings):
                    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
                        cursor.execute(SQL_REPEATABLE_READ)  # one snapshot for every table
                if held:
                    say("emptying the target (--replace)")
                    _empty_target(target)
                for model in moved_models():
                    table = model._meta.db_table
                    report.rows[table] = _copy_model(model, target, batch_size=batch_size, strip_nul=strip_nul)
                    say(f"{table}: {report.rows[table]} row(s)")
                _reset_sequences(target)
                commit_checkpoints = _copy_checkpoints(target, report, replace=replace, strip_nul=strip_nul)
                say(f"checkpoints: {report.threads} thread(s), {report.checkpoints} checkpoint(s), {report.writes} write(s)")
                # Checkpoints first: if the business commit then failed, the
                # target would hold threads no session reads (the sweep drops
                # them, --replace too), never a paused session without its thread.
                commit_checkpoints()
        except (DatabaseError, psycopg.Error) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise MoveRefused(f"the target refused a row ({first}); nothing was moved") from exc
    report.seconds = time.monotonic() - started
    return report
