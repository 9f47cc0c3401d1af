"""Copying the checkpoint threads, through the savers' own API: every
thread's checkpoints oldest first, each with its pending writes (a paused
run's interrupt among them), into the target in one transaction of the
saver's own connection."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver

from core.database import postgres_conninfo
from turns_app.checkpoint_tables import checkpoint_tables
from turns_app.moving.copy_rows import forget_queries, has_nul, without_nul
from turns_app.moving.report import MoveRefused, MoveReport
from turns_app.moving.source import source_saver
from turns_app.moving.target import SQL_DELETE_ALL

THREAD_BATCH_SIZE = 200
SQL_THREADS_AFTER = "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > %s ORDER BY thread_id LIMIT %s"
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


def _pending_writes(saver: BaseCheckpointSaver, config: RunnableConfig) -> list[tuple[str, str, str, Any]]:
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


def _put_writes(target: BaseCheckpointSaver, config: RunnableConfig, writes: list[tuple[str, str, str, Any]]) -> None:
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
        if has_nul(inline):
            if not strip_nul:
                raise MoveRefused(
                    f"checkpoint thread {thread_id} holds the NUL character (U+0000) in a channel value, "
                    "which PostgreSQL cannot store: rerun with --strip-nul to drop it from every value"
                )
            checkpoint = {**checkpoint, "channel_values": {**checkpoint["channel_values"], **without_nul(inline)}}
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


def copy_checkpoints(target_alias: str, report: MoveReport, *, replace: bool, strip_nul: bool) -> Callable[[], None]:
    """Copy every checkpoint thread into the target, on a connection of the
    saver's own (PostgresSaver wants binary server-side parameters, which
    Django's cursors refuse) in one transaction; returns its commit.
    `replace`: empty the target's checkpoint tables first, in that transaction."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    source, close_source = source_saver()
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
            forget_queries(target_alias)
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
