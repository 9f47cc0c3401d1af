"""The chat page at `/`: served without login, with its form, and a strict CSP."""

from __future__ import annotations

import re

import pytest
from django.test import Client

PAGE_IDS = [
    "api-key",
    "session-key",
    "load-session",
    "new-session",
    "graph",
    "session-graph",
    "transcript",
    "chat-form",
    "message",
    "send",
    "session-version",
    "fields",
]


@pytest.fixture
def page():
    return Client().get("/")


def test_chat_page_renders_the_form(page):
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    for element_id in PAGE_IDS:
        assert f'id="{element_id}"' in html, element_id
    assert "/turns/stream" in html
    assert "make api-key NAME=you" in html
    assert 'aria-live="polite"' in html
    assert '<label for="api-key">' in html and '<label for="session-key">' in html
    assert "sessionStorage" in html
    # Rendering goes through textContent only.
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html


def test_chat_page_sets_a_nonce_csp(page):
    csp = page["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["connect-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    (nonce,) = set(re.findall(r"'nonce-([^']+)'", csp))
    assert directives["script-src"] == directives["style-src"] == f"'nonce-{nonce}'"
    html = page.content.decode()
    # Every inline script and style carries the nonce; there is nothing else.
    assert html.count("<script") == html.count(f'<script nonce="{nonce}">') == 1
    assert html.count("<style") == html.count(f'<style nonce="{nonce}">') == 1
    assert " style=" not in html and " onclick=" not in html and "src=" not in html


def test_each_response_gets_a_fresh_nonce_and_is_not_cached():
    first, second = Client().get("/"), Client().get("/")
    assert first["Content-Security-Policy"] != second["Content-Security-Policy"]
    assert "no-store" in first["Cache-Control"]


def test_chat_page_is_read_only():
    response = Client().post("/")
    assert response.status_code == 405
