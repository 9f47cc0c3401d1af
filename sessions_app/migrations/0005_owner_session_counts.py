"""agent_owner_sessions: each owner's live sessions, counted by triggers on
agent_sessions, so the quota check reads one row instead of counting the
owner's sessions on every new one (docs/storage.md, "agent_owner_sessions":
that count grew with the owner's sessions, a few milliseconds per new
session at a few thousand).

PostgreSQL: deferred constraint triggers, so the owner's row is updated at
COMMIT and locked only for the commit itself: concurrent first turns of one
owner do not queue behind each other while their transactions run. SQLite
has one writer at a time anyway: plain triggers.

The triggers are created before the counts are filled in: CREATE TRIGGER
locks agent_sessions against writes until this migration commits, so no
session changes between the count and the triggers taking over."""

from django.db import migrations, models

POSTGRESQL = """
CREATE FUNCTION agent_sessions_count_live() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.deleted_at IS NULL THEN
        UPDATE agent_owner_sessions SET live = live - 1 WHERE owner = OLD.owner;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.deleted_at IS NULL THEN
        INSERT INTO agent_owner_sessions (owner, live) VALUES (NEW.owner, 1)
        ON CONFLICT (owner) DO UPDATE SET live = agent_owner_sessions.live + 1;
    END IF;
    RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER agent_sessions_count_inserted
    AFTER INSERT ON agent_sessions DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.deleted_at IS NULL) EXECUTE FUNCTION agent_sessions_count_live();
CREATE CONSTRAINT TRIGGER agent_sessions_count_deleted
    AFTER DELETE ON agent_sessions DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL) EXECUTE FUNCTION agent_sessions_count_live();
CREATE CONSTRAINT TRIGGER agent_sessions_count_updated
    AFTER UPDATE OF deleted_at, owner ON agent_sessions DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN ((OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL) OR OLD.owner <> NEW.owner)
    EXECUTE FUNCTION agent_sessions_count_live();
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS agent_sessions_count_inserted ON agent_sessions;
DROP TRIGGER IF EXISTS agent_sessions_count_deleted ON agent_sessions;
DROP TRIGGER IF EXISTS agent_sessions_count_updated ON agent_sessions;
DROP FUNCTION IF EXISTS agent_sessions_count_live();
"""

SQLITE = [
    """
    CREATE TRIGGER agent_sessions_count_inserted AFTER INSERT ON agent_sessions
    WHEN NEW.deleted_at IS NULL
    BEGIN
        INSERT INTO agent_owner_sessions (owner, live) VALUES (NEW.owner, 1)
        ON CONFLICT (owner) DO UPDATE SET live = live + 1;
    END
    """,
    """
    CREATE TRIGGER agent_sessions_count_deleted AFTER DELETE ON agent_sessions
    WHEN OLD.deleted_at IS NULL
    BEGIN
        UPDATE agent_owner_sessions SET live = live - 1 WHERE owner = OLD.owner;
    END
    """,
    """
    CREATE TRIGGER agent_sessions_count_updated AFTER UPDATE OF deleted_at, owner ON agent_sessions
    WHEN (OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL) OR OLD.owner <> NEW.owner
    BEGIN
        UPDATE agent_owner_sessions SET live = live - 1 WHERE owner = OLD.owner AND OLD.deleted_at IS NULL;
        INSERT INTO agent_owner_sessions (owner, live) SELECT NEW.owner, 1 WHERE NEW.deleted_at IS NULL
        ON CONFLICT (owner) DO UPDATE SET live = live + 1;
    END
    """,
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS agent_sessions_count_inserted",
    "DROP TRIGGER IF EXISTS agent_sessions_count_deleted",
    "DROP TRIGGER IF EXISTS agent_sessions_count_updated",
]

FILL = """
INSERT INTO agent_owner_sessions (owner, live)
SELECT owner, COUNT(*) FROM agent_sessions WHERE deleted_at IS NULL GROUP BY owner
"""


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL)
    else:
        for statement in SQLITE:
            schema_editor.execute(statement)
    schema_editor.execute(FILL)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_DROP)
    else:
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0004_maintenance_indexes")]

    operations = [
        migrations.CreateModel(
            name="OwnerSessionCount",
            fields=[
                ("owner", models.CharField(max_length=150, primary_key=True, serialize=False)),
                ("live", models.BigIntegerField(default=0)),
            ],
            options={"db_table": "agent_owner_sessions"},
        ),
        migrations.RunPython(install, uninstall),
    ]
