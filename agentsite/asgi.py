"""ASGI entry point for daphne and runserver.

Importing this module is what makes a process the server: it checks the
database is migrated, takes the SQLite single-instance lock, and aborts turns
a previous server left pending. Tests build the router with
`agentsite.routing.build_application()` instead.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from agentsite.http import server_guard  # noqa: E402
from agentsite.routing import build_application  # noqa: E402
from agentsite.startup import prepare_serving  # noqa: E402

prepare_serving()
# Before daphne (or its runserver) builds its server: limits daphne lacks.
server_guard.install(
    max_body_bytes=settings.AGENT_MAX_BODY_BYTES,
    read_timeout_seconds=settings.AGENT_REQUEST_READ_TIMEOUT_SECONDS,
    max_connections=settings.AGENT_MAX_CONNECTIONS,
)
application = build_application()
