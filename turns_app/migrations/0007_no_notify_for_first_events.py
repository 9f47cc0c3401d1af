"""PostgreSQL: a turn's first event (`turn`, seq 1, written by its claim)
notifies nobody. No one can follow a turn before its claim committed — a
follower learns the id from that claim — so the notification only woke
every serving process's listener for nothing, and every NOTIFY serializes
its transaction's commit on PostgreSQL's notification queue
(docs/scale.md, "NOTIFY only for followed turns")."""

from django.db import migrations

from turns_app.wakeups import CHANNEL


def _function(where: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION agent_turn_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', turn_id::text) FROM (SELECT DISTINCT turn_id FROM written{where}) AS turns;
    RETURN NULL;
END;
$$;
"""


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_function(" WHERE seq > 1"))


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_function(""))


class Migration(migrations.Migration):
    dependencies = [("turns_app", "0006_turn_events_notify")]

    operations = [migrations.RunPython(install, uninstall)]
