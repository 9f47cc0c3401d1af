"""What a turn costs the database (issue 12): the statements a claim sends,
what it waits for, and the reads a first turn does not need. The numbers
`make bench` prints rest on these; here they are pinned, on both databases."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import AgentSession
from tests.conftest import make_outcome
from turns_app import history
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


def test_a_new_sessions_claim_does_not_read_back_the_row_it_inserted():
    with CaptureQueriesContext(connection) as queries:
        claimed = claim("fresh")
    # Look for the session, insert it (the clock returned with it), write
    # the turn, its first event and the lease: nothing read in between.
    sql = sent(queries)
    assert sql[0].startswith("SELECT") and sql[1].startswith('INSERT INTO "agent_sessions"'), sql
    assert not any(s.startswith("SELECT") for s in sql[1:]), sql
    if connection.vendor == "postgresql":
        assert len(sql) == 3, sql
    session = AgentSession.objects.get(owner="alice", key="fresh")
    turn = AgentTurn.objects.get(pk=claimed.turn_id)
    # What the claim took from memory is what the database holds.
    assert (claimed.session_id, claimed.epoch, claimed.base_version, claimed.form, claimed.stage) == (
        session.id, session.epoch, session.version, session.form, session.stage,
    )
    assert session.active_turn_id == turn.id and turn.status == AgentTurn.Status.PENDING
    assert session.lease_expires_at > session.created_at


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


@pytest.mark.postgres_only
def test_only_the_claim_commits_without_waiting_for_the_disk():
    """PostgreSQL: a claim lost in a database crash loses a pending turn
    whose commit could not happen without it, so its commit does not wait
    for the WAL flush; the turn's commit does (and flushes the claim with
    it). The setting never outlives the claim's transaction."""
    seen: dict[str, str] = {}

    def spy(name):
        def wrapper(execute, sql, params, many, context):
            result = execute(sql, params, many, context)
            with connection.connection.cursor() as raw:
                seen[name] = raw.execute("SHOW synchronous_commit").fetchone()[0]
            return result

        return wrapper

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
    from agentsite.agent import form_spec

    settings.AGENT_GRAPHS = {**settings.AGENT_GRAPHS, "echo": "tests.graphs:build_echo_graph"}
    assert (await api.call("POST", "/sessions", {"key": "e1", "graph": "echo"})).status_code == 201
    parsed: list[object] = []
    real = form_spec.parse_form
    monkeypatch.setattr(form_spec, "parse_form", lambda raw: parsed.append(raw) or real(raw))
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
