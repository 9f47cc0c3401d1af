"""PostgreSQL: a turn's event writes notify only while someone follows it
from another process (a row of agent_turn_followers, turns_app.wakeups).
Every NOTIFY takes one lock for the whole database at commit and holds it
through the commit's WAL flush: with every commit notifying, the turns of
all processes committed one at a time
(docs/scale.md, "NOTIFY only for followed turns")."""

from django.db import migrations, models

from turns_app.wakeups import CHANNEL


def _function(followed: bool) -> str:
    where = "WHERE w.seq > 1"
    if followed:
        where += ' AND EXISTS (SELECT 1 FROM "agent_turn_followers" f WHERE f."turn_id" = w."turn_id")'
    return f"""
CREATE OR REPLACE FUNCTION agent_turn_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', turn_id::text) FROM (SELECT DISTINCT w.turn_id FROM written w {where}) AS turns;
    RETURN NULL;
END;
$$;
"""


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_function(followed=True))


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_function(followed=False))


class Migration(migrations.Migration):
    dependencies = [("turns_app", "0007_no_notify_for_first_events")]

    operations = [
        migrations.CreateModel(
            name="TurnFollower",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("turn_id", models.UUIDField(db_index=True)),
                ("created_at", models.DateTimeField()),
            ],
            options={"db_table": "agent_turn_followers"},
        ),
        migrations.RunPython(install, uninstall),
    ]
