"""LangGraph's Agent Protocol (the Agent Server API the LangGraph SDKs,
useStream and agent-chat-ui speak) at /langgraph/, over the same services
as /api/: assistants are registered graphs, threads are sessions, runs are
turns, checkpoints are committed states. Every guarantee of a turn holds
for a run: `end` only after the commit, fencing, idempotency, tombstones.

    ids.py         assistant ids (graph names or their UUIDs), checkpoint ids
    schemas.py     request bodies (LangGraph's property names and enums)
    errors.py      errors as {"detail", "code"} with the statuses the SDKs map
    auth.py        the API key from x-api-key (or Authorization: Bearer)
    threads.py     Thread, ThreadState and history from a session's turns
    runs.py        a run body -> a turn; Run objects; waiting for an outcome
    stream.py      a turn's event log -> the protocol's SSE events
    consumers.py   the SSE endpoints (Channels consumers)
    api.py         the JSON endpoints (a NinjaAPI mounted at /langgraph/)
    openapi.py     the SSE endpoints in the OpenAPI document
    cors.py        CORS for browser clients on another origin

The LangGraph-native stream parts a protocol run asks for are logged by the
graph step (turns_app.stream_parts).
"""
