"""The protocol's system endpoints: server information and liveness."""

from __future__ import annotations

import asyncio
import importlib.metadata

from django.http import HttpRequest
from ninja import Router

from core.asyncdb import db
from core.errors import StorageUnavailable
from langgraph_app.params import flag
from turns_app.selectors import database_answers

meta = Router(tags=["System"])


@meta.get("/info", auth=None, summary="Server information (reachable without a key)")
async def info(request: HttpRequest):
    return {
        "version": "agentsite-1.0",
        "langgraph_py_version": importlib.metadata.version("langgraph"),
        "flags": {
            "assistants": True,
            "crons": False,
            "langsmith": False,
            "langsmith_tracing_replicas": False,
            # Agent2Agent at /a2a/{assistant_id} (docs/agent-protocol.md, "A2A").
            "a2a": True,
            # The Model Context Protocol at /langgraph/mcp (docs/agent-protocol.md, "MCP").
            "mcp": True,
        },
        "host": {"kind": "self-hosted", "project_id": None, "revision_id": None, "tenant_id": None},
        "metadata": {},
    }


@meta.get("/ok", auth=None, summary="Liveness; ?check_db=1 also asks the database")
async def ok(request: HttpRequest):
    if flag(request, "check_db"):
        try:
            await asyncio.wait_for(db(database_answers), 3)
        except Exception:
            raise StorageUnavailable() from None
    return {"ok": True}
