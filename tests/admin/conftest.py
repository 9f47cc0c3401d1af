"""Helpers for the admin tests: sessions with real turns, made through the
chat API (the offline model), and a count of checkpoint rows straight from
the checkpointer's tables."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.urls import reverse

from sessions_app.models import AgentSession
from tests.fixtures.api import Api
from tests.fixtures.runners import run_in_new_loop
from tests.fixtures.turns import pause_booking
from turns_app.checkpoint_tables import checkpoint_tables

CONVERSATION = [
    "name: Ada Lovelace",
    "my email is ada@example.com",
    "preferred date: 2031-01-02",
    "party size: 3",
    "topic: booking",
]


def chat(api: Api, key: str, text: str, idem: str | None = None) -> dict:
    response = run_in_new_loop(lambda: api.chat(key, text, idem=idem))
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def session_with_turns(api: Api, key: str, turns: int = 3, owner: str = "alice") -> AgentSession:
    for number, text in enumerate(CONVERSATION[:turns], start=1):
        chat(api, key, text, idem=f"{key}-{number}")
    return AgentSession.objects.get(owner=owner, key=key)


def paused_session(api: Api, key: str, owner: str = "alice") -> AgentSession:
    """A booking session whose graph waits for approval: it has checkpoint rows."""
    run_in_new_loop(lambda: pause_booking(api, key))
    return AgentSession.objects.get(owner=owner, key=key)


def checkpoint_rows(session_id) -> int:
    """Rows of every checkpointer table whose thread_id starts with "<session id>:"."""
    prefix = f"{session_id}:"
    total = 0
    with connection.cursor() as cursor:
        for table in checkpoint_tables():
            cursor.execute(
                f"SELECT count(*) FROM {connection.ops.quote_name(table)} WHERE substr(thread_id, 1, %s) = %s",
                [len(prefix), prefix],
            )
            total += cursor.fetchone()[0]
    return total


def admin_url(name: str, *args) -> str:
    return reverse(f"admin:{name}", args=args)


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client
