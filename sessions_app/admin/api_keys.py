"""API keys in the admin: created by `api_key_create` (the raw key is shown
once, on the response to the add form), retired by `api_key_revoke`, never
edited or deleted."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from core.admin_display import when
from sessions_app.admin.filters import KeyStateFilter
from sessions_app.admin.forms import ApiKeyAddForm
from sessions_app.models import ApiKey
from sessions_app.services import API_KEY_PREFIX, api_key_create, api_key_revoke


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("masked_key", "owner", "created", "last_used", "key_state")
    list_filter = (KeyStateFilter,)
    search_fields = ("prefix", "owner")
    ordering = ("-created_at",)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    actions = ("revoke",)
    add_form = ApiKeyAddForm
    # The hash never appears: not in the list, not on the page.
    readonly_fields = ("masked_key", "owner", "created_at", "last_used_at", "revoked_at")
    fields = readonly_fields

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        # Revoke instead: the row records who held which key.
        return False

    def has_revoke_permission(self, request) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    @admin.display(description="key", ordering="prefix")
    def masked_key(self, key: ApiKey) -> str:
        return f"{API_KEY_PREFIX}{key.prefix}_…"

    @admin.display(description="created", ordering="created_at")
    def created(self, key: ApiKey) -> str:
        return when(key.created_at, seconds=False)

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, key: ApiKey) -> str:
        return when(key.last_used_at, seconds=False)

    @admin.display(description="state", ordering="revoked_at")
    def key_state(self, key: ApiKey) -> str:
        if key.revoked_at is None:
            return "active"
        return format_html('<span class="agentsite-tombstone">revoked</span> {}', when(key.revoked_at))

    def get_fields(self, request, obj=None):
        return ("owner",) if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, change=change, **kwargs)

    def save_form(self, request, form, change: bool) -> ApiKey:
        if change:  # never reached: keys are not editable
            raise PermissionDenied
        # The service makes the key; the raw value lives on this request only,
        # for response_add to show once.
        key, request.agentsite_raw_key = api_key_create(owner=form.cleaned_data["owner"])
        return key

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        pass  # api_key_create saved it

    def save_related(self, request, form, formsets, change: bool) -> None:
        pass  # a key has no relations; the form never saved anything

    def response_add(self, request, obj: ApiKey, post_url_continue=None) -> HttpResponse:
        """Show the raw key on this one response (admin views are never
        cached) instead of redirecting: it is not put in a message cookie or
        the session store, and it cannot be shown again."""
        context = {
            **self.admin_site.each_context(request),
            "title": "API key created",
            "subtitle": None,
            "opts": self.opts,
            "original": obj,
            "raw_key": request.agentsite_raw_key,
            "changelist_url": reverse("admin:sessions_app_apikey_changelist"),
            "add_url": reverse("admin:sessions_app_apikey_add"),
        }
        return TemplateResponse(request, "admin/sessions_app/apikey/created.html", context)

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke(self, request, queryset) -> None:
        revoked = 0
        for key in queryset:
            if key.revoked_at is None:
                api_key_revoke(api_key=key)
                revoked += 1
        self.message_user(request, f"Revoked {revoked} API key(s).", messages.SUCCESS)
