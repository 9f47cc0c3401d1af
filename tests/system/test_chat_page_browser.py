"""The chat page in a real browser against a real daphne process: headless
Chromium (tests/browser.py finds it) driven by Playwright. Deltas must show up live, `done` must replace them with the
committed reply, the side panel must follow the committed version, and a
bad key must say so. Keeps artifacts/<database>/chat-page.png.

Playwright's sync API refuses to run inside an event loop, so this test is sync."""

from __future__ import annotations

import re

import pytest

from sessions_app.models import AgentSession
from sessions_app.services import api_key_create
from tests.browser import artifacts_dir, launch_chromium, send_chat_message

pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACT = artifacts_dir() / "chat-page.png"
SESSION = "chat-browser-1"
REPLY_1 = "Hello! I need a few details from you. What is your full name?"
REPLY_2 = "Thanks! What is your email address?"
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

# Records every text the tentative assistant bubble showed, in order.
WATCH_TENTATIVE = """() => {
  window.__tentative = [];
  new MutationObserver(() => {
    const bubble = document.querySelector('#transcript .msg.assistant.tentative .text');
    if (bubble && bubble.textContent && window.__tentative.at(-1) !== bubble.textContent) {
      window.__tentative.push(bubble.textContent);
    }
  }).observe(document.getElementById('transcript'),
             {subtree: true, childList: true, characterData: true});
}"""


def test_chat_page_streams_a_turn_in_headless_chromium(servers):
    from playwright.sync_api import expect, sync_playwright

    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="40")
    key = api_key_create(owner="alice")[1]
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.unlink(missing_ok=True)

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            problems: list[str] = []
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

            def on_console(msg) -> None:
                if msg.type == "error":
                    problems.append(f"console: {msg.text}")

            page.on("console", on_console)
            requests = []
            page.on("request", lambda request: requests.append(request))

            page.goto(f"{server.url}/")
            expect(page.locator("#session-key")).to_have_value(re.compile(r"^chat-[0-9a-f]{8}$"))
            expect(page.locator("#api-key-hint")).to_contain_text("make api-key NAME=you")
            page.fill("#api-key", key)
            page.fill("#session-key", SESSION)
            page.evaluate(WATCH_TENTATIVE)

            # Turn 1: the deltas show in a tentative bubble before `done`.
            send_chat_message(page, "hello")
            tentative = page.locator("#transcript .msg.assistant.tentative .text")
            expect(tentative).to_have_text(re.compile(r"\S"))
            assistant = page.locator("#transcript .msg.assistant")
            expect(assistant.last.locator(".text")).to_have_text(REPLY_1)
            expect(assistant.last).not_to_have_class(re.compile("tentative"))
            expect(page.locator("#session-version")).to_have_text("1")
            expect(page.locator("#session-stage")).to_have_text("collecting")
            seen = page.evaluate("window.__tentative")
            assert len(seen) >= 3, seen  # it grew token by token …
            assert all(REPLY_1.startswith(t) and t != REPLY_1 for t in seen[:-1]), seen
            assert seen[0] != REPLY_1  # … and was shown before the commit

            # Turn 2: a field is extracted and committed.
            send_chat_message(page, "Ada Lovelace")
            expect(assistant).to_have_count(2)
            expect(assistant.last.locator(".text")).to_have_text(REPLY_2)
            expect(page.locator("#session-version")).to_have_text("2")
            expect(page.locator('#fields tr[data-field="name"] td')).to_have_text("Ada Lovelace")
            expect(assistant.last.locator(".note")).to_have_text("saved: name = Ada Lovelace")
            # The form's other fields are listed as missing once the info is read.
            expect(page.locator('#fields tr[data-field="email"] td.missing')).to_have_count(1)

            # A reload keeps key and session (sessionStorage) and shows the
            # committed transcript.
            page.reload()
            expect(page.locator("#transcript .msg")).to_have_count(4)
            expect(page.locator("#transcript .msg.user .text").first).to_have_text("hello")
            expect(page.locator("#transcript .msg.assistant .text").last).to_have_text(REPLY_2)
            expect(page.locator("#session-version")).to_have_text("2")
            stored = page.evaluate(
                "[sessionStorage.getItem('agentsite.chat.apiKey'), localStorage.length, document.cookie]"
            )
            assert stored == [key, 0, ""]

            # A bad key: the pre-stream 401 is shown with a hint.
            page.fill("#api-key", "not-a-real-key")
            send_chat_message(page, "hello again")
            error = page.locator("#transcript .msg.error")
            expect(error).to_have_count(1)
            expect(error).to_contain_text("unauthorized")
            expect(error).to_contain_text("check your API key")
            expect(page.locator("#message")).to_have_value("hello again")  # given back

            page.screenshot(path=str(ARTIFACT), full_page=True)
        finally:
            browser.close()

    # The database agrees (checked here: Playwright's sync API runs a loop,
    # so Django refuses sync queries inside its block). The bad key changed nothing.
    session = AgentSession.objects.get(owner="alice", key=SESSION)
    assert session.version == 2
    assert session.fields == {"name": "Ada Lovelace"}
    assert session.turns.count() == 2

    # No script error and no CSP violation ("Failed to load resource" lines
    # are the expected 401s and the absent favicon); the server logged no exception.
    assert not [p for p in problems if "Failed to load resource" not in p], problems
    assert "Traceback" not in server.log_text()

    # The key went only to this server's API, in the Authorization header.
    for request in requests:
        assert request.url.startswith(server.url + "/"), request.url
        auth = request.headers.get("authorization")
        if auth is not None:
            assert request.url.startswith((f"{server.url}/api/sessions/", f"{server.url}/api/graphs")), request.url
            assert auth in (f"Bearer {key}", "Bearer not-a-real-key")
        assert key not in request.url
    streams = [r for r in requests if r.url.endswith(f"/api/sessions/{SESSION}/turns/stream")]
    assert len(streams) == 3
    assert all(UUID_RE.match(r.headers["idempotency-key"]) for r in streams)
    assert len({r.headers["idempotency-key"] for r in streams}) == 3
    assert streams[0].post_data_json == {"text": "hello", "client_mode": "chat", "need_form_update": True}

    data = ARTIFACT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, len(data)


