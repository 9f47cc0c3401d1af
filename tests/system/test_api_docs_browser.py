"""/api/docs in headless Chromium against a real server (docs/api.md, "Overview"):
Swagger UI renders from this project's static files under a CSP that allows
only the origin's own scripts; no request leaves the server's origin and the
browser reports no CSP violation."""

from __future__ import annotations

import pytest

from tests.browser import launch_chromium

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]


def test_docs_render_from_own_static_files_under_csp(servers):
    from playwright.sync_api import expect, sync_playwright

    # runserver with DEBUG on serves static files (daphne alone does not).
    server = servers("runserver", DEBUG="true")
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            console: list[str] = []
            requested: list[str] = []
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
            page.on("request", lambda request: requested.append(request.url))
            response = page.goto(f"{server.url}/api/docs")
            assert response.status == 200
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("agentsite")
            # The operations are listed, so the schema was fetched and parsed.
            expect(page.locator(".opblock").first).to_be_visible()
        finally:
            browser.close()
    foreign = [url for url in requested if not url.startswith(server.url) and not url.startswith("data:")]
    assert foreign == [], foreign
    violations = [line for line in console if "Content Security Policy" in line]
    assert violations == [], violations
