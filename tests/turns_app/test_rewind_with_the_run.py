"""A turn that starts from an earlier committed state (edit / regenerate
from the Agent Protocol's history) rewinds the session only by its commit
(docs/turn-protocol.md, "Claim"): nothing of a cancelled or failed turn
commits, its rewind included."""

from __future__ import annotations

import json

import pytest

from langgraph_app.runs import start_point
from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from tests.fixtures.turns import pause_booking
from tests.turns_app.test_interrupts_and_history import checkpoint_rows
from turns_app.execution import TurnRun, await_turn, start_turn
from turns_app.models import AgentTurn
from turns_app.services import turn_abort, turn_cancel, turn_claim
from turns_app.types import FROM_STEP, StartFrom, step_ref

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = {"text": "hello", "client_mode": "chat", "need_form_update": True}


def snapshot(key: str) -> tuple:
    session = AgentSession.objects.get(key=key)
    superseded = sorted(str(t.id) for t in AgentTurn.objects.filter(session=session, superseded_at__isnull=False))
    return session.version, session.head_turn_id, session.interrupt, session.fields, superseded


@pytest.mark.parametrize("ending", ["cancelled", "failed"])
async def test_a_run_from_an_earlier_state_that_does_not_commit_rewinds_nothing(api, script, ending):
    await pause_booking(api, "b1")
    before = await orm(snapshot, key="b1")
    rows = await orm(checkpoint_rows)
    claim = await orm(
        turn_claim, owner="alice", key="b1", request=HELLO, idempotency_key=None, start_from=StartFrom(None, 0)
    )
    # Claimed from the start, while the session still waits on its pause.
    assert claim.parent_id is None and claim.rewinds
    running = await orm(snapshot, key="b1")
    assert (running[0], running[1], running[2]) == before[:3]
    if ending == "cancelled":
        await orm(turn_cancel, owner="alice", key="b1", turn_id=claim.turn_id)
    else:
        await orm(turn_abort, turn_id=claim.turn_id, code="model_error", message="the model failed")
    assert await orm(snapshot, key="b1") == before
    assert await orm(checkpoint_rows) == rows
    # The pause is still there to answer.
    resumed = await api.call("POST", "/sessions/b1/turns", {"resume": {"action": "approve"}})
    assert resumed.status_code == 200, resumed.content
    assert json.loads(resumed.content)["status"] == "committed"


async def test_a_run_from_an_earlier_state_rewinds_with_its_commit(api, script):
    paused = await pause_booking(api, "b1")
    run = await start_turn(owner="alice", key="b1", request=HELLO, idempotency_key=None, start_from=StartFrom(None, 0))
    assert isinstance(run, TurnRun)
    body = json.loads(await await_turn(run))
    version, head, interrupt, fields, superseded = await orm(snapshot, key="b1")
    assert (version, str(head), interrupt, fields) == (paused["version"] + 1, body["turn_id"], None, {})
    assert superseded == [paused["turn_id"]]
    # The pause it left behind is gone with its checkpoints.
    assert await orm(checkpoint_rows) == 0
    refused = await api.call("POST", "/sessions/b1/turns", {"resume": {"action": "approve"}})
    assert refused.status_code == 409 and json.loads(refused.content)["error"]["code"] == "interrupt_resolved"


@pytest.mark.parametrize("kind", ["run", "state update"])
async def test_a_turn_from_a_step_inside_a_run_that_is_cancelled_changes_nothing(api, script, kind):
    """From a checkpoint between a run's steps, as the Agent Protocol names
    it: claimed from the state rebuilt from the step's record, while the
    session still waits on its pause; cancelled, it leaves the version, the
    head, the pause and its checkpoints as they were."""
    paused = await pause_booking(api, "b1")
    turn = await orm(AgentTurn.objects.get, pk=paused["turn_id"])
    inside = [r for r in turn.steps[:-1] if r["source"] == "loop"]
    assert inside, turn.steps
    ref = step_ref(turn.epoch, turn.base_version, turn.number, int(inside[-1]["step"]))
    point = await orm(start_point, owner="alice", key="b1", ref=ref)
    assert (point.start_from.inside, point.origin) == (turn.id, {"turn_id": str(turn.id), "step": inside[-1]["step"]})
    before = await orm(snapshot, key="b1")
    rows = await orm(checkpoint_rows)
    request = HELLO if kind == "run" else {"state": {"values": {"fields": {}}, "as_node": None}, "protocol": {}}
    claim = await orm(
        turn_claim,
        owner="alice",
        key="b1",
        request={**request, FROM_STEP: point.origin},
        idempotency_key=None,
        start_from=point.start_from,
    )
    assert claim.rewinds and claim.interrupt is None and claim.parent_id is None
    assert claim.step_start is not None and claim.step_start.pending == inside[-1]["next"]
    assert await orm(snapshot, key="b1") == before
    await orm(turn_cancel, owner="alice", key="b1", turn_id=claim.turn_id)
    assert await orm(snapshot, key="b1") == before
    assert await orm(checkpoint_rows) == rows
    resumed = await api.call("POST", "/sessions/b1/turns", {"resume": {"action": "approve"}})
    assert resumed.status_code == 200, resumed.content
    assert json.loads(resumed.content)["status"] == "committed"
