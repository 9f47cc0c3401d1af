from django.apps import AppConfig


class TurnsAppConfig(AppConfig):
    name = "turns_app"
    verbose_name = "Agent turns"
    default_auto_field = "django.db.models.BigAutoField"
