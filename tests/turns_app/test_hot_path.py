"""What a turn costs the database (docs/scale.md, "The hot path"): the statements a claim sends,
what it waits for, and the reads a first turn does not need. The numbers
`make bench` prints rest on these; here they are pinned, on both databases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext
from psycopg.pq import TransactionStatus

from sessions_app.models import AgentSession
from tests.fixtures.turns import make_outcome
from turns_app import history, known_sessions
from turns_app.models import AgentTurn
from turns_app.services import turn_claim, turn_commit
from turns_app.types import Claim, Replay

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {"text": "hello"}


def sent(queries: CaptureQueriesContext) -> list[str]:
    """What went to the database (on PostgreSQL, one round trip each;
    SQLite runs a batch's statements one by one, in process)."""
    return [q["sql"] for q in queries.captured_queries if q["sql"].split()[0] not in ("BEGIN", "COMMIT")]


def claim(key: str) -> Claim:
    claimed = turn_claim(owner="alice", key=key, request=REQUEST, idempotency_key=None)
    assert isinstance(claimed, Claim)
    return claimed


@contextmanager
def idle_before_each() -> Iterator[list[bool]]:
    """PostgreSQL: for each statement sent, whether the connection was idle
    (outside a transaction) when it went: True means no BEGIN came first."""
    idle: list[bool] = []

    def watch(execute, sql, params, many, context):
        if connection.vendor == "postgresql":
            idle.append(connection.connection.info.transaction_status == TransactionStatus.IDLE)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        yield idle


@pytest.fixture(autouse=True)
def no_known_sessions():
    known_sessions.forget_all()
    yield
    known_sessions.forget_all()


def test_a_new_sessions_claim_is_one_round_trip_and_reads_nothing_back():
    with CaptureQueriesContext(connection) as queries, idle_before_each() as idle_before:
        claimed = claim("fresh")
    # The session holding its lease (the clock returned with it), the turn
    # and its first event, inserted as one transaction: on PostgreSQL one
    # query, with no BEGIN before it nor COMMIT after (the server runs a
    # multi-statement query as one transaction); nothing read back.
    sql = sent(queries)
    assert sql[0].startswith('INSERT INTO "agent_sessions"'), sql
    assert not any(s.startswith(("SELECT", "UPDATE")) for s in sql), sql
    if connection.vendor == "postgresql":
        assert len(sql) == 1 and idle_before == [True], (sql, idle_before)
        assert 'INSERT INTO "agent_turns"' in sql[0] and 'INSERT INTO "agent_turn_events"' in sql[0], sql
        assert [q["sql"] for q in queries.captured_queries] == sql  # no BEGIN, no COMMIT
    session = AgentSession.objects.get(owner="alice", key="fresh")
    turn = AgentTurn.objects.get(pk=claimed.turn_id)
    # What the claim took from memory is what the database holds.
    assert (claimed.session_id, claimed.epoch, claimed.base_version, claimed.form, claimed.stage) == (
        session.id,
        session.epoch,
        session.version,
        session.form,
        session.stage,
    )
    assert session.active_turn_id == turn.id and turn.status == AgentTurn.Status.PENDING
    assert session.lease_expires_at > session.created_at
    assert list(turn.events.values_list("seq", "event")) == [(1, "turn")]


def test_a_key_this_process_has_not_seen_that_exists_is_claimed_not_orphaned():
    """A chat on a key this process has not seen first tries to create the
    session with its turn; when the session exists (made by another
    process, or before a restart) that insert does nothing, and neither may
    the turn's rows, or they would belong to no session: the claim then
    locks the existing session as usual."""
    existing = AgentSession.objects.create(owner="alice", key="elsewhere")
    with CaptureQueriesContext(connection) as queries:
        claimed = claim("elsewhere")
    assert sent(queries)[0].startswith('INSERT INTO "agent_sessions"')
    assert claimed.session_id == existing.id and claimed.number == 1
    assert list(AgentTurn.objects.values_list("id", "session_id")) == [(claimed.turn_id, existing.id)]
    assert AgentSession.objects.get(pk=existing.id).active_turn_id == claimed.turn_id
    # Seen now: the next claim goes straight to the lock.
    turn_commit(turn_id=claimed.turn_id, outcome=make_outcome(claimed), pending=[], done_seq=2, claim=claimed)
    with CaptureQueriesContext(connection) as queries:
        assert claim("elsewhere").number == 2
    assert not any('INSERT INTO "agent_sessions"' in s for s in sent(queries))


def test_a_known_sessions_claim_locks_it_once():
    committed = claim("known")
    turn_commit(turn_id=committed.turn_id, outcome=make_outcome(committed), pending=[], done_seq=2, claim=committed)
    with CaptureQueriesContext(connection) as queries:
        claim("known")
    sql = sent(queries)
    # The lock, then the head's values and last number, then the writes.
    assert [s.split()[0] for s in sql[:2]] == ["SELECT", "SELECT"], sql
    assert not any(s.startswith("SELECT") for s in sql[2:]), sql
    if connection.vendor == "postgresql":
        assert "FOR UPDATE" in sql[0] and len(sql) == 3, sql


def test_a_turns_commit_is_one_round_trip_fenced_in_its_own_statement():
    claimed = claim("committing")
    with CaptureQueriesContext(connection) as queries, idle_before_each() as idle_before:
        body = turn_commit(
            turn_id=claimed.turn_id, outcome=make_outcome(claimed), pending=[], done_seq=2, claim=claimed
        )
    # The session's update carries the fence (epoch, version, the turn's
    # live lease); the turn and its events are written where it happened.
    sql = sent(queries)
    assert sql[0].startswith('UPDATE "agent_sessions"') and '"lease_expires_at" >' in sql[0], sql
    assert not any(s.startswith("SELECT") for s in sql), sql
    if connection.vendor == "postgresql":
        assert len(sql) == 1 and idle_before == [True], (sql, idle_before)
        assert [q["sql"] for q in queries.captured_queries] == sql  # no BEGIN, no COMMIT
    session = AgentSession.objects.get(pk=claimed.session_id)
    turn = AgentTurn.objects.get(pk=claimed.turn_id)
    assert (session.version, session.turn_count, session.head_turn_id, session.active_turn_id) == (1, 1, turn.id, None)
    assert turn.status == AgentTurn.Status.COMMITTED and turn.result == body and turn.finished_at is not None
    assert list(turn.events.values_list("seq", "event")) == [(1, "turn"), (2, "done")]


@pytest.mark.parametrize(
    "lost",
    [
        pytest.param({"version": 5}, id="the-session-moved-on"),
        pytest.param({"lease_expires_at": Now() - timedelta(seconds=1)}, id="the-lease-ran-out"),
        pytest.param({"active_turn_id": None, "lease_expires_at": None}, id="the-lease-was-taken-back"),
        pytest.param({"epoch": 2}, id="the-epoch-moved-on"),
    ],
)
def test_a_commit_whose_fence_fails_writes_nothing_and_aborts_the_turn(lost):
    """The one-statement fence refuses a turn that no longer holds the
    session, by the database's clock for the lease, and the turn is aborted
    as before: nothing of the refused commit is written."""
    from core.errors import StaleTurn

    claimed = claim("fenced")
    AgentSession.objects.filter(pk=claimed.session_id).update(**lost)
    with pytest.raises(StaleTurn):
        turn_commit(turn_id=claimed.turn_id, outcome=make_outcome(claimed), pending=[], done_seq=2, claim=claimed)
    turn = AgentTurn.objects.get(pk=claimed.turn_id)
    assert turn.status == AgentTurn.Status.ABORTED and not turn.messages
    assert [e for _, e in turn.events.values_list("seq", "event")] == ["turn", "error"]
    session = AgentSession.objects.get(pk=claimed.session_id)
    assert (session.turn_count, session.head_turn_id) == (0, None)


@pytest.mark.postgres_only
def test_only_the_claim_commits_without_waiting_for_the_disk():
    """PostgreSQL: a claim lost in a database crash loses a pending turn
    whose commit could not happen without it, so its commit does not wait
    for the WAL flush; the turn's commit does (and flushes the claim with
    it). The setting never outlives the claim's transaction."""
    # The suite's databases commit without the flush (tests.fixtures.databases):
    # this test is of what the code sets against the server's default.
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO on")
    seen: dict[str, str] = {}

    def spy(name):
        def wrapper(execute, sql, params, many, context):
            result = execute(sql, params, many, context)
            with connection.connection.cursor() as raw:
                seen[name] = raw.execute("SHOW synchronous_commit").fetchone()[0]
            return result

        return wrapper

    # A new session's first claim is one multi-statement query, which the
    # server runs as one implicit transaction: the setting is part of it.
    with CaptureQueriesContext(connection) as queries:
        first = claim("durable")
    assert "SET LOCAL synchronous_commit TO OFF" in sent(queries)[0]
    with connection.connection.cursor() as raw:
        raw.execute("SET LOCAL synchronous_commit TO OFF; SHOW synchronous_commit")
        raw.nextset()
        assert raw.fetchone()[0] == "off"
    turn_commit(turn_id=first.turn_id, outcome=make_outcome(first), pending=[], done_seq=2, claim=first)
    with connection.execute_wrapper(spy("claim")):
        claimed = claim("durable")
    with connection.execute_wrapper(spy("commit")):
        turn_commit(turn_id=claimed.turn_id, outcome=make_outcome(claimed), pending=[], done_seq=2, claim=claimed)
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        after = cursor.fetchone()[0]
    assert seen == {"claim": "off", "commit": "on"}
    assert after == "on"


async def test_a_first_turn_reads_no_history(monkeypatch):
    def no_read(*args, **kwargs):
        raise AssertionError("a first turn has no history to read")

    monkeypatch.setattr(history, "db", no_read)
    assert await history.conversation(uuid.uuid4(), None) == []


async def test_a_graph_without_fields_never_parses_the_sessions_form(api, settings, monkeypatch):
    """The session's form is for graphs with a `fields` channel; parsing it
    every turn for the others cost a tenth of a millisecond for nothing."""
    from graphs.intake import form_spec

    settings.AGENT_GRAPHS = {**settings.AGENT_GRAPHS, "echo": "tests.fixtures.graphs:build_echo_graph"}
    assert (await api.call("POST", "/sessions", {"key": "e1", "graph": "echo"})).status_code == 201
    parsed: list[object] = []
    real = form_spec.parse_form

    def parse_form(raw):
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(form_spec, "parse_form", parse_form)
    assert (await api.chat("e1", "hello")).status_code == 200
    assert parsed == []
    # The intake graph has fields: its turns do parse the form.
    assert (await api.chat("i1", "My name is Ada Lovelace")).status_code == 200
    assert parsed


def test_a_new_sessions_claim_with_an_idempotency_key_looks_for_no_earlier_turn():
    with CaptureQueriesContext(connection) as queries:
        claimed = turn_claim(owner="alice", key="keyed", request=REQUEST, idempotency_key="k-1")
    assert isinstance(claimed, Claim)
    sql = sent(queries)
    assert not any(s.startswith("SELECT") for s in sql[1:]), sql
    # The key still works: the same request again, once committed, replays.
    turn_commit(turn_id=claimed.turn_id, outcome=make_outcome(claimed), pending=[], done_seq=2, claim=claimed)
    again = turn_claim(owner="alice", key="keyed", request=REQUEST, idempotency_key="k-1")
    assert isinstance(again, Replay) and again.turn_id == claimed.turn_id


def test_a_commit_sizes_only_the_messages_its_turn_added(monkeypatch):
    """The conversation cache is bounded by the bytes it holds: a commit
    sizes the messages its turn added, not the whole conversation again
    (that grew every turn's cost with the conversation's length)."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

    sized: list[object] = []
    real = history._size

    def size(message):
        sized.append(message)
        return real(message)

    monkeypatch.setattr(history, "_size", size)
    cache = history.ConversationCache(max_bytes=10**7)
    session = uuid.uuid4()
    conversation: list[BaseMessage] = [HumanMessage(f"q{i}") if i % 2 == 0 else AIMessage(f"a{i}") for i in range(100)]
    cache.put(session, uuid.uuid4(), conversation)
    assert len(sized) == 100
    sized.clear()
    longer = [*cache.get(session, cache._entries[session].head_turn_id), HumanMessage("next"), AIMessage("reply")]
    cache.put(session, uuid.uuid4(), longer)
    assert sized == longer[100:]
    assert cache._bytes == sum(real(m) for m in longer)
    # A conversation that is not the cached one plus more (a rewind, an
    # edit) is sized in full.
    sized.clear()
    rewritten = [HumanMessage("other"), *longer[1:50]]
    cache.put(session, uuid.uuid4(), rewritten)
    assert len(sized) == 50 and cache._bytes == sum(real(m) for m in rewritten)


@pytest.mark.postgres_only
def test_a_batch_is_bound_statement_by_statement(monkeypatch):
    """PostgreSQL: a batch of statements goes as one query text, each bound
    on its own, so psycopg's cache of how to bind a query (at most 50
    parameters) serves it; the whole batch, with more, was parsed afresh on
    every turn. Values are literals in that text: a `%` in one stays data."""
    from psycopg import _queries

    parsed_afresh: list[bytes] = []
    real = _queries._query2pg_client_nocache

    def query2pg_client_nocache(query, *args):
        parsed_afresh.append(query)
        return real(query, *args)

    monkeypatch.setattr(_queries, "_query2pg_client_nocache", query2pg_client_nocache)
    text = "100% sure: %s %(name)s 50%"
    claimed = turn_claim(owner="alice", key="percent", request={"text": text}, idempotency_key=None)
    assert isinstance(claimed, Claim)
    turn_commit(turn_id=claimed.turn_id, outcome=make_outcome(claimed), pending=[], done_seq=2, claim=claimed)
    assert parsed_afresh == []
    assert AgentTurn.objects.get(pk=claimed.turn_id).request == {"text": text}


def test_no_index_of_the_turn_tables_copies_the_leading_columns_of_another():
    """Every index costs every insert of its table: a plain index whose
    columns lead another index serves no lookup the other does not."""
    for table in ("agent_sessions", "agent_turns", "agent_turn_events"):
        with connection.cursor() as cursor:
            constraints = connection.introspection.get_constraints(cursor, table)
        indexed = {name: c["columns"] for name, c in constraints.items() if c["index"] or c["unique"]}
        for name, columns in indexed.items():
            if constraints[name]["unique"] or constraints[name]["primary_key"]:
                continue
            longer = [
                other for other, more in indexed.items() if len(more) > len(columns) and more[: len(columns)] == columns
            ]
            assert not longer, (table, name, columns, longer)


def test_the_stored_form_of_a_conversation_is_dumped_once_per_message(monkeypatch):
    """A run's answer shows the conversation in its stored form: the cache
    dumps each message the first time it is asked for, so the next turn's
    answer dumps only what that turn added, and it equals what is stored."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

    dumped: list[object] = []
    real = history.dump_messages

    def dump(messages):
        messages = list(messages)
        dumped.extend(messages)
        return real(messages)

    monkeypatch.setattr(history, "dump_messages", dump)
    cache = history.ConversationCache(max_bytes=10**7)
    session, head = uuid.uuid4(), uuid.uuid4()
    conversation: list[BaseMessage] = [HumanMessage(f"q{i}") if i % 2 == 0 else AIMessage(f"a{i}") for i in range(40)]
    cache.put(session, head, conversation)
    assert cache.stored(session, head) == real(conversation) and len(dumped) == 40
    assert cache.stored(uuid.uuid4(), head) is None and cache.stored(session, uuid.uuid4()) is None
    dumped.clear()
    longer, next_head = [*conversation, HumanMessage("next"), AIMessage("reply")], uuid.uuid4()
    cache.put(session, next_head, longer)
    assert cache.stored(session, next_head) == real(longer)
    assert dumped == longer[40:]
    assert cache._bytes == sum(2 * history._size(m) for m in longer)  # objects and their stored form
