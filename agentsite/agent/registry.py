"""Graph registry: `AGENT_GRAPH` names one of `GRAPHS`."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from agentsite.agent.intake import build_intake_graph

GraphBuilder = Callable[..., CompiledStateGraph]

GRAPHS: dict[str, GraphBuilder] = {"intake": build_intake_graph}


def build_graph(
    name: str | None, *, model: BaseChatModel, checkpointer: BaseCheckpointSaver | None
) -> CompiledStateGraph:
    name = name or settings.AGENT_GRAPH
    builder = GRAPHS.get(name)
    if builder is None:
        raise ImproperlyConfigured(f"AGENT_GRAPH={name!r} is not one of: {', '.join(sorted(GRAPHS))}")
    return builder(model=model, checkpointer=checkpointer)
