"""agentsite settings. Every knob comes from the environment with a safe local
default; docs/configuration.md's table lists them all."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from core.database import CONNECT_TIMEOUT_SECONDS
from core.langgraph_json import project_graphs
from core.store_config import index_setting, thread_ttl_setting

# First: a project's langgraph.json may set any variable read below (its
# `env`; the process environment wins).
PROJECT_GRAPHS, PROJECT_FIRST_GRAPH = project_graphs(
    os.environ,
    Path.cwd(),
    "intake=graphs.intake.graph:build_intake_graph,booking=graphs.booking.graph:build_booking_graph",
)

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = BASE_DIR / "data"
DATA_DIR = Path(os.environ.get("AGENT_DATA_DIR") or DEFAULT_DATA_DIR)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_number(name: str, default: float, *, cast=float, minimum: float = 0):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {raw!r}")
    return value


def env_choice(name: str, default: str, choices: set[str]) -> str:
    value = os.environ.get(name) or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


DEBUG = env_bool("DEBUG", True)

_DEV_SECRET_KEY = "dev-only-insecure-secret-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY") or _DEV_SECRET_KEY
if not DEBUG and SECRET_KEY == _DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. With DEBUG off the built-in development key is refused: "
        "set SECRET_KEY in the environment."
    )

ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

# --- HTTPS (off by default: `make run` is plain HTTP on loopback) ------------------


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto` (value `https`) or `Header-Name:value`: the header
    a TLS-terminating proxy sets. Only for a proxy that sets or strips it on
    every request: anyone reaching the app past it could claim HTTPS."""
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return None
    header, _, value = raw.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9-]+", header.strip()):
        raise ImproperlyConfigured(f"{name} must be a header name like X-Forwarded-Proto, got {raw!r}")
    return "HTTP_" + header.strip().upper().replace("-", "_"), value.strip() or "https"


SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# A load balancer's health probe speaks plain HTTP to the app.
SECURE_REDIRECT_EXEMPT = [r"^api/health$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_number("SECURE_HSTS_SECONDS", 0, cast=int)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

INSTALLED_APPS = [
    # daphne first: it replaces runserver with an ASGI server that can stream.
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    # Serves Swagger UI's assets from this project's static files, not a CDN.
    "ninja",
    "axes",
    "sessions_app",
    "assistants_app",
    "turns_app",
    "langgraph_app",
    # The booking graph's app: its Booking model and the effect that creates it.
    "graphs.booking",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files before the rest: a stylesheet needs no session or CSRF.
    "core.http.static.AsyncWhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's CommonMiddleware, redirecting a POST to a path missing its
    # trailing slash with 308 instead of failing (core/http/slash.py).
    "core.http.slash.AppendSlashMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it answers a locked-out login attempt.
    "axes.middleware.AxesMiddleware",
]

# Admin login throttling (django-axes): after AGENT_ADMIN_LOGIN_FAILURES
# wrong passwords for one username from one address, that pair is locked out
# for AGENT_ADMIN_LOCKOUT_MINUTES (429); a success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_number("AGENT_ADMIN_LOGIN_FAILURES", 5, cast=int, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_number("AGENT_ADMIN_LOCKOUT_MINUTES", 15, minimum=0.01))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

ROOT_URLCONF = "agentsite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "agentsite.asgi.application"
WSGI_APPLICATION = None

# --- database ---------------------------------------------------------------

DEFAULT_SQLITE_PATH = DATA_DIR / "agentsite.sqlite3"
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{DEFAULT_SQLITE_PATH}"
DATABASE_URL_FORMS = (
    "postgres://USER:PASSWORD@HOST:5432/NAME, or sqlite:////absolute/path/to/file.sqlite3 "
    "(unset: the SQLite file data/agentsite.sqlite3)"
)

# Measured (docs/field-notes.md, "SQLite shared by Django and aiosqlite"):
# Django's deferred transactions lose the write lock race against the
# checkpointer's own connection; IMMEDIATE + WAL + a long busy timeout made
# select_for_update blocks on SQLite reliable.
SQLITE_OPTIONS = {
    "init_command": ("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;"),
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}


def _masked(url: str) -> str:
    return re.sub(r"(//[^:/@]*:)[^@]*@", r"\1***@", url)


def _database_from_url(url: str) -> dict[str, Any]:
    # No health check per checkout (a round trip on every step; docs/scale.md, "Round trips"):
    # core.asyncdb.db retries a step whose connection died in the pool
    # before it did anything.
    config: dict[str, Any] | None
    try:
        # A plain dict, as Django's settings hold it (not dj_database_url's TypedDict).
        config = dict(dj_database_url.parse(url, conn_max_age=0, conn_health_checks=False))
    except ValueError:
        config = None
    if not config or not config.get("ENGINE"):
        raise ImproperlyConfigured(f"DATABASE_URL={_masked(url)!r} is not a database URL: use {DATABASE_URL_FORMS}.")
    engine = config["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        name = Path(config["NAME"])
        if str(name) in {"", ":memory:"}:
            raise ImproperlyConfigured(
                "DATABASE_URL must name an SQLite file: the checkpointer shares it "
                "through its own connection, which an in-memory database cannot do."
            )
        if name == DEFAULT_SQLITE_PATH and DATA_DIR == DEFAULT_DATA_DIR:
            # A fresh clone has no data/ (git-ignores it): created on first run.
            name.parent.mkdir(parents=True, exist_ok=True)
        elif not name.parent.is_dir():
            # sqlite3 would make the file anywhere it can: a typo in the path
            # must not become a new, empty database.
            raise ImproperlyConfigured(
                f"the SQLite file {name} is in a folder that does not exist ({name.parent}): "
                "create the folder, or fix DATABASE_URL / AGENT_DATA_DIR."
            )
        config["OPTIONS"] = {**SQLITE_OPTIONS, **config.get("OPTIONS", {})}
        # The checkpointer opens the test database by name, so it must be a file.
        config["TEST"] = {"NAME": str(name.with_name(f"test_{name.name}"))}
    elif engine in {"django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis"}:
        if not config.get("NAME"):
            raise ImproperlyConfigured(f"DATABASE_URL={_masked(url)!r} names no database: use {DATABASE_URL_FORMS}.")
        options = config.setdefault("OPTIONS", {})
        # libpq waits for a dead host as long as the OS lets it (minutes).
        options.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
        # Django's psycopg pool: protocol steps run on worker threads and
        # close their connection after each step (CONN_MAX_AGE=0, as ASGI
        # wants); the pool makes that close/open cheap. `timeout`: while the
        # database is away, getconn() waits this long before the request
        # fails with 503 (psycopg_pool's default is 30 s); the same bound as
        # the checkpointer's pool.
        options.setdefault(
            "pool",
            {
                "min_size": 1,
                "max_size": env_number("DB_POOL_MAX_SIZE", 20, cast=int, minimum=1),
                "timeout": 10,
            },
        )
    else:
        raise ImproperlyConfigured(
            f"DATABASE_URL selects {engine}; agentsite supports PostgreSQL and SQLite only: use {DATABASE_URL_FORMS}."
        )
    return config


DATABASES = {"default": _database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- the agent ----------------------------------------------------------------


# langgraph.json (AGENT_LANGGRAPH_JSON, or ./langgraph.json) registers its
# graphs and loaded its env first, at the top of this module.
AGENT_GRAPHS = PROJECT_GRAPHS
AGENT_GRAPH = os.environ.get("AGENT_GRAPH") or PROJECT_FIRST_GRAPH or "intake"
if AGENT_GRAPH not in AGENT_GRAPHS:
    raise ImproperlyConfigured(f"AGENT_GRAPH={AGENT_GRAPH!r} is not one of AGENT_GRAPHS: {', '.join(AGENT_GRAPHS)}")
AGENT_MODEL = os.environ.get("AGENT_MODEL") or "offline"
AGENT_OFFLINE_TOKEN_DELAY_MS = env_number("AGENT_OFFLINE_TOKEN_DELAY_MS", 0)
AGENT_MODEL_TIMEOUT_SECONDS = env_number("AGENT_MODEL_TIMEOUT_SECONDS", 120, minimum=0.01)
AGENT_TURN_LEASE_SECONDS = env_number("AGENT_TURN_LEASE_SECONDS", 30, minimum=0.05)
AGENT_SESSION_WAIT_SECONDS = env_number("AGENT_SESSION_WAIT_SECONDS", 5)
# How long a server trusts an API key it found valid before asking the
# database again (sessions_app.key_cache); 0 asks every request. A key
# revoked on another process keeps working here that long at most.
AGENT_API_KEY_CACHE_SECONDS = env_number("AGENT_API_KEY_CACHE_SECONDS", 5, minimum=0)
AGENT_ON_DISCONNECT = env_choice("AGENT_ON_DISCONNECT", "continue", {"continue", "cancel"})
AGENT_DB_POOL_SIZE = env_number("AGENT_DB_POOL_SIZE", 5, cast=int, minimum=1)
# The conversations of recent sessions, kept as message objects so the next
# turn does not rebuild them from the database (an estimate of bytes held).
AGENT_CONVERSATION_CACHE_BYTES = env_number("AGENT_CONVERSATION_CACHE_BYTES", 64 * 2**20, cast=int)
# Periodic maintenance in the server (turns_app.maintenance); 0: off.
AGENT_MAINTENANCE_INTERVAL_SECONDS = env_number("AGENT_MAINTENANCE_INTERVAL_SECONDS", 300)
# Delete sessions nobody wrote to for this many days (0: never).
AGENT_SESSION_IDLE_DAYS = env_number("AGENT_SESSION_IDLE_DAYS", 0)
# Remove tombstones deleted this many days ago (0: keep them forever).
AGENT_TOMBSTONE_DAYS = env_number("AGENT_TOMBSTONE_DAYS", 30)
# On SIGTERM/SIGINT, how long running turns get to finish before they are
# aborted with `server_shutdown` (agentsite.graceful_stop).
AGENT_SHUTDOWN_GRACE_SECONDS = env_number("AGENT_SHUTDOWN_GRACE_SECONDS", 20)
# A finished turn's whole stream is kept this long, then compacted to its
# `turn` and final events (which carry the outcome).
AGENT_EVENT_RETENTION_SECONDS = env_number("AGENT_EVENT_RETENTION_SECONDS", 3600)
# An outside reservation service the booking graph's book_table calls (with
# an Idempotency-Key stable across retries); none by default.
AGENT_BOOKING_SERVICE_URL = os.environ.get("AGENT_BOOKING_SERVICE_URL", "")
AGENT_MAX_SESSIONS_PER_OWNER = env_number("AGENT_MAX_SESSIONS_PER_OWNER", 1000, cast=int, minimum=1)
# The health port (core.http.health_port): `/api/health` on a listener thread
# of its own, answered promptly however busy the server is; 0: off. Point
# a load balancer at it, on an address only it reaches.
AGENT_HEALTH_PORT = env_number("AGENT_HEALTH_PORT", 0, cast=int)
AGENT_HEALTH_HOST = os.environ.get("AGENT_HEALTH_HOST", "127.0.0.1")

# --- hostile clients (core.http.edge and core.http.server_guard) ------

# One bound for every request body (JSON API, SSE, admin, chat page): far
# above any real request (a chat turn is <= 16k characters, a form <= 256 KB).
AGENT_MAX_BODY_BYTES = env_number("AGENT_MAX_BODY_BYTES", 1_048_576, cast=int, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = AGENT_MAX_BODY_BYTES
# A request's headers and body must arrive within this time (daphne has no
# read timeout of its own); 0 turns the deadline off.
AGENT_REQUEST_READ_TIMEOUT_SECONDS = env_number("AGENT_REQUEST_READ_TIMEOUT_SECONDS", 30)
AGENT_MAX_CONNECTIONS = env_number("AGENT_MAX_CONNECTIONS", 500, cast=int, minimum=1)

# Browser origins allowed to call the LangGraph protocol at /langgraph/ from
# another origin (CORS), comma-separated, e.g. "http://localhost:3000"; none
# by default.
LANGGRAPH_CORS_ALLOWED_ORIGINS = [
    o.strip() for o in os.environ.get("LANGGRAPH_CORS_ALLOWED_ORIGINS", "").split(",") if o.strip()
]
# Off in every settings module but the test harness's; see turns_app.faults.
AGENT_FAULT_INJECTION = False

# --- the rest -------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
# The app serves its own static files (WhiteNoise), DEBUG or not, whether or
# not `collectstatic` ran: from STATIC_ROOT when it did (with gzip copies),
# else straight from the apps' static folders, indexed once at start-up.
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # No manifest: a process that never ran collectstatic still renders pages.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Prometheus metrics at /metrics: off unless a token is set; the scraper
# sends `Authorization: Bearer <token>`.
AGENT_METRICS_TOKEN = os.environ.get("AGENT_METRICS_TOKEN", "")

# An API key /langgraph/ uses for a request sending none, so clients written for
# an auth-less LangGraph server (its SDK test suite) act as that key's owner.
# Empty (the default): such a request gets 401. Tests and local trials only.
AGENT_PROTOCOL_DEFAULT_KEY = os.environ.get("AGENT_PROTOCOL_DEFAULT_KEY", "")
# Minutes a store item lives when its write names no `ttl` (0: until deleted).
AGENT_STORE_DEFAULT_TTL_MINUTES = env_number("AGENT_STORE_DEFAULT_TTL_MINUTES", 0)
# Whether a read refreshes an item's TTL when the read does not say (store.ttl).
AGENT_STORE_REFRESH_ON_READ = env_bool("AGENT_STORE_REFRESH_ON_READ", True)
# Maintenance sweeps expired store items at most this often (0: every pass).
AGENT_STORE_SWEEP_INTERVAL_MINUTES = env_number("AGENT_STORE_SWEEP_INTERVAL_MINUTES", 0)
# Semantic search in the store (store.index): {"embed", "dims", "fields"} or None.
AGENT_STORE_INDEX = index_setting(os.environ.get("AGENT_STORE_INDEX", ""))
# A langgraph_sdk.Auth to use instead of API keys (docs/configuration.md, "Custom auth").
AGENT_AUTH_PATH = os.environ.get("AGENT_AUTH_PATH", "").strip()
# Threads' default TTL and its sweeps (checkpointer.ttl): {"strategy", "default_ttl", …}.
AGENT_THREAD_TTL = thread_ttl_setting(os.environ.get("AGENT_THREAD_TTL", ""))
AGENT_HTTP_APP = os.environ.get("AGENT_HTTP_APP", "").strip()  # http.app (configuration.md)

# `text` for people, `json` (one object per line) for a log pipeline.
LOG_FORMAT = env_choice("LOG_FORMAT", "text", {"text", "json"})
LOG_FORMATTERS = {
    "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    "json": {
        "()": "pythonjsonlogger.json.JsonFormatter",
        "fmt": "%(levelname)s %(name)s %(message)s",
        "timestamp": "time",  # ISO 8601, UTC
        "rename_fields": {"levelname": "level", "name": "logger"},
        "json_ensure_ascii": False,
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"main": LOG_FORMATTERS[LOG_FORMAT]},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "main"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's default config gives "django" a console handler of its own.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "httpx": {"level": "WARNING"},
        "aiosqlite": {"level": "WARNING"},
    },
}
