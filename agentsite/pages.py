"""The chat page at `/`: a static page whose script talks to the API.

It holds no data and needs no login (the API checks the bearer key on every
call), so the view only renders the template and sets a strict
Content-Security-Policy: the page's one inline `<script>` and one inline
`<style>` carry a fresh nonce, and the only network access allowed is this
origin (the API)."""

from __future__ import annotations

import secrets

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe


def content_security_policy(nonce: str) -> str:
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src 'nonce-{nonce}'",
            f"style-src 'nonce-{nonce}'",
            "connect-src 'self'",
            "img-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


@never_cache  # a nonce is good for one response only
@require_safe
def chat_page(request: HttpRequest) -> HttpResponse:
    nonce = secrets.token_urlsafe(18)
    response = render(request, "chat.html", {"csp_nonce": nonce})
    response["Content-Security-Policy"] = content_security_policy(nonce)
    return response
