"""What a turn hands its graph: the graph's input, a `Command`, or a state
update, built from the turn's request and the committed state it starts
from (docs/turn-protocol.md, "Run").

A turn's request is one of

* `{"text", <request options>}` — one new user message (/api/'s turn, and a
  protocol run whose input is just that); its message id is `<turn>:user`;
* `{"input": {...}}` — the graph's input as the Agent Protocol sends it:
  any channels of the graph's input schema, `messages` with
  `add_messages` semantics (a message's own id is kept; one without gets
  `<turn>:<its index>`); `{"input": null}` goes on from a pause (with
  nothing waiting, it changes nothing);
* `{"resume": …}` or `{"command": {"resume"?, "update"?, "goto"?}}` — a
  LangGraph `Command`, its `goto` a list of node names and Sends
  (`{"node", "input"}`: JSON, as the request is stored and replayed);
* `{"state": {"values", "as_node"}}` — a state update (`aupdate_state`).

A turn that starts from a pause runs on the paused run's checkpoint, so
LangGraph applies what it is given exactly as its server would (a new
input drops the pending interrupt and starts from the paused state). Any
other turn runs on a checkpoint thread of its own: plain input goes in as
the whole committed state with the input folded in by each channel's own
reducer (LangGraph's channel objects), so nothing is read or written to
start it; a command or a state update first seeds the thread with the
committed state (`abulk_update_state`), then LangGraph applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.channels.base import BaseChannel
from langgraph.constants import END
from langgraph.pregel import Pregel
from langgraph.types import Command, Send, StateUpdate

from graphs.runtime.registry import FIELDS, FORM, MESSAGES, STAGE, GraphShape
from turns_app.types import REQUEST_OPTIONS, Claim

# Channels the protocol itself fills or reads: not carried as "other values".
NOT_CARRIED = frozenset({MESSAGES, FIELDS, STAGE, FORM})


@dataclass(frozen=True)
class StateWrite:
    """A state update to apply as `as_node` (None: as LangGraph infers it);
    no values and no node: none, the state as it is."""

    values: Any
    as_node: str | None


def request_kind(request: dict[str, Any]) -> str:
    """text | input | resume | command | state."""
    for kind in ("text", "resume", "command", "state"):
        if kind in request:
            return kind
    return "input"


def with_message_ids(messages: Any, turn_id: Any) -> list[BaseMessage]:
    """Input messages as message objects, each keeping its own id; one
    without gets `<turn>:<index>`, stable for the turn (a retry of the run
    gives the same ids, and so does its history)."""
    converted = convert_to_messages(messages if isinstance(messages, list) else [messages])
    for index, message in enumerate(converted):
        if not message.id:
            message.id = f"{turn_id}:{index}"
    return converted


def client_input(claim: Claim) -> dict[str, Any] | None:
    """The graph input the turn's request carries (text or input kinds)."""
    request = claim.request
    if "text" in request:
        human = HumanMessage(content=request["text"], id=f"{claim.turn_id}:user")
        return {**{k: request[k] for k in REQUEST_OPTIONS if k in request}, MESSAGES: [human]}
    given = request.get("input")
    if given is None:
        return None
    given = dict(given)
    if MESSAGES in given:
        given[MESSAGES] = with_message_ids(given[MESSAGES], claim.turn_id)
    return given


def from_row(claim: Claim, shape: GraphShape) -> dict[str, Any]:
    # Fields, form and stage come from the session row, not the graph's last
    # state: set-fields changes the row between turns.
    business = {FORM: claim.form, FIELDS: claim.fields, STAGE: claim.stage}
    return {k: v for k, v in business.items() if k in shape.input_channels}


def committed_state(claim: Claim, shape: GraphShape, prior: list[BaseMessage]) -> dict[str, Any]:
    """The state the turn starts from, as the graph's input channels."""
    carried = {k: v for k, v in claim.head_values.items() if k in shape.input_channels and k not in NOT_CARRIED}
    state = {**carried, **from_row(claim, shape)}
    if MESSAGES in shape.channels:  # a graph of its own input may have none
        state[MESSAGES] = list(prior)
    return state


def folded(graph: Pregel, state: dict[str, Any], given: dict[str, Any], shape: GraphShape) -> dict[str, Any]:
    """`given` applied to `state` by each channel's own reducer, as LangGraph
    applies an input to a thread's state (`add_messages` for `messages`)."""
    out = dict(state)
    for name, value in given.items():
        spec = graph.channels.get(name)
        if not isinstance(spec, BaseChannel) or name not in shape.input_channels:
            continue  # as LangGraph does: a key the input schema lacks is not written
        # The graph's own channel objects are empty: a copy is one with no value.
        channel = spec.from_checkpoint(out[name]) if name in out else spec.copy()
        channel.update([value])
        out[name] = channel.get() if channel.is_available() else None
    return out


