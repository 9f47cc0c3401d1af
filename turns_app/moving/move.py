"""The move itself: refuse what must not run, migrate and check the
target, then copy the rows and the checkpoints in one transaction on each
side, the checkpoints committed first."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psycopg
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from core.database import is_postgres, migration_problem
from turns_app.checkpoint_tables import schema_problem
from turns_app.moving.copy_checkpoints import copy_checkpoints
from turns_app.moving.copy_rows import BATCH_SIZE, copy_model, reset_sequences
from turns_app.moving.moved_models import moved_models
from turns_app.moving.report import MoveRefused, MoveReport
from turns_app.moving.source import source_not_served
from turns_app.moving.target import empty_target, held_rows, identity, masked, probe, target_connection, target_settings

SQL_REPEATABLE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"


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
    probe(config)
    report = MoveReport()
    with source_not_served(), target_connection(config) as target:
        if is_postgres(source_settings) and identity(target) == identity(DEFAULT_DB_ALIAS):
            raise MoveRefused("--to names the database this server already uses: give another database")
        say(f"migrating {masked(to)}")
        call_command("migrate", database=target, interactive=False, verbosity=0)
        problem = migration_problem(target) or schema_problem(target)
        if problem is not None:
            raise MoveRefused(f"the target is not ready after migrate: {problem}")
        held = held_rows(target)
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
                    empty_target(target)
                for model in moved_models():
                    table = model._meta.db_table
                    report.rows[table] = copy_model(model, target, batch_size=batch_size, strip_nul=strip_nul)
                    say(f"{table}: {report.rows[table]} row(s)")
                reset_sequences(target)
                commit_checkpoints = copy_checkpoints(target, report, replace=replace, strip_nul=strip_nul)
                say(
                    f"checkpoints: {report.threads} thread(s), {report.checkpoints} checkpoint(s), "
                    f"{report.writes} write(s)"
                )
                # Checkpoints first: if the business commit then failed, the
                # target would hold threads no session reads (the sweep drops
                # them, --replace too), never a paused session without its thread.
                commit_checkpoints()
        except (DatabaseError, psycopg.Error) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise MoveRefused(f"the target refused a row ({first}); nothing was moved") from exc
    report.seconds = time.monotonic() - started
    return report
