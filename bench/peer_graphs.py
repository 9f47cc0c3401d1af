"""The bench's graphs as compiled graphs, for the peers' config files
(langgraph.json, aegra.json: `bench/peer_graphs.py:chat`); each server
brings its own checkpointer. The chat graph's model is agentsite's offline
model with no token delay, as agentsite's bench servers run it."""

from __future__ import annotations

from bench.graphs import build_chat_graph, build_tool_graph
from graphs.intake.offline import OfflineChatModel

chat = build_chat_graph(model=OfflineChatModel())
tools = build_tool_graph()
