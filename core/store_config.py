"""The store's settings from a langgraph.json's `store` key, as langgraph-api
reads it (docs/configuration.md, "langgraph.json"): `store.index` becomes
AGENT_STORE_INDEX, `store.ttl` the AGENT_STORE_* TTL settings, each unless
the environment sets it already. A custom store (`store.path`) or any other
key stops the start-up with one line naming it. `checkpointer.ttl` likewise
becomes AGENT_THREAD_TTL.

`AGENT_STORE_INDEX` (JSON: `{"embed", "dims", "fields"}`) is checked here
too, however it was set, so a bad one stops the start-up and never a
request."""

from __future__ import annotations

import json
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

INDEX_KEYS = frozenset({"embed", "dims", "fields"})
TTL_SETTINGS = {
    "default_ttl": "AGENT_STORE_DEFAULT_TTL_MINUTES",
    "refresh_on_read": "AGENT_STORE_REFRESH_ON_READ",
    "sweep_interval_minutes": "AGENT_STORE_SWEEP_INTERVAL_MINUTES",
}
# pgvector's `vector` holds at most 16,000 dimensions.
DIMS_MAX = 16000
FIELDS_MAX = 32
FIELD_MAX = 255
REFUSED = {"path": "store.path (a custom store: agentsite's store is LangGraph's, in its own database)"}


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def refuse_unsupported(
    where: str, spec: dict[str, Any], served: Iterable[str], prefix: str = "", reasons: dict[str, str] | None = None
) -> None:
    """The one start-up line for a langgraph.json's keys that agentsite does
    not serve (`prefix` names where they sit; `reasons` what to say of some):
    refused, never ignored (docs/configuration.md, "langgraph.json")."""
    unknown = sorted(set(spec) - set(served))
    if unknown:
        named = ", ".join((reasons or {}).get(k, f"{prefix}{k}") for k in unknown)
        raise ImproperlyConfigured(f"{where}: not supported by agentsite (yet): {named}")


def check_index(where: str, spec: object) -> dict[str, Any]:
    """`{"embed": str, "dims": int, "fields": [str] | None}`, or one line saying what is wrong."""
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where}: store.index must be an object with embed and dims")
    refuse_unsupported(where, spec, INDEX_KEYS, "store.index.")
    embed, dims, fields = spec.get("embed"), spec.get("dims"), spec.get("fields")
    if not isinstance(embed, str) or not embed.strip():
        raise ImproperlyConfigured(
            f"{where}: store.index.embed must name the embeddings: ./file.py:attr, module.path:attr or provider:model"
        )
    if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= DIMS_MAX:
        raise ImproperlyConfigured(f"{where}: store.index.dims must be a whole number from 1 to {DIMS_MAX}")
    if fields is not None and not (
        isinstance(fields, list)
        and 1 <= len(fields) <= FIELDS_MAX
        and all(isinstance(f, str) and 0 < len(f) <= FIELD_MAX for f in fields)
    ):
        raise ImproperlyConfigured(
            f"{where}: store.index.fields must be 1-{FIELDS_MAX} field paths (strings), or left out for the whole value"
        )
    return {"embed": embed.strip(), "dims": dims, "fields": fields}


def index_setting(raw: str) -> dict[str, Any] | None:
    """AGENT_STORE_INDEX as the settings hold it (None: no semantic search)."""
    if not raw.strip():
        return None
    try:
        spec = json.loads(raw)
    except ValueError:
        raise ImproperlyConfigured("AGENT_STORE_INDEX must be a JSON object (store.index of langgraph.json)") from None
    return check_index("AGENT_STORE_INDEX", spec)


def _ttl(where: str, spec: object, environ: MutableMapping[str, str]) -> None:
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where}: store.ttl must be an object")
    refuse_unsupported(where, spec, TTL_SETTINGS, "store.ttl.")
    for key, name in TTL_SETTINGS.items():
        value = spec.get(key)
        if value is None:
            continue
        if key == "refresh_on_read":
            if not isinstance(value, bool):
                raise ImproperlyConfigured(f"{where}: store.ttl.refresh_on_read must be true or false")
            environ.setdefault(name, "true" if value else "false")
        elif not _number(value) or value < 0:
            raise ImproperlyConfigured(f"{where}: store.ttl.{key} must be a number of minutes, 0 or more")
        else:
            environ.setdefault(name, str(value))


THREAD_TTL_KEYS = ("strategy", "default_ttl", "sweep_interval_minutes", "sweep_limit")
THREAD_TTL_DEFAULTS = {"strategy": "delete", "default_ttl": 0, "sweep_interval_minutes": 0, "sweep_limit": 500}


def check_thread_ttl(where: str, spec: object) -> dict[str, Any]:
    """langgraph-api's ThreadTTLConfig, with its defaults filled in, or one
    line saying what is wrong."""
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where}: checkpointer.ttl must be an object")
    refuse_unsupported(where, spec, THREAD_TTL_KEYS, "checkpointer.ttl.")
    ttl = {**THREAD_TTL_DEFAULTS, **{k: v for k, v in spec.items() if v is not None}}
    if ttl["strategy"] not in ("delete", "keep_latest"):
        raise ImproperlyConfigured(f"{where}: checkpointer.ttl.strategy must be delete or keep_latest")
    for key in ("default_ttl", "sweep_interval_minutes"):
        if not _number(ttl[key]) or ttl[key] < 0:
            raise ImproperlyConfigured(f"{where}: checkpointer.ttl.{key} must be a number of minutes, 0 or more")
    limit = ttl["sweep_limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ImproperlyConfigured(f"{where}: checkpointer.ttl.sweep_limit must be a whole number, 1 or more")
    return ttl


def thread_ttl_setting(raw: str) -> dict[str, Any]:
    """AGENT_THREAD_TTL as langgraph-api reads LANGGRAPH_THREAD_TTL: minutes
    (strategy delete), or the JSON of checkpointer.ttl; empty: no default TTL."""
    raw = raw.strip()
    if not raw:
        return dict(THREAD_TTL_DEFAULTS)
    try:
        spec = json.loads(raw)
    except ValueError:
        raise ImproperlyConfigured("AGENT_THREAD_TTL must be minutes or a JSON object (checkpointer.ttl)") from None
    return check_thread_ttl("AGENT_THREAD_TTL", {"default_ttl": spec} if _number(spec) else spec)


def apply_checkpointer(spec: object, where: str, environ: MutableMapping[str, str]) -> None:
    """`checkpointer.ttl` becomes AGENT_THREAD_TTL unless that is set; any
    other checkpointer key (a custom checkpointer, serde) is refused."""
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where}: checkpointer must be an object")
    refuse_unsupported(where, spec, ("ttl",), "checkpointer.")
    if spec.get("ttl") is not None:
        environ.setdefault("AGENT_THREAD_TTL", json.dumps(check_thread_ttl(where, spec["ttl"])))


def apply_store(spec: object, base: Path, where: str, environ: MutableMapping[str, str]) -> None:
    """The `store` key of the langgraph.json at `base`: its settings put in `environ`."""
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where}: store must be an object")
    refuse_unsupported(where, spec, ("index", "ttl"), "store.", REFUSED)
    if "ttl" in spec:
        _ttl(where, spec["ttl"], environ)
    if spec.get("index") is not None:
        index = check_index(where, spec["index"])
        target, colon, attribute = index["embed"].rpartition(":")
        if colon and (target.endswith(".py") or "/" in target):
            index["embed"] = f"{(base / target).resolve()}:{attribute}"
        environ.setdefault("AGENT_STORE_INDEX", json.dumps(index))
