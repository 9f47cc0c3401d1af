"""Install the LangGraph checkpointer's tables in the same database.

The savers' own `setup()` does the work, on a connection of its own (see
turns_app.checkpoint_tables.install_tables for why). Re-running is a no-op: both
savers track what they installed. Schema migrations that a newer LangGraph
brings later are applied after every `migrate` (turns_app.apps).
"""

from django.db import migrations


def install(apps, schema_editor):
    from turns_app.checkpoint_tables import install_tables

    install_tables(schema_editor.connection.settings_dict)


def uninstall(apps, schema_editor):
    from turns_app.checkpoint_tables import drop_tables

    drop_tables(schema_editor.connection.settings_dict, schema_editor)


class Migration(migrations.Migration):
    # The SQLite setup runs on its own connection and takes the write lock;
    # inside Django's migration transaction it would wait for itself.
    atomic = False

    dependencies = [("turns_app", "0001_initial")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
