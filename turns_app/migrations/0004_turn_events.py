"""The turn event log (`agent_turn_events`). Turns that finished before it
existed get their stream written down condensed — `turn`, `fields`, the
whole reply as one `delta`, then `done` (or `turn`, `error`) — the final
event keeping the id it had live (`last_event_id`, which this replaces)."""

import json

import django.db.models.deletion
from django.db import migrations, models


def backfill(apps, schema_editor):
    AgentTurn = apps.get_model("turns_app", "AgentTurn")
    AgentTurnEvent = apps.get_model("turns_app", "AgentTurnEvent")
    db = schema_editor.connection.alias  # not always `default` (manage.py move_sessions)
    rows = []
    for turn in AgentTurn.objects.using(db).exclude(status="pending").iterator():
        events = [
            ("turn", json.dumps({"turn_id": str(turn.id), "epoch": turn.epoch, "number": turn.number,
                                 "base_version": turn.base_version}, ensure_ascii=False)),
        ]
        if turn.status == "committed":
            body = json.loads(turn.result)
            events += [
                ("fields", json.dumps({"field_changes": body["field_changes"]}, ensure_ascii=False)),
                ("delta", json.dumps({"text": body["reply"]}, ensure_ascii=False)),
                ("done", turn.result),
            ]
        else:
            events.append(("error", json.dumps(turn.error, ensure_ascii=False)))
        final = max(turn.last_event_id or 0, len(events))
        middle = events[1:-1][: final - 2]
        numbered = [(1, *events[0]), *[(n, *e) for n, e in enumerate(middle, start=2)], (final, *events[-1])]
        rows += [AgentTurnEvent(turn=turn, seq=seq, event=name, data=data) for seq, name, data in numbered]
    AgentTurnEvent.objects.using(db).bulk_create(rows, batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("turns_app", "0003_agentturn_last_event_id")]

    operations = [
        migrations.CreateModel(
            name="AgentTurnEvent",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("seq", models.IntegerField()),
                ("event", models.CharField(max_length=32)),
                ("data", models.TextField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "turn",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="turns_app.agentturn",
                    ),
                ),
            ],
            options={
                "db_table": "agent_turn_events",
                "constraints": [
                    models.UniqueConstraint(fields=("turn", "seq"), name="agent_turn_event_seq_uniq")
                ],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.RemoveField(model_name="agentturn", name="last_event_id"),
    ]
