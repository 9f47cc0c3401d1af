"""deploy/nginx/agentsite.conf.template, as docker-compose runs it, with
Debian's nginx in front of a real daphne: events stream through unbuffered,
bodies are capped, a slow client is held by nginx (the app never sees a half
request), errors nginx makes itself are in the error contract, the HTTPS
settings work behind it, and an operator logs in to the admin through it —
on plain HTTP at a non-default port and behind a TLS terminator — with no
CSRF_TRUSTED_ORIGINS."""

from __future__ import annotations

import json
import re
import socket
import ssl
import time

import httpx
import pytest
from django.contrib.auth import get_user_model

from sessions_app.services import api_key_create
from tests.system.server import free_port

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TOKEN_DELAY_MS = 120
CLIENT_BODY_TIMEOUT = 15  # the template's client_body_timeout


# docker-compose.yml's values for HTTPS, with a test-only key.
COMPOSE_HTTPS = {
    "DEBUG": "false",
    "SECRET_KEY": "test-only-secret-key-behind-nginx-0123456789-abcdef",
    "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    "SECURE_SSL_REDIRECT": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_HSTS_SECONDS": "3600",
}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def admin_login(base_url: str, verify: ssl.SSLContext | bool = True) -> httpx.Response:
    """What a browser does: fetch the login form, then post it back with the
    form's CSRF token, the CSRF cookie and the page's Origin (scheme, host
    and port, as the browser's address bar has them)."""
    with httpx.Client(base_url=base_url, verify=verify, timeout=30) as browser:
        form = browser.get("/admin/login/?next=/admin/")
        assert form.status_code == 200, form.text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        return browser.post(
            "/admin/login/?next=/admin/",
            data={
                "csrfmiddlewaretoken": token,
                "username": "ops",
                "password": "a-long-test-password",
                "next": "/admin/",
            },
            headers={"Origin": base_url, "Referer": f"{base_url}/admin/login/?next=/admin/"},
        )


def logged_in(response: httpx.Response) -> bool:
    return response.status_code == 302 and response.headers["location"] == "/admin/"


