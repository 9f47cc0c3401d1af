"""Human in the loop and time travel on the chat page, in headless Chromium
(tests/browser.py finds it) against a real daphne process: the booking
graph's pause (LangChain's human-in-the-loop request) shows as a card with
Approve / Edit / Reject, the answer (LangChain's decisions) streams like a
message and books exactly once (or not at all), a reload brings a pending
card back, and Regenerate replaces the last reply through rewind + resend,
refusing a session someone else changed. Keeps artifacts/<database>/chat-hitl-*.png
and artifacts/<database>/chat-regenerate.png.

Playwright's sync API refuses to run inside an event loop, so these tests
are sync, and the database is read after the browser block."""

from __future__ import annotations

import re

import httpx
import pytest

from graphs.booking.models import Booking
from sessions_app.models import AgentSession
from sessions_app.services import api_key_create
from tests.browser import artifacts_dir, launch_chromium, send_chat_message
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = artifacts_dir()
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
# The offline model plays the booking agent from these (tests/system/test_booking.py).
BOOK_APPROVED = "Book a table for 3 people on 2031-06-01 at 20:00, my name is Ada Lovelace"
BOOK_REJECTED = "Book a table for 2 people on 2031-06-02 at 19:30, my name is Grace Hopper"
BOOK_PENDING = "Book a table for 4 people on 2031-06-03 at 18:00, my name is Alan Turing"
BOOK_EDITED = "Book a table for 2 people on 2031-06-04 at 19:00, my name is Ada Lovelace"
REPLY_1 = "Hello! I need a few details from you. What is your full name?"
REPLY_2 = "Thanks! What is your email address?"


class Watch:
    """What a page did: script errors and the turn requests it sent."""

    def __init__(self, page) -> None:
        self.problems: list[str] = []
        self.streams: list = []
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("console", self._console)
        page.on("request", self._request)

    def _console(self, msg) -> None:
        if msg.type == "error":
            self.problems.append(f"console: {msg.text}")

    def _request(self, request) -> None:
        if request.url.endswith("/turns/stream"):
            self.streams.append(request)

    def script_errors(self) -> list[str]:
        # "Failed to load resource" lines are the expected 4xx answers (412, 409).
        return [p for p in self.problems if "Failed to load resource" not in p]


