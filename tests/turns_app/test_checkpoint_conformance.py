"""Our SQL on LangGraph's tables (turns_app.checkpoint_tables) against the real
saver, on whichever database the suite runs: the purge removes exactly the
rows the saver's own `adelete_thread` removes, in every table that has a
`thread_id` column, and the schema check follows the installed library."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from core.database import is_postgres
from graphs.runtime.savers import get_saver
from tests.fixtures.runners import orm
from turns_app.checkpoint_tables import (
    POSTGRES_MIGRATIONS_TABLE,
    checkpoint_tables,
    delete_threads,
    postgres_schema_target,
    schema_problem,
)

pytestmark = pytest.mark.django_db(transaction=True)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    note: NotRequired[dict]  # written by the reply node, not in the input


async def write_threads(count: int) -> list[str]:
    """Threads written by a real graph on the real saver, two runs each with
    the default durability: several checkpoints, pending writes, and (on
    PostgreSQL) blobs."""

    async def reply(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content="ok " * 20)], "note": {"n": len(state["messages"])}}

    # The schemas' defaults, spelled out: mypy does not infer the input type from State alone.
    builder = StateGraph(State, input_schema=State, output_schema=State)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    graph = builder.compile(checkpointer=await get_saver())
    threads = [f"conformance:{uuid.uuid4()}" for _ in range(count)]
    for thread in threads:
        for text in ("hello", "again"):
            config: RunnableConfig = {"configurable": {"thread_id": thread}}
            await graph.ainvoke({"messages": [HumanMessage(content=text)]}, config)
    return threads


def tables_with_thread_id() -> set[str]:
    with connection.cursor() as cursor:
        return {
            table
            for table in connection.introspection.table_names(cursor)
            if any(c.name == "thread_id" for c in connection.introspection.get_table_description(cursor, table))
        }


def dump() -> dict[str, list[tuple]]:
    """Every row of every saver table, in a stable order, comparable; each
    row starts with its thread_id."""
    out = {}
    with connection.cursor() as cursor:
        for table in sorted(tables_with_thread_id()):
            name = connection.ops.quote_name(table)
            cursor.execute(f"SELECT thread_id, {name}.* FROM {name}")
            rows = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in cursor.fetchall()]
            out[table] = sorted(rows, key=repr)
    return out


def threads_in(rows: dict[str, list[tuple]], table: str) -> set[str]:
    return {row[0] for row in rows[table]}


class _Rollback(Exception):
    pass


def purged_by_us(thread_ids: list[str]) -> dict[str, list[tuple]]:
    """The tables as our purge leaves them, seen inside its transaction, which
    is then rolled back."""
    seen: dict[str, list[tuple]] = {}
    try:
        with transaction.atomic():
            delete_threads(thread_ids)
            seen.update(dump())
            raise _Rollback
    except _Rollback:
        pass
    return seen


async def test_our_purge_removes_what_adelete_thread_removes():
    threads = await write_threads(4)
    # Every table of the saver's schema with a thread_id is one we purge: a
    # LangGraph upgrade that adds one fails here.
    assert await orm(tables_with_thread_id) == set(checkpoint_tables())
    before = await orm(dump)
    # Each thread has rows in every table (checkpoints, writes, blobs).
    for table in checkpoint_tables():
        assert threads_in(before, table) >= set(threads), table

    ours = await orm(purged_by_us, thread_ids=threads[:2])
    assert await orm(dump) == before  # rolled back: nothing happened for real
    saver = await get_saver()
    for thread in threads[:2]:
        await saver.adelete_thread(thread)
    theirs = await orm(dump)

    assert ours == theirs
    for table in checkpoint_tables():
        assert not threads_in(ours, table) & set(threads[:2]), table
        kept = [row for row in before[table] if row in ours[table]]
        assert kept and threads_in(ours, table) >= set(threads[2:]), table


async def test_schema_check_follows_the_installed_library():
    assert await orm(schema_problem) is None
    if not is_postgres():
        return
    # An upgrade of langgraph-checkpoint-postgres whose last migration was
    # never applied: the check refuses, and `migrate` applies it.
    target = postgres_schema_target()

    def roll_back_last_migration() -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {POSTGRES_MIGRATIONS_TABLE} WHERE v = %s", [target])
            cursor.execute("ALTER TABLE checkpoint_writes DROP COLUMN task_path")

    await orm(roll_back_last_migration)
    problem = await orm(schema_problem)
    assert problem is not None and "run `python manage.py migrate`" in problem
    assert f"needs {target}" in problem
    await orm(call_command, command_name="migrate", verbosity=0)
    assert await orm(schema_problem) is None

    def task_path_restored() -> bool:
        with connection.cursor() as cursor:
            columns = connection.introspection.get_table_description(cursor, "checkpoint_writes")
        return any(c.name == "task_path" for c in columns)

    assert await orm(task_path_restored)
