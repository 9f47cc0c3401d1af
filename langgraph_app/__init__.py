"""LangGraph's Agent Protocol (the Agent Server API the LangGraph SDKs,
useStream and agent-chat-ui speak) at /langgraph/, over the same services
as /api/: assistants are graphs with a configuration (assistants_app),
threads are sessions, runs are
turns, checkpoints are committed states. Every guarantee of a turn holds
for a run: `end` only after the commit, fencing, idempotency, tombstones.
A façade: it reads and writes only through turns_app's, assistants_app's
and sessions_app's public services and selectors (docs/agent-protocol.md).

    ids.py             system assistant ids (graph names or their UUIDs), checkpoint ids
    schemas.py         request bodies (LangGraph's property names and enums)
    errors.py          the protocol's wording of some errors (rendered by core.http.errors)
    auth.py            the API key from x-api-key (or Authorization: Bearer)
    params.py          query parameters: flags, pages, select
    threads.py         Thread, ThreadState and their states from a session's turns
    history.py         a thread's history: filtered first, built and paged by size
    run_input.py       a run body -> a turn request (input, command, breakpoints, checkpoint)
    run_config.py      a run's assistant, and its config and context merged with the run's
    state_update.py    POST /threads/{id}/state: a state update as a turn
    runs.py            starting a run (a turn); waiting for its outcome
    run_records.py     Run objects: status, JSON, list, get, cancel
    stream.py          a turn's event log -> the protocol's SSE events
    consumers.py       the SSE endpoints (Channels consumers)
    thread_commands.py POST /threads/{id}/commands: the thread-stream protocol's commands
    thread_events.py   a thread's runs as thread-stream protocol events (seq, event_id, since)
    thread_socket.py   the thread-stream protocol over WebSocket (commands and subscriptions)
    thread_tree.py     agent.getTree: the newest run's agents from its lifecycle events
    api.py             the NinjaAPI mounted at /langgraph/, and its error wiring
    system_api.py      JSON endpoints: /info, /ok
    assistants_api.py  JSON endpoints: assistants (create, patch, versions, delete; search)
    threads_api.py     JSON endpoints: threads, their state and history
    thread_lifecycle_api.py  JSON endpoints: prune threads; a thread's storage
    runs_api.py        JSON endpoints: runs (start in the background, wait, join, cancel)
    openapi.py         the SSE endpoints in the OpenAPI document
    mcp_server.py      /langgraph/mcp: the Model Context Protocol (the mcp SDK, stateless), its door
    mcp_tools.py       MCP's tools: each assistant, a call a run (runs.start_run)
    cors.py            CORS for browser clients on another origin
    custom_app.py      a project's own Starlette app (http.app), its routes first

The LangGraph-native stream parts a protocol run asks for travel in its
claim (turns_app.types.Claim.stream_modes) and are logged by the graph step.
"""
