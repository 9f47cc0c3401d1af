from django.db import migrations, models

import sessions_app.models


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="agentsession",
            name="graph",
            # Sessions from before the graph registry ran the intake graph.
            field=models.CharField(default="intake", max_length=64),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="agentsession",
            name="graph",
            field=models.CharField(default=sessions_app.models.default_graph, max_length=64),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="head_turn_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="interrupt",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="agentsession",
            name="stage",
            field=models.CharField(default="collecting", max_length=64),
        ),
    ]
