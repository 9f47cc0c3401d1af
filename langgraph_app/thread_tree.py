"""`agent.getTree`: the agents of the thread's newest run as LangGraph's
server builds the tree — the root graph, and each subgraph namespace its
lifecycle events named, with its latest status and graph name
(docs/agent-protocol.md, "Thread streams")."""

from __future__ import annotations

import json
from typing import Any

from core.asyncdb import db
from turns_app.selectors import newest_turn_lifecycle

# A turn's status → the root agent's (LangGraph's AgentStatus).
ROOT_STATUS = {"pending": "running", "committed": "completed", "interrupted": "interrupted", "aborted": "failed"}
# At most this many agents in one tree: a hostile graph could name many.
MAX_NODES = 1000


def _tree(*, owner: str, key: str, graph: str) -> dict[str, Any]:
    found = newest_turn_lifecycle(owner=owner, key=key)
    root: dict[str, Any] = {"namespace": [], "status": "started", "graph_name": graph}
    if found is None:
        return root
    status, rows = found
    root["status"] = ROOT_STATUS.get(status, "started")
    nodes: dict[tuple[str, ...], dict[str, Any]] = {(): root}
    for row in rows:
        logged = json.loads(row)
        data = logged.get("data") if isinstance(logged, dict) else None
        namespace = logged.get("namespace") if isinstance(logged, dict) else None
        if not isinstance(data, dict) or not isinstance(namespace, list) or not namespace:
            continue
        path = tuple(str(s) for s in namespace)
        node = nodes.get(path)
        if node is None:
            if len(nodes) >= MAX_NODES:
                continue
            name = data.get("graph_name")
            node = {"namespace": list(path), "status": "started", "graph_name": name or path[-1].split(":")[0]}
            nodes[path] = node
        if isinstance(data.get("event"), str):
            node["status"] = data["event"]
        if isinstance(data.get("graph_name"), str):
            node["graph_name"] = data["graph_name"]
    # Parents first (shorter paths), so each child finds its parent, or the
    # nearest ancestor that was named.
    for path in sorted(nodes, key=len):
        if not path:
            continue
        parent = next(nodes[path[:n]] for n in range(len(path) - 1, -1, -1) if path[:n] in nodes)
        parent.setdefault("children", []).append(nodes[path])
    return root


async def tree_of(*, owner: str, key: str, graph: str) -> dict[str, Any]:
    return await db(_tree, owner=owner, key=key, graph=graph)
