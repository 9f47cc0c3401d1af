from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("turns_app", "0002_checkpointer_tables")]

    operations = [
        migrations.AddField(
            model_name="agentturn",
            name="last_event_id",
            field=models.IntegerField(blank=True, null=True),
        ),
    ]
