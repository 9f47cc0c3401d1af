"""A committed turn's checkpoints, one record per LangGraph step
(docs/storage.md, "Checkpoints"). Nullable: turns committed before it have
none, and their history shows the state before the reply and after it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("turns_app", "0010_store_tables")]

    operations = [
        migrations.AddField(model_name="agentturn", name="steps", field=models.JSONField(blank=True, null=True)),
    ]
