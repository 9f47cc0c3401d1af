"""PostgreSQL: every insert into agent_turn_events notifies the turn ids it
wrote, from a statement-level trigger. The writer no longer sends a
`pg_notify` statement of its own (a round trip per event write, docs/scale.md,
"NOTIFY only for followed turns"),
and no writer can forget to. SQLite wakes its followers in-process
(turns_app.wakeups)."""

from django.db import migrations

from turns_app.wakeups import CHANNEL

INSTALL = f"""
CREATE OR REPLACE FUNCTION agent_turn_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', turn_id::text) FROM (SELECT DISTINCT turn_id FROM written) AS turns;
    RETURN NULL;
END;
$$;
CREATE TRIGGER agent_turn_events_notify
    AFTER INSERT ON agent_turn_events
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION agent_turn_events_notify();
"""
UNINSTALL = """
DROP TRIGGER IF EXISTS agent_turn_events_notify ON agent_turn_events;
DROP FUNCTION IF EXISTS agent_turn_events_notify();
"""


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(INSTALL)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(UNINSTALL)


class Migration(migrations.Migration):
    dependencies = [("turns_app", "0005_history_in_turns")]

    operations = [migrations.RunPython(install, uninstall)]
