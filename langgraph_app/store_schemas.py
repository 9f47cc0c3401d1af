"""Request bodies of the protocol's store (store_api.py), with the property
names of LangGraph's published OpenAPI, bounded before the store sees them
(docs/agent-protocol.md, "Store")."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from graphs.runtime.store import RESERVED_ROOT
from langgraph_app.schemas import OFFSET_MAX, PAGE_MAX, MetadataFilter, ProtocolBody

LABEL_MAX = 255
STORE_DEPTH_MAX = 20
KEY_MAX = 1024
QUERY_MAX = 4096
INDEX_PATHS_MAX = 32
# Ten years, in minutes: a longer TTL is a typo for "none".
TTL_MAX = 10 * 365 * 24 * 60


def store_label(value: str) -> str:
    if not value:
        raise ValueError("a namespace label is not empty")
    if "." in value:
        raise ValueError("a namespace label holds no period ('.')")
    if "\x00" in value:
        raise ValueError("a namespace label holds no NUL character")
    return value


def _store_key(value: str) -> str:
    if "\x00" in value:
        raise ValueError("a key holds no NUL character")
    return value


Label = Annotated[StrictStr, Field(max_length=LABEL_MAX), AfterValidator(store_label)]
Key = Annotated[StrictStr, Field(min_length=1, max_length=KEY_MAX), AfterValidator(_store_key)]
StorePath = Annotated[list[Label], Field(max_length=STORE_DEPTH_MAX)]


def rooted_namespace(namespace: list[str]) -> list[str]:
    if not namespace:
        raise ValueError("a namespace has at least one label")
    if namespace[0] == RESERVED_ROOT:
        raise ValueError(f'a namespace\'s first label is not "{RESERVED_ROOT}"')
    return namespace


IndexPaths = Annotated[list[Annotated[StrictStr, Field(max_length=LABEL_MAX)]], Field(max_length=INDEX_PATHS_MAX)]
Namespace = Annotated[StorePath, AfterValidator(rooted_namespace)]
# What both stores can filter on: the SQLite store puts a key into its SQL
# and takes only these characters; an operator is one of LangGraph's.
STORE_FILTER_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")
STORE_FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def _store_filter(value: dict[str, Any]) -> dict[str, Any]:
    for key, condition in value.items():
        if not STORE_FILTER_KEY.match(key):
            raise ValueError("a filter key is 1-255 characters of A-Z a-z 0-9 _ . -")
        if isinstance(condition, dict):
            unknown = sorted(set(condition) - STORE_FILTER_OPERATORS)
            if unknown or not condition:
                raise ValueError(f"a filter's operators are {', '.join(sorted(STORE_FILTER_OPERATORS))}")
    return value


StoreFilter = Annotated[MetadataFilter, AfterValidator(_store_filter)]
Ttl = Annotated[StrictFloat | StrictInt, Field(gt=0, le=TTL_MAX, description="minutes")]


class StorePutRequest(ProtocolBody):
    namespace: Namespace
    key: Key
    value: dict[str, Any]
    index: Literal[False] | IndexPaths | None = None
    ttl: Ttl | None = None


class StoreDeleteRequest(ProtocolBody):
    namespace: Namespace
    key: Key


class StoreSearchRequest(ProtocolBody):
    namespace_prefix: StorePath | None = None
    filter: StoreFilter | None = None
    limit: StrictInt = Field(10, ge=1, le=PAGE_MAX)
    offset: StrictInt = Field(0, ge=0, le=OFFSET_MAX)
    query: StrictStr | None = Field(None, max_length=QUERY_MAX)
    refresh_ttl: StrictBool | None = None


class StoreListNamespacesRequest(ProtocolBody):
    prefix: StorePath | None = None
    suffix: StorePath | None = None
    max_depth: StrictInt | None = Field(None, ge=1, le=STORE_DEPTH_MAX)
    limit: StrictInt = Field(100, ge=1, le=PAGE_MAX)
    offset: StrictInt = Field(0, ge=0, le=OFFSET_MAX)
