"""Chat model factory: `AGENT_MODEL` names either a registered model or an
`init_chat_model` string such as `openai:gpt-4o-mini`."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel

from agentsite.agent.offline import OfflineChatModel

ModelFactory = Callable[[], BaseChatModel]


def _offline() -> BaseChatModel:
    return OfflineChatModel(token_delay_ms=settings.AGENT_OFFLINE_TOKEN_DELAY_MS)


_REGISTRY: dict[str, ModelFactory] = {"offline": _offline}


def register_model(name: str, factory: ModelFactory) -> None:
    """Make `name` build with `factory` (tests register scripted fakes)."""
    _REGISTRY[name] = factory


def unregister_model(name: str) -> None:
    _REGISTRY.pop(name, None)


def build_model(name: str | None = None) -> BaseChatModel:
    name = name or settings.AGENT_MODEL
    factory = _REGISTRY.get(name)
    if factory is not None:
        return factory()
    # langchain-openai's client reads OPENAI_BASE_URL / OPENAI_API_KEY itself.
    try:
        return init_chat_model(name)
    except Exception as exc:
        # Construction only reads configuration (provider, package, credentials),
        # so any failure here is a configuration error, whatever its type.
        raise ImproperlyConfigured(f"AGENT_MODEL={name!r} cannot be used: {exc}") from exc