def sent(entry: str | dict[str, Any]) -> str | Send:
    """A goto entry of a stored request: a node name, or a Send's JSON."""
    return entry if isinstance(entry, str) else Send(entry["node"], entry["input"])


def command_of(
    request: dict[str, Any],
    row: dict[str, Any],
    *,
    resumable: bool,
    pending: list[str | dict[str, Any]] | None = None,
) -> Command | None:
    """The request's Command, the session row's business channels in its
    update (the client's own update wins). `pending`: the tasks the state
    it starts from had left to run, which a Command runs beside its goto
    (LangGraph resumes a checkpoint's tasks under a Command)."""
    if "resume" in request:
        return Command(resume=request["resume"], update=row or None)
    spec = request.get("command") or {}
    update: Any = spec.get("update")
    if isinstance(update, list):  # JSON has no tuples: LangGraph reads (channel, value) pairs
        update = [tuple(pair) for pair in update]
    if row:
        if update is None:
            update = row
        elif isinstance(update, dict):
            update = {**row, **update}
        else:  # [(key, value), …]
            named = {pair[0] for pair in update}
            update = [*((k, v) for k, v in row.items() if k not in named), *update]
    goto = spec.get("goto") or []
    goto = [goto] if isinstance(goto, str) else [sent(entry) for entry in goto]
    # The step's sent tasks run too, unless the command sends: its Sends
    # take their place in LangGraph's TASKS channel, as when LangGraph runs
    # a command from that checkpoint.
    sends = any(isinstance(entry, Send) for entry in goto)
    left = [sent(p) for p in pending or () if isinstance(p, str) or not sends]
    kwargs: dict[str, Any] = {"update": update, "goto": [*left, *goto]}
    if "resume" in spec and resumable:
        kwargs["resume"] = spec["resume"]
    if kwargs["update"] is None and not kwargs["goto"] and "resume" not in kwargs:
        return None
    return Command(**kwargs)


def first_node(graph: Pregel) -> str:
    return next(name for name in graph.nodes if name != "__start__")


async def seed(graph: Pregel, config: RunnableConfig, state: dict[str, Any]) -> None:
    """Start the turn's own thread at the committed state, with nothing
    left to run: written as if a node produced it, then its tasks cleared
    (LangGraph's `as_node=END` with no values)."""
    await graph.abulk_update_state(config, [[StateUpdate(state, first_node(graph))], [StateUpdate(None, END)]])


async def prepare(
    claim: Claim, graph: Pregel, shape: GraphShape, prior: list[BaseMessage], config: RunnableConfig
) -> tuple[Any, StateWrite | None]:
    """What to run: (the input or Command for `astream`, None) or (None, the
    state update to apply). Seeds the turn's own thread where LangGraph
    must apply the request to the committed state itself."""
    kind = request_kind(claim.request)
    paused = claim.interrupt is not None
    row = from_row(claim, shape)
    # From a step inside an earlier run (`prior` is then its messages): the
    # tasks it had left to run are run by a Command or no input, as LangGraph
    # resumes a checkpoint's; a new input drops them, as there.
    step = claim.step_start
    pending = step.pending if step is not None else []
    if kind == "state":
        spec = claim.request["state"]
        values = spec.get("values")
        if isinstance(values, dict) and MESSAGES in values:
            values = {**values, MESSAGES: with_message_ids(values[MESSAGES], claim.turn_id)}
        if not paused:
            await seed(graph, config, committed_state(claim, shape, prior))
        as_node = spec.get("as_node") or (step.as_node if step is not None and values is not None else None)
        return None, StateWrite(values, as_node)
    if kind in ("resume", "command"):
        command = command_of(claim.request, row, resumable=paused, pending=pending)
        if not paused:
            await seed(graph, config, committed_state(claim, shape, prior))
        return command, None
    given = client_input(claim)
    if paused:
        if given is None:  # go on from the pause (a breakpoint, or `update_state` with tasks to run)
            return (Command(update=row) if row else None), None
        return {**row, **given}, None
    if given is None:
        await seed(graph, config, committed_state(claim, shape, prior))
        if pending:  # the tasks the step had left
            return Command(goto=[sent(p) for p in pending]), None
        return None, StateWrite(None, None)  # nothing waiting: nothing runs, nothing changes
    state = committed_state(claim, shape, prior)
    if kind == "text":
        # One new message with an id of its own: `add_messages` would append
        # it, so it is appended, without the reducer's pass over the whole
        # conversation (the hot path of /api/).
        state[MESSAGES] = [*prior, *given.pop(MESSAGES)]
    return folded(graph, state, given, shape), None
