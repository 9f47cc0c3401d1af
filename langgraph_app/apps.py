from django.apps import AppConfig


class LanggraphAppConfig(AppConfig):
    name = "langgraph_app"
    verbose_name = "LangGraph Agent Protocol"
