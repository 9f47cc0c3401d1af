"""Each owner's live sessions, counted by the database (OwnerSessionCount,
migration sessions_app 0005): every way a session comes, goes or changes
hands keeps the count equal to what a COUNT(*) would say, and the quota
reads that count instead of counting the owner's sessions."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from core.errors import TooManySessions
from sessions_app.models import AgentSession, OwnerSessionCount
from sessions_app.services import session_create, session_delete, tombstones_remove
from turns_app.services import turn_claim

pytestmark = pytest.mark.django_db(transaction=True)


def counted() -> dict[str, int]:
    return dict(OwnerSessionCount.objects.exclude(live=0).values_list("owner", "live"))


def live() -> dict[str, int]:
    rows = AgentSession.objects.filter(deleted_at__isnull=True).values("owner").annotate(n=Count("id"))
    return {row["owner"]: row["n"] for row in rows}


def chat(owner: str, key: str) -> None:
    turn_claim(owner=owner, key=key, request={"text": "hi"}, idempotency_key=None)


def test_the_count_follows_every_way_a_session_comes_and_goes():
    steps = [
        ("created", lambda: session_create(owner="alice", key="k1")),
        ("created by a first turn", lambda: chat("alice", "k2")),
        ("another owner's", lambda: session_create(owner="bob", key="k1")),
        (
            "deleted (tombstone)",
            lambda: session_delete(session_id=AgentSession.objects.get(owner="alice", key="k1").id),
        ),
        ("revived by a turn", lambda: chat("alice", "k1")),
        ("deleted again", lambda: session_delete(session_id=AgentSession.objects.get(owner="alice", key="k1").id)),
        ("tombstone removed", lambda: tombstones_remove(days=0, limit=10)),
        ("live row deleted outright", lambda: AgentSession.objects.filter(owner="bob").delete()),
        ("moved to another owner", lambda: AgentSession.objects.filter(key="k2").update(owner="carol")),
    ]
    for name, step in steps:
        step()
        assert counted() == live(), name
    assert counted() == {"carol": 1}


def test_a_rolled_back_create_is_not_counted():
    session_create(owner="alice", key="kept")
    with pytest.raises(RuntimeError), transaction.atomic():  # noqa: PT012  (the raise is what rolls the create back)
        AgentSession.objects.create(owner="alice", key="gone")
        raise RuntimeError("rolled back")
    assert counted() == live() == {"alice": 1}


def test_the_quota_reads_the_owners_count_not_their_sessions(settings):
    settings.AGENT_MAX_SESSIONS_PER_OWNER = 2
    for key in ("a", "b"):
        chat("alice", key)
    with CaptureQueriesContext(connection) as queries, pytest.raises(TooManySessions):
        chat("alice", "c")
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    assert '"agent_owner_sessions"' in sql and "COUNT(" not in sql.upper(), sql
    assert live() == {"alice": 2}
