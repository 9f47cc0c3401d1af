"""Each turn stores the state after it (the messages it added, fields,
stage, the graph's other channels) and points at the turn it started from,
so a session's history is its turns. Existing sessions' transcripts
(`agent_sessions.snapshot`, entries tagged with their turn) are split into
their turns; the head turn gets the session's fields and the intake graph's
`asked_field`."""

from collections import defaultdict

from django.db import migrations, models
from langchain_core.messages import AIMessage, HumanMessage, message_to_dict

_CLASSES = {"user": HumanMessage, "assistant": AIMessage}


def split_snapshots(apps, schema_editor):
    AgentSession = apps.get_model("sessions_app", "AgentSession")
    AgentTurn = apps.get_model("turns_app", "AgentTurn")
    db = schema_editor.connection.alias  # not always `default` (manage.py move_sessions)
    for session in AgentSession.objects.using(db).exclude(snapshot={}).iterator():
        snapshot = session.snapshot or {}
        by_turn = defaultdict(list)
        for n, entry in enumerate(snapshot.get("messages") or []):
            cls = _CLASSES.get(entry.get("role"))
            if cls is None or not entry.get("turn_id"):
                continue
            suffix = "user" if cls is HumanMessage else "assistant"
            message = cls(content=entry.get("content", ""), id=f"{entry['turn_id']}:{suffix}:{n}")
            by_turn[entry["turn_id"]].append(message_to_dict(message))
        committed = list(
            AgentTurn.objects.using(db).filter(session=session, epoch=session.epoch, status="committed").order_by("number")
        )
        parent, count = None, 0
        for turn in committed:
            turn.messages = by_turn.get(str(turn.id), [])
            count += len(turn.messages)
            turn.message_count = count
            turn.parent_id = parent
            turn.graph = session.graph
            parent = turn.id
        if committed:
            head = committed[-1]
            head.fields, head.stage, head.version = session.fields, session.stage, session.version
            head.values = {"asked_field": snapshot.get("asked_field")}
            session.head_turn_id = head.id
            session.save(using=db, update_fields=["head_turn_id"])
        AgentTurn.objects.using(db).bulk_update(
            committed, ["messages", "message_count", "parent_id", "graph", "fields", "stage", "version", "values"]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("turns_app", "0004_turn_events"),
        ("sessions_app", "0002_graph_head_interrupt"),
    ]

    operations = [
        migrations.AddField(model_name="agentturn", name="parent_id", field=models.UUIDField(blank=True, null=True)),
        migrations.AddField(
            model_name="agentturn", name="graph", field=models.CharField(default="intake", max_length=64),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="agentturn",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("committed", "Committed"),
                    ("interrupted", "Interrupted"),
                    ("aborted", "Aborted"),
                ],
                default="pending",
                max_length=16,
            ),
        ),
        migrations.AddField(model_name="agentturn", name="messages", field=models.JSONField(blank=True, default=list)),
        migrations.AddField(model_name="agentturn", name="replaces_history", field=models.BooleanField(default=False)),
        migrations.AddField(model_name="agentturn", name="message_count", field=models.IntegerField(default=0)),
        migrations.AddField(model_name="agentturn", name="fields", field=models.JSONField(blank=True, null=True)),
        migrations.AddField(
            model_name="agentturn", name="stage", field=models.CharField(blank=True, max_length=64, null=True)
        ),
        migrations.AddField(model_name="agentturn", name="values", field=models.JSONField(blank=True, default=dict)),
        migrations.AddField(model_name="agentturn", name="version", field=models.BigIntegerField(blank=True, null=True)),
        migrations.AddField(model_name="agentturn", name="interrupts", field=models.JSONField(blank=True, null=True)),
        migrations.AddField(model_name="agentturn", name="effects", field=models.JSONField(blank=True, null=True)),
        migrations.AddField(
            model_name="agentturn", name="superseded_at", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.AddIndex(
            model_name="agentturn",
            index=models.Index(fields=["session", "-created_at"], name="agent_turn_session_recent"),
        ),
        migrations.RunPython(split_snapshots, migrations.RunPython.noop),
    ]
