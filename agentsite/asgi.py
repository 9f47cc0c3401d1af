"""ASGI entry point for daphne and runserver.

Importing this module is what makes a process the server: it checks the
database is there and migrated, takes the SQLite single-instance lock, and
aborts turns a previous server left pending. If it must not serve, it exits
with one line saying why (agentsite.cli.refuse_to_start). Tests build the
router with `agentsite.routing.build_application()` instead.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

from django.core.exceptions import ImproperlyConfigured

from agentsite.cli import refuse_to_start

try:
    import django

    django.setup()

    from django.conf import settings

    from agentsite.routing import build_application
    from agentsite.startup import freeze_startup_heap, prepare_serving
    from core.http import server_guard

    prepare_serving()
    # Before daphne (or its runserver) builds its server: limits daphne lacks.
    server_guard.install(
        max_body_bytes=settings.AGENT_MAX_BODY_BYTES,
        read_timeout_seconds=settings.AGENT_REQUEST_READ_TIMEOUT_SECONDS,
        max_connections=settings.AGENT_MAX_CONNECTIONS,
    )
    application = build_application()
    freeze_startup_heap()
except ImproperlyConfigured as exc:  # settings, StartupError, DatabaseUnavailable
    refuse_to_start(str(exc))
