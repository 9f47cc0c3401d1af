"""The graphs sessions can run, registered by dotted path the way
`langgraph.json` does it:

    AGENT_GRAPHS="intake=graphs.intake.graph:build_intake_graph,booking=graphs.booking.graph:build_booking_graph"

Each entry names a compiled LangGraph graph, a factory called with
`model=` (the AGENT_MODEL chat model) and `checkpointer=`, or a factory as
langgraph-api calls it (`config` and/or a `ServerRuntime`: factories.py); a
path may be a file (`/abs/path/graph.py:attr`, as langgraph.json gives it). The contract
(docs/graphs.md, "Bring your own graph"): the graph's state has a `messages` channel
(`add_messages`); `fields` and `stage` channels, when present, carry the
session's typed business fields; nothing else is asked of it (a graph
without `messages` runs under /langgraph/ only: its input is its own). The
setting is parsed in core.langgraph_json (`AGENT_GRAPHS`, a dict name -> path).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import weakref
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from graphs.runtime import factories
from graphs.runtime.chat_models import build_model
from graphs.runtime.turn_store import turn_store

# Channels the turn protocol fills from the session row and reads back.
MESSAGES, FIELDS, STAGE, FORM, REJECTED = "messages", "fields", "stage", "form", "rejected"
BUSINESS_CHANNELS = frozenset({FIELDS, STAGE, FORM, REJECTED})


class UnknownGraph(LookupError):
    pass


def graph_names() -> list[str]:
    return list(settings.AGENT_GRAPHS)


def check_graph_name(name: str) -> str:
    if name not in settings.AGENT_GRAPHS:
        raise UnknownGraph(name)
    return name


def _load(name: str) -> Any:
    path = settings.AGENT_GRAPHS[check_graph_name(name)]
    module, _, attr = path.rpartition(":")
    try:
        if module.endswith(".py"):
            return getattr(_file_module(name, module), attr)
        return import_string(f"{module}.{attr}")
    except (ImportError, AttributeError, OSError) as exc:
        raise ImproperlyConfigured(f"AGENT_GRAPHS: {name}={path} cannot be imported: {exc}") from exc


def _file_module(name: str, file: str) -> Any:
    """A graph's module by file, as langgraph-api loads it; once per process
    (under a name of its own, in sys.modules, so its classes pickle)."""
    module_name = f"agentsite_graph_{name.replace('-', '_')}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"{file} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def build_graph(name: str, *, checkpointer: BaseCheckpointSaver | None) -> Pregel:
    """A compiled graph for `name`, on `checkpointer`, checked against the contract."""
    target = _load(name)
    if isinstance(target, Pregel):
        graph = target.copy(update={"checkpointer": checkpointer})
    elif callable(target) and factories.is_ours(target):
        graph = target(model=build_model(), checkpointer=checkpointer)
    elif callable(target):
        graph = factories.call_for_read(target, f"AGENT_GRAPHS: {name}").copy(update={"checkpointer": checkpointer})
    else:
        raise ImproperlyConfigured(f"AGENT_GRAPHS: {name} is neither a compiled graph nor a factory")
    if not isinstance(graph, Pregel):
        raise ImproperlyConfigured(
            f"AGENT_GRAPHS: the factory of {name} returned {type(graph).__name__}, not a compiled graph"
        )
    return graph


@dataclass(frozen=True)
class GraphShape:
    """What the runner needs to know of a graph: which of its channels it fills."""

    input_channels: frozenset[str]
    channels: frozenset[str]
    nodes: frozenset[str] = frozenset()
    # The graph's context_schema (a run's `context` is built into it), or None.
    context_schema: Any = None

    @property
    def has_fields(self) -> bool:
        return FIELDS in self.channels


def shape_of(graph: Pregel) -> GraphShape:
    """The state channels a graph reads as input and keeps (a StateGraph's
    schemas; LangGraph's own bookkeeping channels left out)."""
    builder = getattr(graph, "builder", None)
    schemas = getattr(builder, "schemas", None)
    state: set[str] = set()
    inputs: set[str] = set()
    if builder is not None and schemas:
        state = set(schemas[builder.state_schema])
        inputs = set(schemas[builder.input_schema])
    if not state:  # not a StateGraph: its declared channels are the state
        state = {c for c in graph.channels if not c.startswith(("__", "branch:"))}
        inputs = state
    nodes = frozenset(n for n in graph.nodes if not n.startswith("__"))
    return GraphShape(
        input_channels=frozenset(inputs),
        channels=frozenset(state),
        nodes=nodes,
        context_schema=getattr(graph, "context_schema", None),
    )


@functools.lru_cache(maxsize=64)
def _shape_by_name(name: str, path: str) -> GraphShape:
    return shape_of(build_graph(name, checkpointer=None))


def shape_for(name: str) -> GraphShape:
    """A registered graph's shape, without a checkpointer (what the front
    door checks a request against); built once per graph."""
    return _shape_by_name(name, settings.AGENT_GRAPHS[check_graph_name(name)])


# Compiled graphs, one per (name, checkpointer): compiling per turn is wasted
# work, and a checkpointer belongs to exactly one event loop.
_compiled: weakref.WeakKeyDictionary[BaseCheckpointSaver, dict[str, Pregel]] = weakref.WeakKeyDictionary()


def is_run_factory(name: str) -> bool:
    """A factory langgraph-api's way: called again for every run."""
    target = _load(name)
    return not isinstance(target, Pregel) and callable(target) and not factories.is_ours(target)


async def graph_for_run(name: str, checkpointer: BaseCheckpointSaver, config: Any, context: Any) -> Pregel:
    """The graph a run runs: a langgraph-api factory called with the run's
    config and an execution runtime, or the compiled graph graph_for keeps."""
    if not is_run_factory(name):
        return graph_for(name, checkpointer)
    store = turn_store()
    built = await factories.call_for_run(_load(name), f"AGENT_GRAPHS: {name}", config, context, store)
    return built.copy(update={"checkpointer": checkpointer, "store": store})


def graph_for(name: str, checkpointer: BaseCheckpointSaver) -> Pregel:
    graphs = _compiled.setdefault(checkpointer, {})
    graph = graphs.get(name)
    if graph is None:
        graph = build_graph(name, checkpointer=checkpointer)
        # The graph's store (`get_store()`, `runtime.store`) is the owner's
        # durable store, its writes staged until the turn commits.
        graph.store = turn_store()
        graphs[name] = graph
    return graph


@functools.cache
def _fills_fields(name: str, path: str) -> bool:
    return FIELDS in build_graph(name, checkpointer=None).channels


def fills_fields(name: str) -> bool:
    """Whether graph `name` has a `fields` channel: only then does a session
    running it carry a form (built once per registration)."""
    return _fills_fields(name, settings.AGENT_GRAPHS[check_graph_name(name)])


def describe(name: str) -> dict[str, Any]:
    """Name and JSON Schemas of a registered graph (GET /api/graphs)."""
    graph = build_graph(name, checkpointer=None)
    doc = (getattr(_load(name), "__doc__", None) or "").strip().split("\n\n")[0]
    return {
        "name": name,
        "description": " ".join(doc.split()),
        "input_schema": _schema(graph.get_input_jsonschema),
        "state_schema": _schema(graph.get_output_jsonschema),
        "fields": FIELDS in graph.channels,
    }


def _schema(get) -> dict[str, Any]:
    try:
        return get()
    except Exception as exc:  # a channel type pydantic cannot describe
        return {"description": f"no JSON Schema: {type(exc).__name__}"}


def check_registry() -> None:
    """Start-up: every registered graph builds and keeps the contract, and
    AGENT_GRAPH is one of them."""
    if settings.AGENT_GRAPH not in settings.AGENT_GRAPHS:
        raise ImproperlyConfigured(
            f"AGENT_GRAPH={settings.AGENT_GRAPH!r} is not in AGENT_GRAPHS ({', '.join(graph_names())})"
        )
    for name in graph_names():
        # Its shape kept too: a claim reads it (turns_app.services.claim).
        shape_for(name)
