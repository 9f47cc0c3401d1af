"""Model factory: `AGENT_MODEL` names the chat model every graph gets.

* `offline` — the built-in deterministic model (no network);
* `<module.path>:<callable>` — a factory of your own, called with no
  arguments (the module part has a dot, which no provider id has);
* anything else — an `init_chat_model` id such as `openai:gpt-4o-mini`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from langchain.chat_models import init_chat_model
from langchain_core.callbacks import BaseCallbackManager
from langchain_core.language_models import BaseChatModel

from core.metrics import MODEL_CALLS
from graphs.intake.offline import OfflineChatModel


def build_model(name: str | None = None) -> BaseChatModel:
    """The chat model, with the timer that feeds agentsite_model_call_seconds."""
    model = _build(name or settings.AGENT_MODEL)
    if isinstance(model.callbacks, BaseCallbackManager):
        # A factory may hand over a manager, not a list: a copy, with the timer.
        manager = model.callbacks.copy()
        manager.add_handler(MODEL_CALLS)
        model.callbacks = manager
    else:
        model.callbacks = [*(model.callbacks or []), MODEL_CALLS]
    return model


def _build(name: str) -> BaseChatModel:
    if name == "offline":
        return OfflineChatModel(token_delay_ms=settings.AGENT_OFFLINE_TOKEN_DELAY_MS)
    module, colon, attribute = name.partition(":")
    if colon and "." in module:
        try:
            factory = import_string(f"{module}.{attribute}")
        except ImportError as exc:
            raise ImproperlyConfigured(f"AGENT_MODEL={name!r} cannot be imported: {exc}") from exc
        return factory()
    # langchain-openai's client reads OPENAI_BASE_URL / OPENAI_API_KEY itself.
    try:
        return init_chat_model(name)
    except Exception as exc:
        # Construction only reads configuration (provider, package, credentials),
        # so any failure here is a configuration error, whatever its type.
        raise ImproperlyConfigured(f"AGENT_MODEL={name!r} cannot be used: {exc}") from exc
