"""Example graphs for v3 streaming integration tests."""

from .deep_agent import graph as deep_agent
from .streaming_graph import graph as streaming_graph

__all__ = ["deep_agent", "streaming_graph"]
