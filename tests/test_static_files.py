"""The app serves the admin's static files itself, DEBUG or not (WhiteNoise,
through an async middleware). The browser test with a real daphne and DEBUG
off is tests/system/test_admin_debug_off.py."""

from __future__ import annotations

import pytest
from django.test import AsyncClient, Client

from core.http.static import AsyncWhiteNoiseMiddleware


async def body(response) -> bytes:
    if not response.streaming:
        return response.content
    if hasattr(response.streaming_content, "__aiter__"):
        return b"".join([chunk async for chunk in response.streaming_content])
    return b"".join(response.streaming_content)


@pytest.mark.parametrize("debug", [False, True])
async def test_admin_stylesheet_is_served(settings, debug):
    settings.DEBUG = debug
    response = await AsyncClient().get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert b"#header" in await body(response)
    if not debug:
        assert "max-age=60" in response["Cache-Control"]


async def test_an_unknown_static_path_is_a_404_not_a_500(settings):
    settings.DEBUG = False
    response = await AsyncClient().get("/static/admin/css/nope.css")
    assert response.status_code == 404


def test_the_sync_test_client_still_works(settings, db):
    """Django adapts the async-only middleware for a sync handler."""
    settings.DEBUG = False
    assert Client().get("/static/admin/js/core.js").status_code == 200


def test_other_requests_do_not_leave_the_event_loop():
    """The point of the subclass: no sync-to-async hop per API request."""
    assert AsyncWhiteNoiseMiddleware.async_capable and not AsyncWhiteNoiseMiddleware.sync_capable
