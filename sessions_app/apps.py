from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions and API keys"
    default_auto_field = "django.db.models.BigAutoField"
