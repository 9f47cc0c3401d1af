"""Install LangGraph's store tables in the same database, through the
stores' own `setup()` (turns_app.store_tables.install_tables), as 0002 does
for the checkpointer. Schema migrations a newer LangGraph brings later are
applied after every `migrate` (turns_app.apps)."""

from django.db import migrations


def install(apps, schema_editor):
    from turns_app.store_tables import install_tables

    install_tables(schema_editor.connection.settings_dict)


def uninstall(apps, schema_editor):
    from turns_app.store_tables import drop_tables

    drop_tables(schema_editor)


class Migration(migrations.Migration):
    # The SQLite setup runs on its own connection and takes the write lock.
    atomic = False

    dependencies = [("turns_app", "0009_turn_session_index_covered")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
