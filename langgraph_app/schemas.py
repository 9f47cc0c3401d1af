"""Request bodies of the protocol, with the property names and enums of
LangGraph's published OpenAPI (tests/langgraph_api/test_conformance.py
compares them). Unknown properties are ignored, as LangGraph's server does:
a newer SDK adding an optional one keeps working. Every list and string a
client sends is bounded here, before anything else looks at it."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from django.conf import settings
from ninja import Schema
from ninja.schema import DjangoGetter
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from sessions_app.services import METADATA_MAX_BYTES

StreamMode = Literal[
    "values", "messages", "messages-tuple", "tasks", "checkpoints", "updates", "events", "debug", "custom"
]
MultitaskStrategy = Literal["reject", "rollback", "interrupt", "enqueue"]
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
SortOrder = Literal["asc", "desc"]

ID_MAX = 255
PAGE_MAX = 1000
OFFSET_MAX = 1_000_000
LIST_MAX = 100
# A metadata filter (docs/agent-protocol.md, "Limits"): each top-level key
# is one more condition on the query, and the database's cost of a query
# grows faster than its conditions (SQLite also refuses a query past its
# expression limits, which is no storage outage). No stored metadata is
# over METADATA_MAX_BYTES, so no larger filter could match.
FILTER_KEYS_MAX = 64
FILTER_DEPTH_MAX = 8


def _depth(value: Any) -> int:
    """How deep `value` nests (a scalar is 0); iterative, the body's
    nesting is bounded already but never walked by recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _bounded_filter(value: dict[str, Any]) -> dict[str, Any]:
    if len(value) > FILTER_KEYS_MAX:
        raise ValueError(f"a metadata filter has at most {FILTER_KEYS_MAX} keys")
    if _depth(value) > FILTER_DEPTH_MAX:
        raise ValueError(f"a metadata filter nests at most {FILTER_DEPTH_MAX} levels")
    if len(json.dumps(value)) > METADATA_MAX_BYTES:
        raise ValueError(f"a metadata filter is at most {METADATA_MAX_BYTES} bytes of JSON")
    return value


def _bounded_metadata(value: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(value)) > METADATA_MAX_BYTES:
        raise ValueError(f"metadata is at most {METADATA_MAX_BYTES} bytes of JSON")
    return value


def _bounded_value(value: Any, what: str) -> Any:
    raw = value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value
    if len(json.dumps(raw)) > METADATA_MAX_BYTES:
        raise ValueError(f"{what} is at most {METADATA_MAX_BYTES} bytes of JSON")
    return value


MetadataFilter = Annotated[
    dict[str, Any],
    AfterValidator(_bounded_filter),
    Field(
        description=f"each top-level key must be equal; at most {FILTER_KEYS_MAX} keys, "
        f"{FILTER_DEPTH_MAX} levels deep, {METADATA_MAX_BYTES} bytes of JSON"
    ),
]
# Run metadata is stored with the run and answered in every runs list: the
# bound thread metadata has.
Metadata = Annotated[
    dict[str, Any],
    AfterValidator(_bounded_metadata),
    Field(description=f"any JSON object, at most {METADATA_MAX_BYTES} bytes of JSON"),
]


class _In(Schema):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        # ninja's Schema reads any value through getattr, so a JSON array
        # (or a string) would validate as an object with every default.
        raw = value._obj if isinstance(value, DjangoGetter) else value
        if not isinstance(raw, dict | BaseModel):
            raise ValueError("must be a JSON object")
        return value


class ConfigIn(BaseModel):
    """A run's or an assistant's `config`, as LangGraph reads it. A key it
    does not know is refused, not dropped: the graph would never see it."""

    model_config = ConfigDict(extra="forbid")

    configurable: dict[str, Any] | None = Field(None, description="config['configurable'] of the graph's run")
    tags: list[Annotated[StrictStr, Field(max_length=ID_MAX)]] | None = Field(None, max_length=LIST_MAX)
    recursion_limit: StrictInt | None = Field(None, ge=1, le=10_000)
    metadata: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        if not isinstance(value, dict | BaseModel):
            raise ValueError("must be a JSON object")
        return value


Config = Annotated[ConfigIn, AfterValidator(lambda c: _bounded_value(c, "config"))]
Context = Annotated[dict[str, Any], AfterValidator(lambda c: _bounded_value(c, "context"))]


