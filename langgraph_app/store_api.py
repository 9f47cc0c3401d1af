"""The protocol's store: `/store/items` (PUT, GET, DELETE),
`/store/items/search`, `/store/namespaces`, on LangGraph's own store in the
same database (graphs.runtime.store). Each owner has a store of its own:
the namespaces a client names are the owner's (prefixed with the owner's
label inside, never shown). Everything a client sends is bounded before the
store sees it; what is refused is a 422 with a code, and nothing is written
(docs/agent-protocol.md, "Store"). The project's `@auth.on.store`
handlers are asked first, and may rewrite the namespace (a user's own
under the owner's, say); what they leave is bounded as a client's is
(docs/configuration.md, "Resource handlers")."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router
from pydantic import TypeAdapter, ValidationError

from core.errors import ValidationFailed
from graphs.runtime.store import get_store, internal, shown
from langgraph_app.auth import AuthedRequest
from langgraph_app.store_schemas import (
    KEY_MAX,
    LABEL_MAX,
    STORE_DEPTH_MAX,
    Namespace,
    StoreDeleteRequest,
    StoreListNamespacesRequest,
    StorePath,
    StorePutRequest,
    StoreSearchRequest,
    rooted_namespace,
    store_label,
)
from sessions_app.auth import authorize, uses_custom_auth

store_router = Router(tags=["Store"])
_PATH = TypeAdapter(StorePath)
_NAMESPACE = TypeAdapter(Namespace)


async def _allowed(request: AuthedRequest, action: str, value: dict[str, Any]) -> dict[str, Any] | None:
    """The store handler's filter (a search's); `value` as it left it."""
    if not uses_custom_auth():
        return None
    where = await authorize(request.auth, "store", action, value)
    for name in ("namespace", "suffix"):
        if name in value and value[name] is not None:
            value[name] = _checked(name, value[name], rooted=action in ("put", "get", "delete"))
    return where


def _checked(name: str, labels: Any, *, rooted: bool) -> tuple[str, ...]:
    try:
        return tuple(
            (_NAMESPACE if rooted else _PATH).validate_python(list(labels) if isinstance(labels, tuple) else labels)
        )
    except (ValidationError, ValueError) as exc:
        raise ValidationFailed(
            f"{name} (as the auth handler left it): {str(exc).splitlines()[-1].strip()[:200]}"
        ) from None


def _item(found: Any) -> dict[str, Any]:
    return shown(found).dict()


@store_router.put("/store/items", summary="Store or replace an item")
async def put_item(request: AuthedRequest, payload: StorePutRequest):
    value: dict[str, Any] = {"namespace": tuple(payload.namespace), "key": payload.key, "value": payload.value}
    value |= {"index": payload.index, "ttl": payload.ttl}
    await _allowed(request, "put", value)
    store = await get_store()
    await store.aput(
        internal(request.auth.owner, value["namespace"]),
        payload.key,
        payload.value,
        index=payload.index,
        ttl=None if payload.ttl is None else float(payload.ttl),
    )
    return HttpResponse(status=204)


def _query_namespace(raw: str) -> tuple[str, ...]:
    if len(raw) > STORE_DEPTH_MAX * (LABEL_MAX + 1):
        raise ValidationFailed("namespace: too long")
    labels = raw.split(".")
    try:
        return tuple(rooted_namespace([store_label(label) for label in labels]))
    except ValueError as exc:
        raise ValidationFailed(f"namespace: {exc}") from None


@store_router.get("/store/items", summary="Read an item (null when there is none)")
async def get_item(request: HttpRequest, key: str, namespace: str = "", refresh_ttl: bool | None = None):
    authed: AuthedRequest = request  # type: ignore[assignment]
    path = _query_namespace(namespace)
    if not key or len(key) > KEY_MAX or "\x00" in key:
        raise ValidationFailed(f"key: 1-{KEY_MAX} characters, no NUL")
    value: dict[str, Any] = {"namespace": path, "key": key, "refresh_ttl": refresh_ttl}
    await _allowed(authed, "get", value)
    store = await get_store()
    found = await store.aget(internal(authed.auth.owner, value["namespace"]), key, refresh_ttl=refresh_ttl)
    return None if found is None else _item(found)


@store_router.delete("/store/items", summary="Delete an item")
async def delete_item(request: AuthedRequest, payload: StoreDeleteRequest):
    value: dict[str, Any] = {"namespace": tuple(payload.namespace), "key": payload.key}
    await _allowed(request, "delete", value)
    store = await get_store()
    await store.adelete(internal(request.auth.owner, value["namespace"]), payload.key)
    return HttpResponse(status=204)


@store_router.post("/store/items/search", summary="List or search the items under a namespace prefix")
async def search_items(request: AuthedRequest, payload: StoreSearchRequest):
    value: dict[str, Any] = {"namespace": tuple(payload.namespace_prefix or ()), "filter": payload.filter}
    value |= {"limit": payload.limit, "offset": payload.offset, "query": payload.query}
    value["refresh_ttl"] = payload.refresh_ttl
    where = await _allowed(request, "search", value)
    filters = dict(payload.filter or {})
    for name, condition in (where or {}).items():
        # Both filters hold (LangGraph's server ANDs them): a key both name
        # differently matches nothing.
        if name in filters and filters[name] != condition:
            return {"items": []}
        filters[name] = condition
    store = await get_store()
    found = await store.asearch(
        internal(request.auth.owner, value["namespace"]),
        filter=filters or None,
        limit=payload.limit,
        offset=payload.offset,
        query=payload.query,
        refresh_ttl=payload.refresh_ttl,
    )
    return {"items": [_item(item) for item in found]}


@store_router.post("/store/namespaces", summary="List the owner's namespaces")
async def list_namespaces(request: AuthedRequest, payload: StoreListNamespacesRequest):
    value: dict[str, Any] = {
        "namespace": tuple(payload.prefix) if payload.prefix else None,
        "suffix": tuple(payload.suffix) if payload.suffix else None,
        "max_depth": payload.max_depth,
        "limit": payload.limit,
        "offset": payload.offset,
    }
    await _allowed(request, "list_namespaces", value)
    store = await get_store()
    found = await store.alist_namespaces(
        prefix=internal(request.auth.owner, value["namespace"] or []),
        suffix=value["suffix"] or None,
        max_depth=None if payload.max_depth is None else payload.max_depth + 1,
        limit=payload.limit,
        offset=payload.offset,
    )
    return {"namespaces": [list(ns[1:]) for ns in found]}
