"""The ASGI router: Channels consumer paths first, then Django (ninja, admin)."""

from __future__ import annotations

from channels.routing import ProtocolTypeRouter
from django.core.asgi import get_asgi_application


def build_application():
    django_app = get_asgi_application()
    return ProtocolTypeRouter({"http": django_app})
