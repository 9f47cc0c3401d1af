"""The chat page as a keyboard user at 1280×800 meets it, in headless
Chromium against a real daphne process (docs/api.md, "The chat page"): the
graph list fills while the key is being typed (no need to leave the field),
the focus is back in the message box after each Send, and after three
turns the message box is still in view — the transcript scrolls, not the
page. Keeps artifacts/<database>/chat-keyboard.png.

Playwright's sync API refuses to run inside an event loop, so this test is sync."""

from __future__ import annotations

import re

import pytest

from sessions_app.services import api_key_create
from tests.browser import artifacts_dir, launch_chromium, send_chat_message

pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACT = artifacts_dir() / "chat-keyboard.png"
VIEWPORT = {"width": 1280, "height": 800}
# Long enough that three turns outgrow the space the transcript has.
TURNS = [
    "Hello there! I would like to fill in the form, and I have all of my details ready for you.",
    "My name is Ada Lovelace, and I am happy to answer whatever else the form asks of me.",
    "My email address is ada@example.com, which is the best way to reach me about this.",
]


def fully_in_view(page, selector: str) -> bool:
    return page.evaluate(
        """(selector) => {
          const box = document.querySelector(selector).getBoundingClientRect();
          return box.top >= 0 && box.left >= 0 && box.bottom <= innerHeight && box.right <= innerWidth;
        }""",
        selector,
    )


def test_graph_list_focus_and_layout_for_a_keyboard_user(servers):
    from playwright.sync_api import expect, sync_playwright

    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="5")
    key = api_key_create(owner="alice")[1]
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.unlink(missing_ok=True)

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(30_000)
            problems: list[str] = []
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.goto(f"{server.url}/")

            # The key typed (or pasted) and left in its field: the list fills all the same.
            page.fill("#api-key", key)
            expect(page.locator('#graph option[value="booking"]')).to_have_count(1)
            expect(page.locator("#api-key")).to_be_focused()

            page.fill("#session-key", "keyboard-1")
            page.press("#session-key", "Tab")
            expect(page.locator("#transcript .empty")).to_have_text("New session: your first message creates it.")
            assistant = page.locator("#transcript .msg.assistant")
            for number, text in enumerate(TURNS, start=1):
                send_chat_message(page, text)  # fill, then a click on Send
                expect(assistant).to_have_count(number)
                expect(assistant.last).not_to_have_class(re.compile("tentative"))
                expect(page.locator("#session-version")).to_have_text(str(number))
                # Back in the message box, ready for the next one, and in view.
                expect(page.locator("#message")).to_be_focused()
                assert fully_in_view(page, "#message") and fully_in_view(page, "#send"), number
            # The page itself does not scroll; the transcript does.
            sizes = page.evaluate(
                """() => ({page: document.documentElement.scrollHeight, view: innerHeight,
                           transcript: document.getElementById('transcript').scrollHeight,
                           shown: document.getElementById('transcript').clientHeight})"""
            )
            assert sizes["page"] <= sizes["view"], sizes
            assert sizes["transcript"] > sizes["shown"], sizes  # three turns did outgrow it
            page.screenshot(path=str(ARTIFACT))

            # A reload with the key kept in the tab fills the list on load.
            page.reload()
            expect(page.locator('#graph option[value="booking"]')).to_have_count(1)
        finally:
            browser.close()

    assert not problems, problems
    data = ARTIFACT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
