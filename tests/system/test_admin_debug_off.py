"""With DEBUG off, under a real daphne, the admin is styled: the app serves
its static files (WhiteNoise). Headless Chromium logs in and keeps
artifacts/<database>/admin-debug-off.png."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.browser import artifacts_dir, launch_chromium

pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACT = artifacts_dir() / "admin-debug-off.png"


def test_admin_is_styled_with_debug_off(servers):
    from playwright.sync_api import sync_playwright

    get_user_model().objects.create_superuser("ops", "ops@example.com", "a-long-test-password")
    server = servers(DEBUG="false", SECRET_KEY="test-only-secret-key-debug-off-0123456789")
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.unlink(missing_ok=True)

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(30_000)
            stylesheets: dict[str, int] = {}
            page.on(
                "response",
                lambda r: r.url.endswith(".css") and stylesheets.setdefault(r.url, r.status),
            )
            page.goto(f"{server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", "ops")
            page.fill("#id_password", "a-long-test-password")
            page.click("input[type=submit]")
            page.wait_for_url(f"{server.url}/admin/")
            page.wait_for_load_state("networkidle")

            assert any("/static/admin/css/base.css" in url for url in stylesheets), stylesheets
            assert set(stylesheets.values()) == {200}, stylesheets
            header_bg = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
            assert header_bg not in ("", "rgba(0, 0, 0, 0)"), header_bg
            # Unstyled, the admin's SVG icons render as big black squares.
            icon = page.eval_on_selector("a.addlink", "e => getComputedStyle(e).backgroundImage")
            assert "icon-addlink.svg" in icon, icon
            page.screenshot(path=str(ARTIFACT), full_page=True)
        finally:
            browser.close()
