"""agent_turns keeps no index on session_id alone: its unique (session_id,
epoch, number) and (session_id, created_at DESC) both lead with it, and the
third copy cost every turn's insert (docs/storage.md, "agent_turns"). Only the index goes:
altering the field itself would make Django rebuild the table on SQLite and
re-validate the foreign key on PostgreSQL, a long lock on a big table."""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "agent_turns_session_id_76f79308"  # the name Django gave it in 0001


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0005_owner_session_counts"),
        ("turns_app", "0008_followed_turns_notify"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="agentturn",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="turns",
                        to="sessions_app.agentsession",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON "agent_turns" ("session_id")',
                ),
            ],
        ),
    ]
