"""Turns: one chat turn through claim → run → commit, and its stream.

Read in this order, one module per step:

    types.py        plain data passed between the steps: Claim, Outcome,
                    Replay, TurnEvent (no Django, no LangGraph)
    services.py     the database steps, each one short durable transaction
                    that locks the session row first: turn_claim,
                    turn_renew_lease, turn_commit, turn_abort; expiring dead
                    turns; purging a deleted session's turns
    graph_step.py   the graph adapter: run the graph for a Claim from the last
                    committed state, stream its events, propose an Outcome
    session_wait.py a claim refused by a busy session, made again when the
                    turn holding it ends (woken, not polled)
    execution.py    the running turn: claim and start as one unit, the asyncio
                    task, the lease keeper, the commit shielded from cancels
    events.py       the event log: a turn's events, numbered; following a
                    running turn; rebuilding a finished one from its row
    api.py          the JSON edge (ninja): chat, turn log, transcript
    consumers.py    the SSE edge (Channels): chat stream and re-attach
    health.py       GET /api/health
    checkpoints.py  LangGraph's tables as we use them: thread names, install
                    and schema check, purge, retention, sweep, storage scans
    selectors.py    reads: turn lists, transcript, lookups
    stream_parts.py  LangGraph-native stream parts (values, updates,
                    messages, custom) logged as events, for protocol runs
    langgraph_api/  LangGraph's Agent Protocol at /langgraph/ (its own map)
    admin/          sessions and turns in the Django admin (read-only; writes
                    go through the services)

Below it: sessions_app (sessions, API keys, the session row's lock and lease)
and agentsite's library code (errors, the HTTP front door, the agent). Above
it: agentsite's wiring (settings, urls, routing, the API root, start-up).
"""