# The base of every body, for the modules of bodies beside this one (store_schemas.py).
ProtocolBody = _In


class CheckpointIn(_In):
    thread_id: StrictStr | None = Field(None, max_length=ID_MAX)
    checkpoint_ns: StrictStr = Field("", max_length=ID_MAX)
    checkpoint_id: StrictStr | None = Field(None, max_length=ID_MAX)
    checkpoint_map: dict[str, Any] | None = None


class CommandIn(_In):
    resume: Any = None
    update: Any = None
    goto: Any = None


class _RunCreate(_In):
    assistant_id: StrictStr = Field(max_length=ID_MAX, description="a graph name or its assistant UUID")
    input: Any = Field(None, description="the graph's input: any channels of its input schema (messages: add_messages)")
    command: CommandIn | None = Field(None, description="a LangGraph Command: resume, update, goto; wins over input")
    metadata: Metadata | None = None
    config: Config | None = Field(None, description="merged over the assistant's; configurable is passed to the graph")
    context: Context | None = Field(None, description="merged over the assistant's; the graph's run context")
    webhook: StrictStr | None = Field(None, max_length=2048, description="not supported")
    interrupt_before: Literal["*"] | list[StrictStr] | None = Field(None, description="pause before these nodes")
    interrupt_after: Literal["*"] | list[StrictStr] | None = Field(None, description="pause after these nodes")
    stream_mode: StreamMode | list[StreamMode] = Field("values", description="the modes whose parts the stream sends")
    feedback_keys: list[StrictStr] | None = Field(None, max_length=LIST_MAX, description="accepted and ignored")
    stream_subgraphs: StrictBool = False
    stream_resumable: StrictBool = Field(False, description="every run is resumable (Last-Event-ID)")
    on_disconnect: Literal["cancel", "continue"] | None = Field(None, description="default AGENT_ON_DISCONNECT")
    after_seconds: float | None = Field(None, description="not supported")
    checkpoint_during: StrictBool | None = Field(None, description="accepted and ignored")
    durability: Literal["sync", "async", "exit"] | None = Field(None, description="accepted and ignored")

    @property
    def stream_modes(self) -> list[str]:
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode)
        return list(dict.fromkeys(modes))


class RunCreateStateless(_RunCreate):
    on_completion: Literal["delete", "keep"] | None = Field(None, description="the throwaway thread; default delete")


class RunCreateStateful(_RunCreate):
    checkpoint: CheckpointIn | None = Field(None, description="a checkpoint from the thread's history: start from it")
    checkpoint_id: StrictStr | None = Field(None, max_length=ID_MAX)
    multitask_strategy: MultitaskStrategy = "enqueue"
    if_not_exists: Literal["create", "reject"] = "reject"


# Ten years, in minutes: a longer TTL is a typo for "none".
THREAD_TTL_MAX = 10 * 365 * 24 * 60


class ThreadTTL(_In):
    strategy: Literal["delete", "keep_latest"] = Field(
        "delete", description="delete the thread, or keep_latest: prune it to its latest state"
    )
    ttl: Annotated[StrictFloat | StrictInt, Field(gt=0, le=THREAD_TTL_MAX)] = Field(description="minutes from now")


def thread_ttl(ttl: ThreadTTL | None, *, default: bool = False) -> dict[str, Any]:
    """A thread's TTL as sessions_app takes it (minutes, strategy); with
    `default` (a thread being created), AGENT_THREAD_TTL's default_ttl when
    the request names none, as langgraph-api's checkpointer.ttl."""
    if ttl is not None:
        return {"ttl_minutes": float(ttl.ttl), "ttl_strategy": ttl.strategy}
    configured = settings.AGENT_THREAD_TTL
    if default and configured["default_ttl"] > 0:
        return {"ttl_minutes": float(configured["default_ttl"]), "ttl_strategy": configured["strategy"]}
    return {}


class ThreadCreate(_In):
    thread_id: StrictStr | None = Field(None, max_length=ID_MAX)
    metadata: Metadata | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    ttl: ThreadTTL | None = None
    supersteps: list[Any] | None = Field(None, description="not supported")


class ThreadPatch(_In):
    metadata: Metadata | None = None
    ttl: ThreadTTL | None = None


