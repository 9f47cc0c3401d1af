"""Assistants in the admin: each owner's, with every version, read-only
(they are written through /langgraph/'s assistant endpoints, which keep
the versions); an operator may delete one, versions and all."""

from __future__ import annotations

from django.contrib import admin

from assistants_app.models import Assistant, AssistantVersion
from core.admin_display import pretty_json, when


class VersionInline(admin.TabularInline):
    model = AssistantVersion
    fields = ("version", "graph_id", "name", "shown_config", "shown_context", "shown_metadata", "created")
    readonly_fields = fields
    ordering = ("-version",)
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="config")
    def shown_config(self, version: AssistantVersion) -> str:
        return pretty_json(version.config)

    @admin.display(description="context")
    def shown_context(self, version: AssistantVersion) -> str:
        return pretty_json(version.context)

    @admin.display(description="metadata")
    def shown_metadata(self, version: AssistantVersion) -> str:
        return pretty_json(version.metadata)

    @admin.display(description="created")
    def created(self, version: AssistantVersion) -> str:
        return when(version.created_at, seconds=False)


@admin.register(Assistant)
class AssistantAdmin(admin.ModelAdmin):
    list_display = ("name", "assistant_id", "graph_id", "owner", "version", "updated")
    list_filter = ("graph_id",)
    search_fields = ("name", "owner", "=assistant_id")
    ordering = ("-created_at",)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fields = (
        "assistant_id",
        "owner",
        "graph_id",
        "name",
        "description",
        "version",
        "shown_config",
        "shown_context",
        "shown_metadata",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    inlines = (VersionInline,)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # The view page is the change page made read-only.
        return False

    @admin.display(description="config")
    def shown_config(self, assistant: Assistant) -> str:
        return pretty_json(assistant.config)

    @admin.display(description="context")
    def shown_context(self, assistant: Assistant) -> str:
        return pretty_json(assistant.context)

    @admin.display(description="metadata")
    def shown_metadata(self, assistant: Assistant) -> str:
        return pretty_json(assistant.metadata)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, assistant: Assistant) -> str:
        return when(assistant.updated_at, seconds=False)
