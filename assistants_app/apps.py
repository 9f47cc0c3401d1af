from django.apps import AppConfig


class AssistantsAppConfig(AppConfig):
    name = "assistants_app"
    verbose_name = "Assistants"
    default_auto_field = "django.db.models.BigAutoField"
