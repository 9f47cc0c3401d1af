"""List filters of the session and API key admins: none of them reads the
table to build its sidebar."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin

from core.admin_display import InputFilter


class OwnerFilter(InputFilter):
    title = "owner"
    parameter_name = "owner"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(owner=value) if value else queryset


class LiveFilter(admin.SimpleListFilter):
    """Live sessions by default; tombstones only when asked for."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return (("live", "Live"), ("deleted", "Deleted (tombstones)"), ("all", "All"))

    def _current(self) -> str:
        value = self.value()
        return value if value in {"live", "deleted", "all"} else "live"

    def queryset(self, request, queryset):
        current = self._current()
        if current == "live":
            return queryset.filter(deleted_at__isnull=True)
        if current == "deleted":
            return queryset.filter(deleted_at__isnull=False)
        return queryset

    def choices(self, changelist):
        current = self._current()
        for lookup, title in self.lookup_choices:
            yield {
                "selected": current == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }


class StageFilter(InputFilter):
    """Stages are whatever a graph names them: a text box, not a list."""

    title = "stage"
    parameter_name = "stage"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(stage=value) if value else queryset


class GraphFilter(admin.SimpleListFilter):
    """The registered graphs (AGENT_GRAPHS): a closed list from settings."""

    title = "graph"
    parameter_name = "graph"

    def lookups(self, request, model_admin):
        return [(name, name) for name in settings.AGENT_GRAPHS]

    def queryset(self, request, queryset):
        return queryset.filter(graph=self.value()) if self.value() else queryset


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return (("active", "Active"), ("revoked", "Revoked"))

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset
