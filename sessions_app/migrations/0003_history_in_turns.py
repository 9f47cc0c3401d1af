"""The conversation now lives in the turns (turns_app 0005 moved each
session's snapshot there); the session row keeps only its head."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0002_graph_head_interrupt"),
        ("turns_app", "0005_history_in_turns"),
    ]

    operations = [
        migrations.RemoveField(model_name="agentsession", name="snapshot"),
        migrations.RemoveField(model_name="agentsession", name="checkpoint_thread"),
        migrations.RemoveField(model_name="agentsession", name="committed_checkpoint_id"),
    ]
