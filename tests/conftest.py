"""Fixtures shared by the whole suite. The suite runs on whichever database
DATABASE_URL names (SQLite file by default, PostgreSQL in CI's second run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import AsyncClient

from graphs.runtime.savers import close_savers
from turns_app.wakeups import stop_listening
from turns_app.checkpoint_tables import checkpoint_tables
from core.asyncdb import db
from tests import fakes
from tests.browser import NoChromium, chromium_path
from tests.fakes import Script


def pytest_report_header(config):
    from django.conf import settings

    return f"database: {settings.DATABASES['default']['ENGINE']}"


def pytest_collection_modifyitems(config, items):
    """Backend-specific tests are deselected (not skipped) on the other
    backend: CI runs the whole suite on both, so every one of them runs."""
    from django.conf import settings

    from core.database import is_postgres

    other = "sqlite_only" if is_postgres(settings.DATABASES["default"]) else "postgres_only"
    kept = [item for item in items if other not in item.keywords]
    dropped = [item for item in items if other in item.keywords]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    if any("browser" in item.keywords for item in items):
        try:
            chromium_path()  # once, before any test: found, installed, or one clear line
        except NoChromium as missing:
            pytest.exit(str(missing), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(autouse=True)
def _clean_checkpoints(request):
    """Django's flush knows only its models; the checkpointer's rows would
    leak from one transactional test into the next."""
    yield
    if "transactional_db" not in request.fixturenames and "live_server" not in request.fixturenames:
        return
    django_db_blocker = request.getfixturevalue("django_db_blocker")
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            for table in checkpoint_tables():
                cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")


@pytest.fixture(autouse=True)
def _forget_cached_keys():
    """Each test's keys are its own: a row flushed by a previous test must
    not stay valid through the process's key cache."""
    from sessions_app import key_cache

    key_cache.clear()
    yield
    key_cache.clear()


@pytest.fixture(autouse=True)
async def _close_loop_savers():
    yield
    await close_savers()
    await stop_listening()


@pytest.fixture
def script(settings) -> Script:
    """Switch AGENT_MODEL to a scripted model for this test."""
    state = fakes.CURRENT_SCRIPT = Script()
    settings.AGENT_MODEL = "tests.fakes:scripted_model"
    yield state
    fakes.CURRENT_SCRIPT = None


@pytest.fixture
def make_key(transactional_db) -> Callable[[str], str]:
    from sessions_app.services import api_key_create

    def make(owner: str = "alice") -> str:
        return api_key_create(owner=owner)[1]

    return make


@pytest.fixture
def alice(make_key) -> str:
    return make_key("alice")


@pytest.fixture
def bob(make_key) -> str:
    return make_key("bob")


class Api:
    """Django's AsyncClient through the full ASGI handler, with a bearer key."""

    def __init__(self, key: str | None) -> None:
        self.client = AsyncClient()
        self.key = key

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        out = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        out.update(headers or {})
        return out

    async def call(self, method: str, path: str, body: Any = None, headers=None, raw: str | None = None):
        fn = getattr(self.client, method.lower())
        kwargs: dict[str, Any] = {"headers": self._headers(headers)}
        if raw is not None:
            kwargs.update(data=raw, content_type="application/json")
        elif body is not None:
            kwargs.update(data=body, content_type="application/json")
        return await fn(f"/api{path}", **kwargs)

    async def chat(self, key: str, text: str, idem: str | None = None, **extra):
        headers = {"Idempotency-Key": idem} if idem is not None else None
        return await self.call("POST", f"/sessions/{key}/turns", {"text": text, **extra}, headers)


@pytest.fixture
def api(alice) -> Api:
    return Api(alice)


@pytest.fixture
def api_bob(bob) -> Api:
    return Api(bob)


def run_in_new_loop(coro_fn: Callable[[], Any]) -> Any:
    """Run a coroutine on a fresh event loop (one per thread), closing that
    loop's checkpointer before the loop goes away."""

    async def main():
        try:
            return await coro_fn()
        finally:
            await close_savers()
            await stop_listening()

    return asyncio.run(main())


async def orm(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """Run ORM code from an async test, on a worker thread that closes its connection."""
    return await db(fn, **kwargs)


async def claim_turn(key: str, text: str, idem: str | None = None, owner: str = "alice"):
    """Step 1 of the protocol on its own (the tests that stop a turn between
    steps): a default chat request, as the API would canonicalise it."""
    from turns_app.services import turn_claim

    request = {"text": text, "client_mode": "chat", "need_form_update": True}
    return await orm(turn_claim, owner=owner, key=key, request=request, idempotency_key=idem)


def transcript_of(session) -> list[dict[str, Any]]:
    """The session's committed conversation, as GET …/messages shows it."""
    from turns_app.history import transcript

    return transcript(session.head_turn_id)


def make_outcome(claim, **changes: Any):
    """An Outcome a run of `claim` could propose: one assistant message."""
    from langchain_core.messages import AIMessage, HumanMessage

    from turns_app.history import dump_messages
    from turns_app.types import Outcome

    added = [HumanMessage(content=claim.request.get("text", ""), id=f"{claim.turn_id}:user"), AIMessage(content="r")]
    values = dict(
        reply="r",
        new_messages=dump_messages(added),
        replaces_history=False,
        message_count=len(added),
        field_changes={},
        fields=dict(claim.fields),
        stage=claim.stage,
        values={},
        interrupts=[],
        thread_id=claim.thread_id,
    )
    values.update(changes)
    return Outcome(**values)


async def pause_booking(api: Api, key: str) -> dict[str, Any]:
    """A booking session whose graph waits for approval (checkpoint rows in
    the database); returns the interrupted turn's answer."""
    import json

    created = await api.call("POST", "/sessions", {"key": key, "graph": "booking"})
    assert created.status_code == 201, created.content
    response = await api.chat(key, "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace")
    assert response.status_code == 200, response.content
    body = json.loads(response.content)
    assert body["status"] == "interrupted", body
    return body