def test_a_turn_streams_through_nginx_as_it_is_written(servers, nginx_in_front):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=str(TOKEN_DELAY_MS))
    proxy = nginx_in_front(server)
    key = api_key_create(owner="alice")[1]

    arrivals: list[tuple[float, str]] = []
    with httpx.stream(
        "POST",
        f"{proxy.url}/api/sessions/via-nginx/turns/stream",
        json={"text": "hello"},
        headers=auth(key),
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for line in response.iter_lines():
            if line.startswith("event: "):
                arrivals.append((time.monotonic(), line.removeprefix("event: ")))
    names = [name for _, name in arrivals]
    assert names[0] == "turn" and names[-1] == "done", names
    deltas = [t for t, name in arrivals if name == "delta"]
    assert len(deltas) >= 5, names
    # Buffered, every event would arrive at once with `done`; unbuffered,
    # the deltas arrive one token delay apart.
    spread = deltas[-1] - deltas[0]
    assert spread >= (len(deltas) - 1) * TOKEN_DELAY_MS / 1000 * 0.6, (spread, len(deltas))
    assert arrivals[-1][0] - deltas[0] >= spread


def test_nginx_caps_bodies_in_the_error_contract(servers, nginx_in_front):
    server = servers()
    proxy = nginx_in_front(server)
    key = api_key_create(owner="alice")[1]
    big = json.dumps({"text": "x" * (2 * 1024 * 1024)})
    for path in ("/api/sessions/big/turns", "/api/sessions/big/turns/stream"):
        response = httpx.post(
            f"{proxy.url}{path}",
            content=big,
            timeout=30,
            headers={**auth(key), "Content-Type": "application/json"},
        )
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        assert response.json()["error"]["code"] == "payload_too_large"
    # The app never saw them.
    assert "/api/sessions/big/" not in server.log_text()


def test_a_slow_client_is_held_by_nginx_not_by_the_app(servers, nginx_in_front):
    server = servers()
    proxy = nginx_in_front(server)
    key = api_key_create(owner="alice")[1]
    body = json.dumps({"text": "hello"}).encode()
    slow = socket.create_connection(("127.0.0.1", proxy.port), timeout=CLIENT_BODY_TIMEOUT + 10)
    try:
        slow.sendall(
            b"POST /api/sessions/slow/turns HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:5]
        )
        started = time.monotonic()
        # Meanwhile the app serves others, and has not seen the half request.
        ok = httpx.post(f"{proxy.url}/api/sessions/fast/turns", json={"text": "hello"}, headers=auth(key), timeout=30)
        assert ok.status_code == 200, ok.text
        assert "/api/sessions/slow/" not in server.log_text()
        # nginx gives up on the body after client_body_timeout.
        answer = slow.recv(4096)
        waited = time.monotonic() - started
    finally:
        slow.close()
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer
    assert CLIENT_BODY_TIMEOUT - 2 <= waited <= CLIENT_BODY_TIMEOUT + 8, waited
    assert "/api/sessions/slow/" not in server.log_text()


def test_https_settings_behind_nginx(servers, nginx_in_front):
    server = servers(**COMPOSE_HTTPS)
    proxy = nginx_in_front(server)
    # Plain HTTP is sent to HTTPS, at the host the client named (a front on
    # port 80 passes the bare name); the health probe is exempt.
    plain = httpx.get(f"{proxy.url}/admin/login/", headers={"Host": "127.0.0.1"}, timeout=10)
    assert plain.status_code == 301
    assert plain.headers["location"] == "https://127.0.0.1/admin/login/"
    assert httpx.get(f"{proxy.url}/api/health", timeout=10).status_code == 200
    # Through a TLS terminator (it sets X-Forwarded-Proto), Django sees HTTPS.
    secure = httpx.get(f"{proxy.url}/admin/login/", headers={"X-Forwarded-Proto": "https"}, timeout=10)
    assert secure.status_code == 200
    assert secure.headers["strict-transport-security"] == "max-age=3600"
    assert "; secure" in secure.headers["set-cookie"].lower()


def test_the_admin_logs_in_through_nginx_on_plain_http_at_another_port(servers, nginx_in_front):
    get_user_model().objects.create_superuser("ops", "ops@example.com", "a-long-test-password")
    # docker-compose.yml with AGENT_HTTPS=false and AGENT_PORT other than 80.
    server = servers(
        DEBUG="false",
        SECRET_KEY="test-only-secret-key-behind-nginx-0123456789-abcdef",
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto",
        CSRF_TRUSTED_ORIGINS="",
    )
    proxy = nginx_in_front(server)
    assert proxy.port != 80
    response = admin_login(proxy.url)
    assert logged_in(response), (response.status_code, response.text[:500])


def test_the_admin_logs_in_over_https_through_a_tls_terminator_and_nginx(servers, nginx_in_front):
    get_user_model().objects.create_superuser("ops", "ops@example.com", "a-long-test-password")
    server = servers(**COMPOSE_HTTPS, CSRF_TRUSTED_ORIGINS="")
    front = nginx_in_front(nginx_in_front(server), tls=True)
    assert front.url.startswith("https://") and front.port != 443
    trusted = ssl.create_default_context(cafile=str(front.certificate))
    response = admin_login(front.url, verify=trusted)
    assert logged_in(response), (response.status_code, response.text[:500])
    assert "; secure" in response.headers["set-cookie"].lower()


def test_an_app_that_is_down_answers_the_error_contract(nginx_in_front):
    proxy = nginx_in_front(free_port())  # nothing listens there
    response = httpx.get(f"{proxy.url}/api/health", timeout=15)
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.json()["error"]["code"] == "server_unavailable"