def test_new_clears_an_error_and_required_fields_are_marked(servers):
    from playwright.sync_api import expect, sync_playwright

    server = servers()
    key = api_key_create(owner="alice")[1]
    artifact = ARTIFACT.with_name("chat-page-fields.png")
    artifact.unlink(missing_ok=True)
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(f"{server.url}/")
            page.fill("#api-key", key)
            page.fill("#session-key", "chat-fields-1")
            send_chat_message(page, "hello")
            expect(page.locator("#session-version")).to_have_text("1")

            # The default form: five required fields, two optional ones.
            required = page.locator("#fields tr.required")
            expect(required).to_have_count(5)
            for name in ("name", "email", "preferred_date", "party_size", "topic"):
                row = page.locator(f'#fields tr[data-field="{name}"]')
                expect(row.locator("th abbr.required")).to_be_visible()
                expect(row).to_have_class(re.compile("required-missing"))
                expect(row.locator("td")).to_have_text("missing")
            for name in ("phone", "notes"):
                row = page.locator(f'#fields tr[data-field="{name}"]')
                expect(row.locator("abbr.required")).to_have_count(0)
                expect(row.locator("td")).to_have_text("—")
            send_chat_message(page, "Ada Lovelace")
            expect(page.locator("#session-version")).to_have_text("2")
            expect(page.locator('#fields tr[data-field="name"]')).not_to_have_class(re.compile("required-missing"))
            expect(page.locator('#fields tr[data-field="name"] abbr.required')).to_be_visible()
            page.screenshot(path=str(artifact), full_page=True)

            # An error bubble, then New: a fresh session shows none of it.
            page.fill("#api-key", "not-a-real-key")
            send_chat_message(page, "hello again")
            expect(page.locator("#transcript .msg.error")).to_have_count(1)
            old_session = page.input_value("#session-key")
            page.click("#new-session")
            expect(page.locator("#transcript .msg")).to_have_count(0)
            expect(page.locator("#transcript .empty")).to_have_text("New session: your first message creates it.")
            expect(page.locator("#status")).to_have_text("")
            assert page.input_value("#session-key") != old_session
            expect(page.locator("#fields td.missing")).to_have_text("none yet")
            # …and stays that way (no load of the new key brings an error back).
            page.wait_for_timeout(500)
            expect(page.locator("#transcript .msg.error")).to_have_count(0)
        finally:
            browser.close()