def open_page(browser, server, key: str, session: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(30_000)
    watch = Watch(page)
    page.goto(f"{server.url}/")
    page.fill("#api-key", key)
    page.fill("#session-key", session)
    page.press("#session-key", "Tab")  # `change`: the key loads the graph list, the session key loads
    return page, watch


def test_approve_reject_and_reload_a_pending_interrupt(servers):
    from playwright.sync_api import expect, sync_playwright

    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="40")
    key = api_key_create(owner="alice")[1]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shots = {
        name: ARTIFACTS / f"chat-hitl-{name}.png" for name in ("pending", "editing", "answered", "refused", "reloaded")
    }
    for shot in shots.values():
        shot.unlink(missing_ok=True)

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page, watch = open_page(browser, server, key, "hitl-approve")
            expect(page.locator("#transcript .empty")).to_have_text("New session: your first message creates it.")
            page.select_option("#graph", "booking")  # waits for /api/graphs to fill the list
            send_chat_message(page, BOOK_APPROVED)

            # The pause: a card with the proposed booking, the composer locked.
            card = page.locator("#transcript .msg.interrupt")
            expect(card).to_have_count(1)
            expect(card.locator(".who")).to_have_text("approval needed · book_table")
            for name, value in (
                ("name", "Ada Lovelace"),
                ("date", "2031-06-01"),
                ("time", "20:00"),
                ("party_size", "3"),
            ):
                expect(card.locator(f'dd[data-arg="{name}"]')).to_have_text(value)
            expect(page.locator("#message")).to_be_disabled()
            expect(page.locator("#send")).to_be_disabled()
            expect(page.locator("#message")).to_have_attribute("placeholder", re.compile("waits for your answer"))
            expect(page.locator("#session-graph")).to_have_text("booking")
            expect(page.locator("#graph")).to_be_disabled()
            expect(page.locator("#fields td")).to_have_text("this graph fills no fields")
            expect(page.locator("#transcript .msg.tool").first).to_contain_text("check_availability")
            # A pause has no reply: no empty assistant bubble, and nothing to regenerate.
            expect(page.locator("#transcript .msg.assistant")).to_have_count(0)
            expect(page.locator("button.regenerate")).to_have_count(0)
            page.screenshot(path=str(shots["pending"]), full_page=True)

            # Approve; a second click (the button is disabled in flight) sends nothing.
            approve = card.locator("button.approve")
            approve.click()
            page.evaluate("document.querySelector('#transcript .msg.interrupt button.approve')?.click()")
            reply = page.locator("#transcript .msg.assistant").last
            expect(reply.locator(".text")).to_have_text(
                re.compile(
                    r"^Done! Your table for 3 on 2031-06-01 at 20:00 is booked under Ada Lovelace, reference BK-\w+\.$"
                )
            )
            expect(reply).not_to_have_class(re.compile("tentative"))
            expect(card).to_have_class(re.compile("answered"))
            expect(card.locator("button")).to_have_count(0)
            expect(card.locator(".note")).to_have_text("approved")
            expect(page.locator("#message")).to_be_enabled()
            expect(page.locator("#session-version")).to_have_text("2")
            approved_streams = list(watch.streams)

            # Another session: Edit the party size, then approve the edited booking.
            page.click("#new-session")
            edited_session = page.input_value("#session-key")
            send_chat_message(page, BOOK_EDITED)
            card = page.locator("#transcript .msg.interrupt")
            expect(card.locator('dd[data-arg="party_size"]')).to_have_text("2")
            card.locator("button.edit").click()
            party = card.locator('input.arg[data-arg="party_size"]')
            expect(party).to_be_visible()
            expect(card.locator('input.arg[data-arg="name"]')).to_be_focused()  # the first argument
            expect(card.locator('dd[data-arg="party_size"]')).to_be_hidden()
            party.fill("6")
            expect(card.locator("button.approve")).to_have_text("Approve edited")
            page.screenshot(path=str(shots["editing"]), full_page=True)
            card.locator("button.approve").click()
            expect(page.locator("#transcript .msg.assistant").last.locator(".text")).to_have_text(
                re.compile(
                    r"^Done! Your table for 6 on 2031-06-04 at 19:00 is booked under Ada Lovelace, reference BK-\w+\.$"
                )
            )
            expect(card.locator(".note")).to_have_text("approved with edits")
            expect(card.locator("input.arg")).to_have_count(0)
            edited_streams = watch.streams[len(approved_streams) :]

            # Another session: Reject, with a reason.
            page.click("#new-session")
            expect(page.locator("#graph")).to_have_value("booking")  # the choice stays for new sessions
            rejected_session = page.input_value("#session-key")
            send_chat_message(page, BOOK_REJECTED)
            card = page.locator("#transcript .msg.interrupt")
            expect(card.locator('dd[data-arg="name"]')).to_have_text("Grace Hopper")
            card.locator("input.reason").fill("changed my mind")
            card.locator("button.reject").click()
            expect(page.locator("#transcript .msg.assistant").last.locator(".text")).to_have_text(
                "All right, I have not booked it (not approved: changed my mind)."
            )
            expect(card.locator(".note")).to_have_text("rejected: changed my mind")
            page.screenshot(path=str(shots["answered"]), full_page=True)
            rejected_streams = watch.streams[len(approved_streams) + len(edited_streams) :]

            # A third session left waiting. A second tab opened before the
            # pause does not know of it: its message is refused with the
            # server's interrupt_pending, and the card shows up there too.
            pending_session = "hitl-pending"
            page.fill("#session-key", pending_session)
            page.press("#session-key", "Tab")
            expect(page.locator("#transcript .empty")).to_have_text("New session: your first message creates it.")
            other, other_watch = open_page(browser, server, key, pending_session)
            expect(other.locator("#transcript .empty")).to_have_text("New session: your first message creates it.")
            send_chat_message(page, BOOK_PENDING)
            expect(page.locator("#transcript .msg.interrupt")).to_have_count(1)
            send_chat_message(other, "Is there parking?")
            refused = other.locator("#transcript .msg.error")
            expect(refused.locator(".code")).to_have_text("interrupt_pending")
            expect(refused.locator(".note")).to_contain_text("approve, edit or reject it first")
            expect(other.locator('#transcript .msg.interrupt dd[data-arg="name"]')).to_have_text("Alan Turing")
            expect(other.locator("#message")).to_be_disabled()
            expect(other.locator("#message")).to_have_value("Is there parking?")  # given back
            expect(other.locator("#transcript .msg.user.discarded")).to_have_count(1)
            expect(other.locator("#session-version")).to_have_text("1")  # the session as it is now
            expect(other.locator("#session-graph")).to_have_text("booking")
            expect(other.locator("#graph")).to_be_disabled()
            assert [r.post_data_json for r in other_watch.streams] == [
                {"text": "Is there parking?", "client_mode": "chat", "need_form_update": True}
            ]
            other.screenshot(path=str(shots["refused"]), full_page=True)
            problems = other_watch.script_errors()

            # A reload brings the card back.
            page.reload()
            card = page.locator("#transcript .msg.interrupt")
            expect(card).to_have_count(1)
            expect(card.locator('dd[data-arg="name"]')).to_have_text("Alan Turing")
            expect(card.locator('dd[data-arg="party_size"]')).to_have_text("4")
            expect(card.locator("button.approve")).to_be_enabled()
            expect(page.locator("#message")).to_be_disabled()
            expect(page.locator("#transcript .msg.user .text")).to_have_text([BOOK_PENDING])
            expect(page.locator("#transcript .msg.tool .who")).to_have_text(
                ["tool call", "tool result · check_availability", "tool call"]
            )
            page.screenshot(path=str(shots["reloaded"]), full_page=True)
            problems += watch.script_errors()
        finally:
            browser.close()

    assert not problems, problems
    assert "Traceback" not in server.log_text()
    # One message and one answer per session, each with its own Idempotency-Key.
    bodies = [r.post_data_json for r in approved_streams]
    assert bodies == [
        {"text": BOOK_APPROVED, "client_mode": "chat", "need_form_update": True},
        {"resume": {"decisions": [{"type": "approve"}]}},
    ]
    edited_args = {"name": "Ada Lovelace", "date": "2031-06-04", "time": "19:00", "party_size": 6}
    assert [r.post_data_json for r in edited_streams] == [
        {"text": BOOK_EDITED, "client_mode": "chat", "need_form_update": True},
        {"resume": {"decisions": [{"type": "edit", "edited_action": {"name": "book_table", "args": edited_args}}]}},
    ]
    assert [r.post_data_json for r in rejected_streams] == [
        {"text": BOOK_REJECTED, "client_mode": "chat", "need_form_update": True},
        {"resume": {"decisions": [{"type": "reject", "message": "changed my mind"}]}},
    ]
    keys = [r.headers["idempotency-key"] for r in approved_streams + edited_streams + rejected_streams]
    assert all(UUID_RE.match(k) for k in keys) and len(set(keys)) == 6

    # Exactly one booking from the approved session, one from the edited
    # one (as edited); none from the others.
    approved = AgentSession.objects.get(owner="alice", key="hitl-approve")
    edited = AgentSession.objects.get(owner="alice", key=edited_session)
    (booking,) = Booking.objects.filter(session_id=approved.id)
    assert booking.name == "Ada Lovelace" and booking.party_size == 3
    (booking,) = Booking.objects.filter(session_id=edited.id)
    assert booking.party_size == 6 and str(booking.date) == "2031-06-04"
    assert Booking.objects.count() == 2
    assert approved.graph == "booking" and approved.interrupt is None and approved.version == 2
    rejected = AgentSession.objects.get(owner="alice", key=rejected_session)
    assert rejected.interrupt is None and rejected.version == 2
    waiting = AgentSession.objects.get(owner="alice", key=pending_session)
    assert waiting.interrupt is not None and waiting.version == 1
    for shot in shots.values():
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, (shot, len(data))


