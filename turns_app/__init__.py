"""Turns: one chat turn through claim → run → commit, and its stream
(docs/architecture.md, "Where each step of a turn lives").

Read in this order, one module per step:

    types.py          plain data passed between the steps: Claim, Outcome,
                      Replay, TurnEvent (no Django, no LangGraph)
    services/         the database steps, each one short durable transaction
                      that takes the session row's lock first
                      (sessions_app.locking hands out the LockedSession the
                      steps under it take); its __init__ names them all:
        idempotency.py      the Idempotency-Key; a request's digest
        claim.py            turn_claim (a new session's in one statement)
        lease.py            turn_renew_lease; expiring turns whose lease ran out
        event_rows.py       the rows of a turn's events: batches, final event
        commit.py           turn_commit: fenced, one statement or under the lock
        abort.py            turn_abort, turn_cancel, the start-up abort
        turn_lock.py        a turn's session locked, found from the turn
        session_history.py  rewind, fork, purge of a deleted session's turns
        compaction.py       old turns' logs cut to their first and final events
    graph_step.py     the graph adapter: run the graph for a Claim from the last
                      committed state (or its pause), stream its events
    graph_input.py    what the graph is handed: input, Command or state update
    graph_outcome.py  what a finished run proposes to commit (an Outcome)
    session_wait.py   a claim refused by a busy session, made again when the
                      turn holding it ends (woken, not polled)
    known_sessions.py the sessions this process has seen: how a claim starts
    execution.py      the running turn: claim and start as one unit, the
                      asyncio task, the lease keeper, the commit shielded
                      from cancels
    running.py        the turns this process runs now, and what the code
                      around a run may ask of one (RunningTurn)
    observability.py  a turn's log lines and metrics
    shutdown.py       a graceful stop: refuse new turns, drain the running ones
    events.py         the event log: a turn's events, numbered; following a
                      running turn; rebuilding a finished one from its row
    wakeups.py        waking a turn's followers on any process (NOTIFY)
    history.py        a session's history as the chain of its turns
    api.py            the JSON edge (ninja): chat, turn log, transcript
    schemas.py        the JSON edge's request and response bodies
    consumers.py      the SSE edge (Channels): chat stream and re-attach
    health.py         GET /api/health
    checkpoint_tables.py  LangGraph's tables as we use them: thread names,
                      install and schema check, purge, sweep, storage scans
    selectors.py      reads: turn lists, transcript, lookups
    thread_stream_parts.py  a thread-stream run: the graph driven by
                      astream_events(version="v3"), its protocol events logged
    event_stream_parts.py  a run of the stream mode `events`: the graph
                      driven by astream_events(version="v2"), its events logged
    stream_parts.py   LangGraph-native stream parts (values, updates,
                      messages, custom) logged as events, for protocol runs;
                      values stored with their starting conversation by reference
    native_json.py    LangGraph values as JSON, as LangGraph's server writes them
    maintenance.py    the periodic maintenance inside the serving process
    moving/           copying every session to another database
                      (`manage.py move_sessions`; its own map)
    faults.py         fault-injection points for the crash tests
    admin/            turns in the Django admin (read-only; writes go
                      through the services)

Below it: sessions_app (sessions, API keys, the session row's lock and
lease), graphs and core. Above it: langgraph_app (the Agent Protocol) and
agentsite's wiring.
"""
