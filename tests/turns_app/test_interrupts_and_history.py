"""Human in the loop and time travel (docs/graphs.md, "Interrupts";
docs/api.md, "History, rewind and fork"): durable interrupts and their
resume, history, rewind and fork — through the JSON API, the SSE stream and
the admin."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from graphs.booking.models import Booking
from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from tests.fixtures.turns import pause_booking
from tests.turns_app.test_sse_consumer import names, post, stream_events
from turns_app.checkpoint_tables import checkpoint_tables
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def app():
    from agentsite.routing import build_application

    return build_application()


def body(response) -> Any:
    return json.loads(response.content)


def session(key: str) -> AgentSession:
    return AgentSession.objects.get(key=key)


def checkpoint_rows() -> int:
    total = 0
    with connection.cursor() as cursor:
        for table in checkpoint_tables():
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            total += cursor.fetchone()[0]
    return total


async def resume(api, key: str, answer):
    return await api.call("POST", f"/sessions/{key}/turns", {"resume": answer})


# --- interrupts --------------------------------------------------------------------------------


async def test_an_interrupt_is_a_committed_pause_shown_everywhere(api, script):
    paused = await pause_booking(api, "b1")
    assert paused["status"] == "interrupted" and paused["version"] == 1
    (interrupt,) = paused["interrupts"]
    # LangChain's human-in-the-loop request, as agent-chat-ui reads it.
    (request,) = interrupt["value"]["action_requests"]
    assert request["name"] == "book_table" and request["args"] == {
        "name": "Ada Lovelace",
        "date": "2031-05-01",
        "time": "19:30",
        "party_size": 2,
    }
    assert "Ada Lovelace" in request["description"]
    assert interrupt["value"]["review_configs"] == [
        {"action_name": "book_table", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    info = body(await api.call("GET", "/sessions/b1"))
    assert info["version"] == 1 and info["interrupts"] == [interrupt]
    log = body(await api.call("GET", "/sessions/b1/turns"))
    assert [(t["status"], t["interrupts"]) for t in log] == [("interrupted", [interrupt])]
    # Waiting for a human: a message is refused, and says what is asked.
    refused = await api.chat("b1", "hello?")
    assert refused.status_code == 409
    assert body(refused)["error"]["code"] == "interrupt_pending"
    assert body(refused)["error"]["details"]["interrupts"] == [interrupt]


GRACE = {"name": "Grace Hopper", "date": "2031-05-01", "time": "19:30", "party_size": 5}


@pytest.mark.parametrize(
    "answer, booked",
    [
        ({"decisions": [{"type": "approve"}]}, ("Ada Lovelace", 2)),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "book_table", "args": GRACE}}]},
            ("Grace Hopper", 5),
        ),
        # agent-chat-ui's edit form sends every argument back as a string.
        (
            {
                "decisions": [
                    {"type": "edit", "edited_action": {"name": "book_table", "args": {**GRACE, "party_size": "5"}}}
                ]
            },
            ("Grace Hopper", 5),
        ),
        ({"decisions": [{"type": "reject", "message": "changed my mind"}]}, None),
        # One decision alone, for the one action asked about.
        ({"type": "approve"}, ("Ada Lovelace", 2)),
        # agentsite's older answers, translated to the decisions above.
        ({"action": "approve"}, ("Ada Lovelace", 2)),
        ({"action": "edit", "args": {"party_size": 5, "name": "Grace Hopper"}}, ("Grace Hopper", 5)),
        ({"action": "reject", "reason": "changed my mind"}, None),
    ],
)
async def test_resume_approve_edit_reject(api, script, answer, booked):
    await pause_booking(api, "b1")
    done = body(await resume(api, "b1", answer))
    assert done["status"] == "committed" and done["version"] == 2 and done["interrupts"] == []
    rows = await orm(lambda: list(Booking.objects.all()))
    if booked is None:
        assert rows == [] and "not booked" in done["reply"] and "changed my mind" in done["reply"]
    else:
        (row,) = rows
        assert (row.name, row.party_size) == booked
        assert row.reference in done["reply"]
    assert body(await api.call("GET", "/sessions/b1"))["interrupts"] is None
    # Answered: a second resume is refused, and the conversation goes on.
    late = await resume(api, "b1", {"action": "approve"})
    assert late.status_code == 409 and body(late)["error"]["code"] == "interrupt_resolved"
    assert (await api.chat("b1", "thanks")).status_code == 200
    assert len(await orm(lambda: list(Booking.objects.all()))) == (0 if booked is None else 1)


@pytest.mark.parametrize(
    "answer",
    [{"decisions": [{"type": "reject"}]}, {"decisions": [{"type": "reject", "message": " "}]}, {"action": "reject"}],
)
async def test_a_reject_needs_no_reason(api, script, answer):
    await pause_booking(api, "b1")
    done = body(await resume(api, "b1", answer))
    assert done["status"] == "committed" and "not booked" in done["reply"]
    assert "was not approve, edit or reject" not in done["reply"]
    assert await orm(lambda: list(Booking.objects.all())) == []


@pytest.mark.parametrize(
    "answer, why",
    [
        ("yes", "was not approve, edit or reject"),
        ({"action": "maybe"}, "was not approve, edit or reject"),
        ({"decisions": [{"type": "respond", "message": "booked by phone"}]}, "was not approve, edit or reject"),
        ({"decisions": [{"type": "approve"}, {"type": "approve"}]}, "2 decisions for 1 actions"),
        ({"decisions": [{"type": "edit", "edited_action": {"name": "book_table"}}]}, "needs edited_action"),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "check_availability", "args": {}}}]},
            "not the action",
        ),
    ],
)
async def test_an_answer_that_cannot_be_read_books_nothing(api, script, answer, why):
    """Never a booking on an unclear answer, and never a failed turn either:
    the graph reads it as a reject, and says why."""
    await pause_booking(api, "b1")
    done = body(await resume(api, "b1", answer))
    assert done["status"] == "committed" and "not booked" in done["reply"] and why in done["reply"], done
    assert await orm(lambda: list(Booking.objects.all())) == []


async def test_an_edit_the_booking_cannot_take_is_reported(api, script):
    await pause_booking(api, "b1")
    edit = {"type": "edit", "edited_action": {"name": "book_table", "args": {**GRACE, "party_size": 40}}}
    done = body(await resume(api, "b1", {"decisions": [edit]}))
    assert done["status"] == "committed" and "not booked" in done["reply"], done
    assert await orm(lambda: list(Booking.objects.all())) == []


async def test_resume_without_a_pending_interrupt_is_refused(api, script):
    await api.chat("s1", "hello")
    refused = await resume(api, "s1", {"action": "approve"})
    assert refused.status_code == 409 and body(refused)["error"]["code"] == "interrupt_resolved"
    bad = await api.call("POST", "/sessions/s1/turns", {"text": "x", "resume": 1})
    assert bad.status_code == 422 and "not both" in body(bad)["error"]["message"]


async def test_interrupt_and_resume_over_sse(app, api, alice, script):
    assert (await api.call("POST", "/sessions", {"key": "b1", "graph": "booking"})).status_code == 201
    paused = await stream_events(
        post(app, alice, "b1", "Book for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace")
    )
    assert names(paused)[-2:] == ["interrupt", "done"]
    assert paused[-1].json["interrupts"] == [paused[-2].json]
    from tests.turns_app.test_sse_consumer import Stream

    stream = Stream(app, "POST", "/api/sessions/b1/turns/stream", key=alice, body={"resume": {"action": "approve"}})
    events = await stream_events(stream)
    assert names(events)[:2] == ["turn", "tool_result"] and names(events)[-1] == "done"
    assert json.loads(events[1].json["content"])["booked"] is True
    assert "".join(e.json["text"] for e in events if e.event == "delta") == events[-1].json["reply"]


async def test_delete_with_a_pending_interrupt_purges_it(api, script):
    await pause_booking(api, "b1")
    assert await orm(checkpoint_rows) > 0
    assert (await api.call("DELETE", "/sessions/b1")).status_code == 204
    assert await orm(checkpoint_rows) == 0
    tomb = await orm(session, key="b1")
    assert tomb.deleted_at is not None and tomb.interrupt is None
    late = await resume(api, "b1", {"action": "approve"})
    assert late.status_code == 409 and body(late)["error"]["code"] == "interrupt_resolved"
    assert await orm(lambda: list(Booking.objects.all())) == []


async def test_the_admin_shows_the_pending_interrupt(api, script, admin_client):
    from django.urls import reverse

    await pause_booking(api, "b1")
    row = await orm(session, key="b1")
    page = (
        await orm(lambda: admin_client.get(reverse("admin:sessions_app_agentsession_change", args=[row.pk])))
    ).content.decode()
    assert "Pending interrupt" in page and "book_table" in page and "Ada Lovelace" in page
    listing = (await orm(lambda: admin_client.get(reverse("admin:turns_app_agentturn_changelist")))).content.decode()
    assert "interrupted" in listing


# --- history, rewind, fork ----------------------------------------------------------------------


async def three_turns(api) -> list[dict]:
    return [body(await api.chat("s1", text)) for text in ("hello", "Ada Lovelace", "ada@example.com")]


async def test_history_lists_committed_states_newest_first(api, script):
    done = await three_turns(api)
    script.fail["reply"] = RuntimeError("boom")
    assert (await api.chat("s1", "lost")).status_code == 502
    del script.fail["reply"]
    page = body(await api.call("GET", "/sessions/s1/history?limit=2"))
    assert page["count"] == 3 and [i["turn_id"] for i in page["items"]] == [done[2]["turn_id"], done[1]["turn_id"]]
    assert page["items"][0]["fields"] == {"name": "Ada Lovelace", "email": "ada@example.com"}
    assert [i["message_count"] for i in page["items"]] == [6, 4] and all(i["on_head"] for i in page["items"])
    state = body(await api.call("GET", f"/sessions/s1/history/{done[1]['turn_id']}"))
    assert state["fields"] == {"name": "Ada Lovelace"} and state["version"] == 2
    assert [m["content"] for m in state["messages"]] == ["hello", done[0]["reply"], "Ada Lovelace", done[1]["reply"]]
    # From the turn rows, whatever the checkpointer holds: it holds nothing.
    assert await orm(checkpoint_rows) == 0


async def test_rewind_then_chat_starts_from_the_rewound_state(api, script):
    done = await three_turns(api)
    stale = await api.call("POST", "/sessions/s1/rewind", {"turn_id": done[0]["turn_id"], "expected_version": 2})
    assert stale.status_code == 412 and body(stale)["error"]["code"] == "version_conflict"
    rewound = await api.call("POST", "/sessions/s1/rewind", {"turn_id": done[0]["turn_id"], "expected_version": 3})
    assert rewound.status_code == 200, rewound.content
    info = body(rewound)
    assert (info["version"], info["fields"], info["head_turn_id"]) == (4, {}, done[0]["turn_id"])
    again = body(await api.chat("s1", "Grace Hopper"))
    assert again["version"] == 5 and again["fields"] == {"name": "Grace Hopper"}
    # The model saw only the rewound conversation.
    seen = " ".join(str(m.content) for m in script.last("reply")["messages"])
    assert "hello" in seen and "Ada Lovelace" not in seen and "ada@example.com" not in seen
    messages = body(await api.call("GET", "/sessions/s1/messages"))
    assert [m["content"] for m in messages][0::2] == ["hello", "Grace Hopper"]
    log = {t["id"]: t for t in body(await api.call("GET", "/sessions/s1/turns"))}
    assert [log[d["turn_id"]]["superseded"] for d in done] == [False, True, True]
    history = body(await api.call("GET", "/sessions/s1/history"))["items"]
    assert [(i["number"], i["superseded"], i["on_head"]) for i in history] == [
        (4, False, True),
        (3, True, False),
        (2, True, False),
        (1, False, True),
    ]


async def test_rewind_to_the_start_and_while_a_turn_runs(api, script, settings):
    import asyncio
    import threading

    done = await three_turns(api)
    settings.AGENT_SESSION_WAIT_SECONDS = 0
    script.gate = threading.Event()
    script.reply_started.clear()
    running = asyncio.ensure_future(api.chat("s1", "2031-05-01"))
    await asyncio.to_thread(script.reply_started.wait, 5)
    busy = await api.call("POST", "/sessions/s1/rewind", {"turn_id": None, "expected_version": 3})
    assert busy.status_code == 409 and body(busy)["error"]["code"] == "session_busy"
    script.gate.set()
    assert (await running).status_code == 200
    start = await api.call("POST", "/sessions/s1/rewind", {"turn_id": None, "expected_version": 4})
    assert start.status_code == 200 and body(start)["head_turn_id"] is None and body(start)["fields"] == {}
    assert body(await api.call("GET", "/sessions/s1/messages")) == []
    assert done


async def test_fork_starts_a_new_session_from_a_committed_turn(api, script, api_bob):
    done = await three_turns(api)
    forked = await api.call("POST", "/sessions/s1/fork", {"turn_id": done[1]["turn_id"], "new_key": "s1-b"})
    assert forked.status_code == 201, forked.content
    info = body(forked)
    assert (info["key"], info["fields"], info["version"], info["graph"]) == (
        "s1-b",
        {"name": "Ada Lovelace"},
        2,
        "intake",
    )
    fork_messages = body(await api.call("GET", "/sessions/s1-b/messages"))
    assert [m["content"] for m in fork_messages][0::2] == ["hello", "Ada Lovelace"]
    # Independent from here on, both ways.
    body(await api.chat("s1-b", "grace@example.com"))
    assert body(await api.call("GET", "/sessions/s1"))["fields"]["email"] == "ada@example.com"
    assert body(await api.call("GET", "/sessions/s1-b"))["fields"]["email"] == "grace@example.com"
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    assert len(body(await api.call("GET", "/sessions/s1-b/messages"))) == 6
    taken = await api.call("POST", "/sessions/s1-b/fork", {"turn_id": None, "new_key": "s1-b"})
    assert taken.status_code == 409 and body(taken)["error"]["code"] == "session_exists"
    # Owner-scoped like everything else.
    other = await api_bob.call("POST", "/sessions/s1-b/fork", {"turn_id": None, "new_key": "mine"})
    assert other.status_code == 404


async def test_a_fork_that_fails_mid_copy_leaves_no_session(api, script, monkeypatch):
    done = await three_turns(api)
    create, copies = AgentTurn.objects.create, []

    def fail_on_the_second_copy(**fields):
        copies.append(fields["number"])
        if len(copies) == 2:
            raise RuntimeError("disk full")
        return create(**fields)

    monkeypatch.setattr(AgentTurn.objects, "create", fail_on_the_second_copy)
    failed = await api.call("POST", "/sessions/s1/fork", {"turn_id": done[2]["turn_id"], "new_key": "s1-c"})
    assert failed.status_code == 500 and body(failed)["error"]["code"] == "internal_error"
    assert copies == [1, 2]
    monkeypatch.undo()
    assert not await orm(lambda: AgentSession.objects.filter(key="s1-c").exists())
    assert await orm(lambda: AgentTurn.objects.count()) == 3
    # And the key is free: the same fork succeeds now.
    assert (await api.call("POST", "/sessions/s1/fork", {"turn_id": None, "new_key": "s1-c"})).status_code == 201


async def test_history_is_scoped_to_the_owner_and_the_epoch(api, api_bob, script):
    done = await three_turns(api)
    assert (await api_bob.call("GET", "/sessions/s1/history")).status_code == 404
    assert (await api_bob.call("GET", f"/sessions/s1/history/{done[0]['turn_id']}")).status_code == 404
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    await api.chat("s1", "hello")
    assert body(await api.call("GET", "/sessions/s1/history"))["count"] == 1
    gone = await api.call("GET", f"/sessions/s1/history/{done[0]['turn_id']}")
    assert gone.status_code == 404 and body(gone)["error"]["code"] == "turn_not_found"
