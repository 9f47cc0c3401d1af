"""Fill the database DATABASE_URL names with N sessions of T committed turns
and E events each (for measuring `manage.py move_sessions` on a big source):

    DATABASE_URL=sqlite:////tmp/big.sqlite3 python manage.py migrate
    DATABASE_URL=sqlite:////tmp/big.sqlite3 python -m bench.move_fill 2000 5 10
"""

from __future__ import annotations

import json
import os
import sys
import uuid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

import django

django.setup()

from django.db import transaction  # noqa: E402

from sessions_app.models import AgentSession  # noqa: E402
from turns_app.models import AgentTurn, AgentTurnEvent  # noqa: E402

TEXT = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 8  # ~450 chars


def fill(sessions: int, turns: int, events: int) -> None:
    for s in range(sessions):
        with transaction.atomic():
            session = AgentSession.objects.create(owner="alice", key=f"big-{s}", version=turns, turn_count=turns)
            parent = None
            rows, evs = [], []
            for n in range(1, turns + 1):
                turn_id = uuid.uuid4()
                messages = [
                    {"type": "human", "data": {"content": f"{n}: {TEXT}", "id": f"{turn_id}:user", "type": "human"}},
                    {"type": "ai", "data": {"content": TEXT, "id": f"{turn_id}:ai", "type": "ai"}},
                ]
                result = json.dumps({"turn_id": str(turn_id), "reply": TEXT, "version": n})
                rows.append(
                    AgentTurn(
                        id=turn_id,
                        session=session,
                        epoch=1,
                        number=n,
                        base_version=n - 1,
                        parent_id=parent,
                        graph="intake",
                        status="committed",
                        request_digest="0" * 64,
                        request={"text": TEXT},
                        result=result,
                        messages=messages,
                        message_count=2 * n,
                        fields={},
                        stage="collecting",
                        version=n,
                    )
                )
                evs += [
                    AgentTurnEvent(turn_id=turn_id, seq=k, event="delta", data=json.dumps({"text": TEXT[:40]}))
                    for k in range(1, events + 1)
                ]
                parent = turn_id
            AgentTurn.objects.bulk_create(rows)
            AgentTurnEvent.objects.bulk_create(evs)
            session.head_turn_id = parent
            session.save(update_fields=["head_turn_id"])


if __name__ == "__main__":
    fill(*(int(a) for a in sys.argv[1:4]))