def test_regenerate_replaces_the_last_reply_and_refuses_a_changed_session(servers):
    from playwright.sync_api import expect, sync_playwright

    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="20")
    key = api_key_create(owner="alice")[1]
    shots = {"button": ARTIFACTS / "chat-regenerate.png", "conflict": ARTIFACTS / "chat-regenerate-conflict.png"}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for shot in shots.values():
        shot.unlink(missing_ok=True)
    api = httpx.Client(base_url=f"{server.url}/api", headers={"Authorization": f"Bearer {key}"}, timeout=20)

    with sync_playwright() as playwright, api:
        browser = launch_chromium(playwright)
        try:
            page, watch = open_page(browser, server, key, "regen-1")
            rewinds = []

            def on_request(request) -> None:
                if request.url.endswith("/rewind"):
                    rewinds.append(request.post_data_json)

            page.on("request", on_request)
            assistant = page.locator("#transcript .msg.assistant")
            regenerate = page.locator("#transcript button.regenerate")

            # The first turn: regenerate goes back to the session's start.
            send_chat_message(page, "hello")
            expect(assistant.last.locator(".text")).to_have_text(REPLY_1)
            expect(regenerate).to_have_count(1)
            first = assistant.last.get_attribute("data-turn-id")
            regenerate.click()
            expect(assistant).to_have_count(1)
            expect(assistant.last).not_to_have_attribute("data-turn-id", first)
            expect(assistant.last.locator(".text")).to_have_text(REPLY_1)
            expect(assistant.last).not_to_have_class(re.compile("tentative"))
            expect(page.locator("#session-version")).to_have_text("3")  # rewind 2, the new turn 3
            expect(page.locator("#transcript .msg.user")).to_have_count(1)
            first_again = assistant.last.get_attribute("data-turn-id")

            # A later turn: back to just after the previous one; only the last reply offers it.
            send_chat_message(page, "Ada Lovelace")
            expect(assistant.last.locator(".text")).to_have_text(REPLY_2)
            expect(regenerate).to_have_count(1)
            expect(assistant.last.locator("button.regenerate")).to_have_count(1)
            second = assistant.last.get_attribute("data-turn-id")
            regenerate.click()
            expect(assistant.last).not_to_have_attribute("data-turn-id", second)
            expect(assistant.last.locator(".text")).to_have_text(REPLY_2)
            expect(page.locator("#session-version")).to_have_text("6")
            expect(assistant).to_have_count(2)
            expect(page.locator('#fields tr[data-field="name"] td')).to_have_text("Ada Lovelace")
            second_again = assistant.last.get_attribute("data-turn-id")
            expect(regenerate).to_have_count(1)
            page.screenshot(path=str(shots["button"]), full_page=True)

            # Someone else changes the session: Regenerate is refused, the reply stays.
            patched = api.patch(
                "/sessions/regen-1/fields", json={"fields": {"email": "ada@example.com"}}, headers={"If-Match": '"6"'}
            )
            assert patched.status_code == 200, patched.text
            regenerate.click()
            error = page.locator("#transcript .msg.error")
            expect(error).to_have_count(1)
            expect(error.locator(".code")).to_have_text("version_conflict")
            expect(error).to_contain_text("the session is at version 7, not 6")
            expect(error.locator(".note")).to_contain_text("the session changed since this page read it")
            expect(assistant.last).to_have_attribute("data-turn-id", second_again)
            expect(assistant).to_have_count(2)
            page.screenshot(path=str(shots["conflict"]), full_page=True)
            history = api.get("/sessions/regen-1/history").json()
            problems = watch.script_errors()
        finally:
            browser.close()

    assert not problems, problems
    assert "Traceback" not in server.log_text()
    assert rewinds == [
        {"turn_id": None, "expected_version": 1},
        {"turn_id": first_again, "expected_version": 4},
        {"turn_id": first_again, "expected_version": 6},
    ]
    # The history keeps the replaced turns, marked superseded, off the head.
    by_id = {item["turn_id"]: item for item in history["items"]}
    assert history["count"] == 4
    assert [by_id[t]["superseded"] for t in (first, second, first_again, second_again)] == [True, True, False, False]
    assert [by_id[t]["on_head"] for t in (first, second, first_again, second_again)] == [False, False, True, True]
    session = AgentSession.objects.get(owner="alice", key="regen-1")
    assert session.version == 7 and str(session.head_turn_id) == second_again
    turns = {str(t.id): t for t in AgentTurn.objects.filter(session=session)}
    assert turns[second_again].request["text"] == "Ada Lovelace"
    assert str(turns[second_again].parent_id) == first_again and turns[first_again].parent_id is None
    for shot in shots.values():
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, (shot, len(data))
