"""The session page in a real browser: headless Chromium (whichever
tests/browser.py finds) driven by Playwright against a live server. Logs in
through the login form, opens a session with real turns, and keeps the PNG
as a test artifact (artifacts/<database>/admin-session.png).

Playwright's sync API refuses to run inside an event loop, so this test is sync."""

from __future__ import annotations

import struct

import pytest

from tests.admin.conftest import admin_url, session_with_turns
from tests.browser import artifacts_dir, launch_chromium

pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACT = artifacts_dir() / "admin-session.png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE, "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_session_page_in_headless_chromium(live_server, admin_user, api):
    from playwright.sync_api import sync_playwright

    session = session_with_turns(api, "screenshot-demo", turns=5)
    change_path = admin_url("sessions_app_agentsession_change", session.pk)
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.unlink(missing_ok=True)

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(f"{live_server.url}/admin/login/?next={change_path}")
            page.fill("#id_username", admin_user.username)
            page.fill("#id_password", "password")  # pytest-django's admin_user
            page.click("input[type=submit]")
            page.wait_for_url(f"{live_server.url}{change_path}")

            transcript = page.locator("ol.agentsite-transcript")
            transcript.wait_for(state="visible")
            said = transcript.inner_text()
            assert "name: Ada Lovelace" in said
            assert "topic: booking" in said
            assert "Thank you, I have everything I need" in said
            # The typed fields and the turns are on the page too.
            fields = page.locator(".field-fields_table table").inner_text()
            assert "ada@example.com" in fields and "2031-01-02" in fields
            assert page.locator("#turns-group tbody tr.has_original").count() == 5
            # The admin's stylesheet loaded (the page is styled, not bare HTML).
            header_bg = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
            assert header_bg not in ("", "rgba(0, 0, 0, 0)")

            page.screenshot(path=str(ARTIFACT), full_page=True)
        finally:
            browser.close()

    data = ARTIFACT.read_bytes()
    width, height = png_size(data)
    assert width == 1280 and height >= 900
    assert len(data) > 30_000, f"suspiciously small screenshot ({len(data)} bytes)"
