"""HTTPS deployment settings from the environment: `manage.py check --deploy`
is clean with the values docker-compose.yml gives the app, and each setting
reaches Django."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?message}`."""

    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise AssertionError(f"compose needs {name}: {arg}")
        return arg or ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value)


def compose_app_environment(env: dict[str, str]) -> dict[str, str]:
    spec = yaml.safe_load(COMPOSE.read_text())
    app = spec["services"]["app"]
    return {k: interpolate(str(v), env) for k, v in app["environment"].items()}


def check_deploy(environment: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**base, **environment, "DJANGO_SETTINGS_MODULE": "agentsite.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_compose_values():
    environment = compose_app_environment({"SECRET_KEY": secrets.token_urlsafe(50)})
    assert environment["DEBUG"] == "false"
    result = check_deploy(environment)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_warns_when_https_is_off():
    """The same stack tried over plain HTTP (AGENT_HTTPS=false) is not a deployment."""
    environment = compose_app_environment({"SECRET_KEY": secrets.token_urlsafe(50), "AGENT_HTTPS": "false"})
    result = check_deploy(environment)
    assert result.returncode != 0
    for warning in ("security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


@pytest.mark.parametrize(
    "raw, expected",
    [("X-Forwarded-Proto", ("HTTP_X_FORWARDED_PROTO", "https")), ("X-Scheme:on", ("HTTP_X_SCHEME", "on"))],
)
def test_proxy_ssl_header_from_the_environment(monkeypatch, raw, expected):
    from agentsite.settings import env_proxy_ssl_header

    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", raw)
    assert env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER") == expected


def test_a_bad_proxy_ssl_header_is_refused(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from agentsite.settings import env_proxy_ssl_header

    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "X Forwarded Proto")
    with pytest.raises(ImproperlyConfigured):
        env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")


def test_https_settings_reach_django():
    environment = compose_app_environment({"SECRET_KEY": secrets.token_urlsafe(50)})
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
        "s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
        "s.SECURE_PROXY_SSL_HEADER)"
    )
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, **environment, "DJANGO_SETTINGS_MODULE": "agentsite.settings"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "True",
        "True",
        "True",
        "31536000",
        "True",
        "True",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
    ]


def test_compose_health_check_uses_the_health_port():
    """The container's probe goes to the health port's thread, which
    nothing on daphne's port queues behind (docs/operations.md, "Health")."""
    spec = yaml.safe_load(COMPOSE.read_text())
    app = spec["services"]["app"]
    port = app["environment"]["AGENT_HEALTH_PORT"]
    assert port.isdigit() and port != "8000"
    probe = " ".join(app["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}/api/health" in probe
    assert "AGENT_HEALTH_PORT" not in spec["services"]["migrate"]["environment"]