class ThreadPruneRequest(_In):
    thread_ids: list[Annotated[StrictStr, Field(max_length=ID_MAX)]] = Field(max_length=PAGE_MAX)
    strategy: Literal["delete", "keep_latest"] = "delete"


class ThreadSearchRequest(_In):
    ids: list[StrictStr] | None = Field(None, max_length=PAGE_MAX)
    metadata: MetadataFilter | None = None
    values: dict[str, Any] | None = Field(None, description="not supported")
    status: ThreadStatus | None = None
    limit: StrictInt = Field(10, ge=1, le=PAGE_MAX)
    offset: StrictInt = Field(0, ge=0, le=OFFSET_MAX)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None
    select: (
        list[
            Literal[
                "thread_id",
                "created_at",
                "updated_at",
                "metadata",
                "config",
                "context",
                "status",
                "values",
                "interrupts",
            ]
        ]
        | None
    ) = None
    extract: dict[str, Any] | None = Field(None, description="not supported")


class ThreadCountRequest(_In):
    metadata: MetadataFilter | None = None
    values: dict[str, Any] | None = Field(None, description="not supported")
    status: ThreadStatus | None = None


class ThreadStateSearch(_In):
    limit: StrictInt = Field(10, ge=1, le=PAGE_MAX)
    before: StrictStr | dict[str, Any] | None = Field(None, description="a checkpoint id, a checkpoint or a config")
    metadata: MetadataFilter | None = None
    checkpoint: CheckpointIn | None = None


class ThreadStateUpdate(_In):
    values: Any = Field(None, description="any channels of the graph, through their reducers")
    checkpoint: CheckpointIn | None = Field(
        None, description="the checkpoint the update applies to: the current one, or an earlier one to fork from"
    )
    checkpoint_id: StrictStr | None = Field(None, max_length=ID_MAX)
    as_node: StrictStr | None = Field(None, max_length=ID_MAX, description="the node the update is written as")


class ThreadStateCheckpointRequest(_In):
    checkpoint: CheckpointIn
    subgraphs: StrictBool = False


class AssistantSearchRequest(_In):
    metadata: MetadataFilter | None = None
    graph_id: StrictStr | None = Field(None, max_length=ID_MAX)
    name: StrictStr | None = Field(None, max_length=ID_MAX)
    limit: StrictInt = Field(10, ge=1, le=PAGE_MAX)
    offset: StrictInt = Field(0, ge=0, le=OFFSET_MAX)
    sort_by: Literal["assistant_id", "created_at", "updated_at", "name", "graph_id"] | None = None
    sort_order: SortOrder | None = None
    select: (
        list[
            Literal[
                "assistant_id",
                "graph_id",
                "name",
                "description",
                "config",
                "context",
                "created_at",
                "updated_at",
                "metadata",
                "version",
            ]
        ]
        | None
    ) = None


class AssistantCountRequest(_In):
    metadata: MetadataFilter | None = None
    graph_id: StrictStr | None = Field(None, max_length=ID_MAX)
    name: StrictStr | None = Field(None, max_length=ID_MAX)


class AssistantCreate(_In):
    assistant_id: StrictStr | None = Field(None, max_length=ID_MAX, description="a UUID; a random one if none")
    graph_id: StrictStr = Field(max_length=ID_MAX, description="a registered graph")
    config: Config | None = None
    context: Context | None = None
    metadata: Metadata | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: StrictStr | None = Field(None, max_length=ID_MAX)
    description: StrictStr | None = Field(None, max_length=4096)


class AssistantPatch(_In):
    graph_id: StrictStr | None = Field(None, max_length=ID_MAX)
    config: Config | None = None
    context: Context | None = None
    metadata: Metadata | None = Field(None, description="merged into the assistant's metadata")
    name: StrictStr | None = Field(None, max_length=ID_MAX)
    description: StrictStr | None = Field(None, max_length=4096)


class AssistantVersionsRequest(_In):
    metadata: MetadataFilter | None = None
    limit: StrictInt = Field(10, ge=1, le=PAGE_MAX)
    offset: StrictInt = Field(0, ge=0, le=OFFSET_MAX)


class AssistantVersionChange(_In):
    version: StrictInt = Field(ge=1, le=2**31 - 1)
