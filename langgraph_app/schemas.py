"""Request bodies of the protocol, with the property names and enums of
LangGraph's published OpenAPI (tests/langgraph_api/test_conformance.py
compares them). Unknown properties are ignored, as LangGraph's server does:
a newer SDK adding an optional one keeps working. Every list and string a
client sends is bounded here, before anything else looks at it."""

from __future__ import annotations

from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool, StrictStr

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


class _In(Schema):
    model_config = ConfigDict(extra="ignore")


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
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = Field(None, description="accepted and ignored")
    context: dict[str, Any] | None = Field(None, description="accepted and ignored")
    webhook: StrictStr | None = Field(None, max_length=2048, description="not supported")
    interrupt_before: Literal["*"] | list[StrictStr] | None = Field(None, description="pause before these nodes")
    interrupt_after: Literal["*"] | list[StrictStr] | None = Field(None, description="pause after these nodes")
    stream_mode: StreamMode | list[StreamMode] = Field(
        "values", description="values, updates, messages-tuple and custom stream; the others send nothing"
    )
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


class ThreadCreate(_In):
    thread_id: StrictStr | None = Field(None, max_length=ID_MAX)
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    ttl: Any = Field(None, description="not supported")
    supersteps: list[Any] | None = Field(None, description="not supported")


class ThreadPatch(_In):
    metadata: dict[str, Any] | None = None
    ttl: Any = Field(None, description="not supported")


class ThreadSearchRequest(_In):
    ids: list[StrictStr] | None = Field(None, max_length=PAGE_MAX)
    metadata: dict[str, Any] | None = Field(None, description="each top-level key must be equal")
    values: dict[str, Any] | None = Field(None, description="not supported")
    status: ThreadStatus | None = None
    limit: int = Field(10, ge=1, le=PAGE_MAX)
    offset: int = Field(0, ge=0, le=OFFSET_MAX)
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
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = Field(None, description="not supported")
    status: ThreadStatus | None = None


class ThreadStateSearch(_In):
    limit: int = Field(10, ge=1, le=PAGE_MAX)
    before: StrictStr | dict[str, Any] | None = Field(None, description="a checkpoint id, a checkpoint or a config")
    metadata: dict[str, Any] | None = None
    checkpoint: CheckpointIn | None = None


class ThreadStateUpdate(_In):
    values: Any = Field(None, description="any channels of the graph, through their reducers")
    checkpoint: CheckpointIn | None = Field(None, description="the state you read: the update applies only to it")
    checkpoint_id: StrictStr | None = Field(None, max_length=ID_MAX)
    as_node: StrictStr | None = Field(None, max_length=ID_MAX, description="the node the update is written as")


class ThreadStateCheckpointRequest(_In):
    checkpoint: CheckpointIn
    subgraphs: StrictBool = False


class AssistantSearchRequest(_In):
    metadata: dict[str, Any] | None = None
    graph_id: StrictStr | None = Field(None, max_length=ID_MAX)
    name: StrictStr | None = Field(None, max_length=ID_MAX)
    limit: int = Field(10, ge=1, le=PAGE_MAX)
    offset: int = Field(0, ge=0, le=OFFSET_MAX)
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
    metadata: dict[str, Any] | None = None
    graph_id: StrictStr | None = Field(None, max_length=ID_MAX)
    name: StrictStr | None = Field(None, max_length=ID_MAX)
