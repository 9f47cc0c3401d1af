"""The operator's admin: find a session, read what happened in it, delete it.

Business rows are never edited by hand. Sessions and turns are read-only;
fields change only through `session_set_fields` (the "Set fields" page, which
is version-conditional like the API), deletes go through `session_delete` for
the delete page *and* the bulk action, and API keys are made by
`api_key_create` and retired by `api_key_revoke`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat, linebreaksbr, pluralize
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timezone import localtime

from agentsite.agent.checkpointer import thread_storage
from agentsite.errors import ApiError, InvalidFields, VersionConflict
from sessions_app.models import AgentSession, ApiKey
from sessions_app.services import (
    API_KEY_PREFIX,
    api_key_create,
    api_key_revoke,
    session_delete,
    session_set_fields,
)
from turns_app.admin import AgentTurnInline, pretty_json
from turns_app.models import AgentTurn

# --- list filters ---------------------------------------------------------------------


class InputFilter(admin.SimpleListFilter):
    """A filter with a text box instead of a list of choices, so it never
    loads every distinct value of a big table into the sidebar."""

    template = "admin/agentsite/input_filter.html"

    def lookups(self, request, model_admin):
        return ()

    def has_output(self) -> bool:
        return True

    def choices(self, changelist):
        # One "choice": what the template needs to rebuild the query string.
        kept = [
            (name, value)
            for name, values in changelist.get_filters_params().items()
            if name != self.parameter_name
            for value in values
        ]
        for name in ("q", "o"):
            if name in changelist.params:
                kept.append((name, changelist.params[name]))
        yield {
            "parameter_name": self.parameter_name,
            "value": self.value() or "",
            "kept": kept,
            "clear_query_string": changelist.get_query_string(remove=[self.parameter_name]),
        }


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


# --- display helpers -------------------------------------------------------------------


def _display_value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _when(moment) -> str:
    return date_format(localtime(moment), "DATETIME_FORMAT") if moment else "—"


def _table(headers: list[str], rows: list[list[Any]], empty: str) -> str:
    if not rows:
        return format_html('<p class="agentsite-empty">{}</p>', empty)
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in rows),
    )
    return format_html(
        '<table class="agentsite-table"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        head,
        body,
    )


def session_storage(session: AgentSession) -> dict[str, int]:
    """Checkpoint rows and bytes of every thread of this session (all epochs)."""
    return thread_storage(f"{session.id}:")


# --- sessions ---------------------------------------------------------------------------


class SetFieldsForm(forms.Form):
    """One input per form field, pre-filled with the current value; only the
    inputs the operator changed are sent, and an emptied input clears the
    field. `_expected_version` carries the version the operator saw (field
    names in a form spec start with a letter, so it cannot collide)."""

    VERSION = "_expected_version"

    def __init__(self, *args: Any, session: AgentSession, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields[self.VERSION] = forms.IntegerField(
            widget=forms.HiddenInput, initial=session.version
        )
        for spec in session.form:
            name, kind = spec["name"], spec["type"]
            label = f"{name}{' *' if spec.get('required') else ''}"
            help_text = f"{kind}: {spec.get('description') or ''}".rstrip(": ")
            current = session.fields.get(name)
            if kind == "enum":
                field: forms.Field = forms.ChoiceField(
                    choices=[("", "—")] + [(o, o) for o in spec.get("enum") or []],
                    required=False,
                )
            elif kind == "boolean":
                field = forms.ChoiceField(
                    choices=[("", "—"), ("yes", "yes"), ("no", "no")], required=False
                )
            else:
                field = forms.CharField(required=False, strip=True)
                if kind == "date":
                    field.widget.attrs["placeholder"] = "YYYY-MM-DD"
            field.label = label
            field.help_text = help_text
            field.initial = "" if current is None else _display_value(current)
            field.widget.attrs.setdefault("class", "vTextField")
            self.fields[name] = field

    def changed_values(self) -> dict[str, Any]:
        return {
            name: (self.cleaned_data[name] or None)
            for name in self.changed_data
            if name != self.VERSION
        }


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = (
        "key",
        "owner",
        "stage",
        "version",
        "epoch",
        "turn_count",
        "last_activity",
        "state_label",
    )
    list_display_links = ("key",)
    # Closed lists (stage's choices, three states) or a text box (owner): no
    # filter reads the table to build its sidebar.
    list_filter = (LiveFilter, "stage", OwnerFilter)
    search_fields = ("key", "owner")
    search_help_text = "Search by session key or owner."
    ordering = ("-updated_at",)
    # Every column is a column of the session row (turn_count is kept by the
    # commit), so the list is one query whatever the page size.
    list_select_related = False
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    inlines = (AgentTurnInline,)
    delete_confirmation_template = "admin/sessions_app/agentsession/delete_confirmation.html"
    delete_selected_confirmation_template = (
        "admin/sessions_app/agentsession/delete_selected_confirmation.html"
    )
    fieldsets = (
        (
            "Session",
            {
                "fields": (
                    "key",
                    "owner",
                    "id",
                    "state",
                    "stage",
                    "version",
                    "epoch",
                    "turn_count",
                    "active_turn",
                    "created_at",
                    "updated_at",
                )
            },
        ),
        ("Fields", {"fields": ("fields_table",)}),
        ("Transcript", {"fields": ("transcript",)}),
        ("Form spec", {"fields": ("form_spec_table",)}),
        (
            "Checkpoints",
            {"fields": ("committed_checkpoint_id", "checkpoint_thread", "checkpoint_storage")},
        ),
        ("Snapshot", {"classes": ("collapse",), "fields": ("snapshot_json",)}),
        ("Metadata", {"classes": ("collapse",), "fields": ("metadata_json",)}),
    )
    # Everything shown is read-only: the fieldsets are the whole list.
    readonly_fields = tuple(name for _, options in fieldsets for name in options["fields"])

    # -- permissions: read-only, deletable through the service ---------------------------

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_set_fields_permission(self, request) -> bool:
        """Setting fields through the service needs the model's change
        permission, although the page itself is never an edit form."""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    # -- list columns ----------------------------------------------------------------------

    @admin.display(description="last activity", ordering="updated_at")
    def last_activity(self, session: AgentSession) -> str:
        return _when(session.updated_at)

    @admin.display(description="state", ordering="deleted_at")
    def state_label(self, session: AgentSession) -> str:
        if session.deleted_at is None:
            return "live"
        return format_html(
            '<span class="agentsite-tombstone">deleted</span> {}', _when(session.deleted_at)
        )

    # -- change page ---------------------------------------------------------------------

    @admin.display(description="state")
    def state(self, session: AgentSession) -> str:
        if session.deleted_at is None:
            return "live"
        return format_html(
            '<strong class="agentsite-tombstone">deleted</strong> at {} — a tombstone: '
            "fields, snapshot, turns and checkpoints were removed; epoch and version are kept",
            _when(session.deleted_at),
        )

    @admin.display(description="active turn")
    def active_turn(self, session: AgentSession) -> str:
        if not session.active_turn_id:
            return "—"
        url = reverse("admin:turns_app_agentturn_change", args=[session.active_turn_id])
        return format_html(
            '<a href="{}">{}</a> (lease until {})',
            url,
            session.active_turn_id,
            _when(session.lease_expires_at),
        )

    @admin.display(description="fields")
    def fields_table(self, session: AgentSession) -> str:
        values = session.fields or {}
        specs = {spec.get("name"): spec for spec in session.form or []}
        rows = []
        for name, spec in specs.items():
            value = values.get(name)
            missing = spec.get("required") and value is None and session.deleted_at is None
            rows.append(
                [
                    name,
                    spec.get("type", ""),
                    mark_safe('<span class="agentsite-missing">missing</span>')
                    if missing
                    else _display_value(value),
                ]
            )
        # Values outside the form (should not happen, but show what is stored).
        rows.extend(
            [name, "not in form", _display_value(value)]
            for name, value in values.items()
            if name not in specs
        )
        return _table(["field", "type", "value"], rows, "The session has no form.")

    @admin.display(description="form")
    def form_spec_table(self, session: AgentSession) -> str:
        rows = [
            [
                spec.get("name", ""),
                spec.get("type", ""),
                "yes" if spec.get("required") else "no",
                spec.get("description", ""),
                ", ".join(spec.get("enum") or []),
            ]
            for spec in session.form or []
        ]
        return _table(["name", "type", "required", "description", "options"], rows, "No form spec.")

    @admin.display(description="messages")
    def transcript(self, session: AgentSession) -> str:
        messages_ = (session.snapshot or {}).get("messages") or []
        if not messages_:
            return format_html('<p class="agentsite-empty">{}</p>', "No committed messages.")
        items = format_html_join(
            "",
            '<li class="agentsite-msg agentsite-msg-{}"><span class="agentsite-role">{}</span>'
            '<div class="agentsite-content">{}</div></li>',
            (
                (
                    m.get("role", "unknown"),
                    m.get("role", "unknown"),
                    linebreaksbr(str(m.get("content", "")), autoescape=True),
                )
                for m in messages_
                if isinstance(m, dict)
            ),
        )
        return format_html('<ol class="agentsite-transcript">{}</ol>', items)

    @admin.display(description="storage")
    def checkpoint_storage(self, session: AgentSession) -> str:
        storage = session_storage(session)
        return format_html(
            "{} row{}, {} in the checkpointer's tables (threads <code>{}:*</code>)",
            storage["rows"],
            pluralize(storage["rows"]),
            filesizeformat(storage["bytes"]),
            session.id,
        )

    @admin.display(description="snapshot")
    def snapshot_json(self, session: AgentSession) -> str:
        return pretty_json(session.snapshot)

    @admin.display(description="metadata")
    def metadata_json(self, session: AgentSession) -> str:
        return pretty_json(session.metadata)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "can_set_fields": self.has_set_fields_permission(request),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    # -- set fields (through the service) ------------------------------------------------

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/set-fields/",
                self.admin_site.admin_view(self.set_fields_view),
                name="%s_%s_set_fields" % info,
            ),
            *super().get_urls(),
        ]

    def set_fields_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self.get_object(request, unquote(object_id))
        if session is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_set_fields_permission(request):
            raise PermissionDenied
        change_url = reverse("admin:sessions_app_agentsession_change", args=[session.pk])
        if session.deleted_at is not None:
            self.message_user(request, "A deleted session has no fields to set.", messages.ERROR)
            return HttpResponseRedirect(change_url)
        form = SetFieldsForm(request.POST or None, session=session)
        if request.method == "POST" and form.is_valid() and self._set_fields(request, session, form):
            return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Set fields of {session}",
            "subtitle": None,
            "opts": self.opts,
            "original": session,
            "form": form,
            "change_url": change_url,
        }
        return TemplateResponse(request, "admin/sessions_app/agentsession/set_fields.html", context)

    def _set_fields(self, request: HttpRequest, session: AgentSession, form: SetFieldsForm) -> bool:
        """Calls the service with the version the operator saw; reports the
        outcome as admin messages (and field errors on the form)."""
        values = form.changed_values()
        if not values:
            self.message_user(request, "Nothing changed: edit at least one field.", messages.WARNING)
            return False
        try:
            update = session_set_fields(
                owner=session.owner,
                key=session.key,
                values=values,
                expected_version=form.cleaned_data[SetFieldsForm.VERSION],
            )
        except InvalidFields as exc:
            for error in exc.details or []:
                field = error.get("field")
                form.add_error(field if field in form.fields else None, error.get("message"))
            self.message_user(request, f"Not saved: {exc.message}.", messages.ERROR)
            return False
        except VersionConflict as exc:
            self.message_user(
                request,
                f"Not saved: {exc.message}. Someone changed the session after you opened "
                "this page; reload it and try again.",
                messages.ERROR,
            )
            return False
        except ApiError as exc:  # session_busy (a turn is running), session_not_found
            self.message_user(request, f"Not saved: {exc.message}.", messages.ERROR)
            return False
        changed = ", ".join(sorted(update.changes)) or "no values"
        self.message_user(
            request,
            f"Fields set ({changed} changed); the session is now at version "
            f"{update.session.version}.",
            messages.SUCCESS,
        )
        return True

    # -- delete through the service -----------------------------------------------------------

    def get_deleted_objects(self, objs, request):
        """What `session_delete` removes and keeps, per session, for both
        confirmation pages. The rows stay (tombstones), so Django's cascade
        collector would describe the wrong thing."""
        sessions = list(objs)
        turn_counts = dict(
            AgentTurn.objects.filter(session__in=[s.pk for s in sessions])
            .values_list("session")
            .annotate(n=Count("id"))
        )
        described: list[Any] = []
        totals = {"turns": 0, "checkpoint rows": 0}
        for session in sessions:
            storage = session_storage(session)
            turns = turn_counts.get(session.pk, 0)
            totals["turns"] += turns
            totals["checkpoint rows"] += storage["rows"]
            fields = sorted((session.fields or {}).keys())
            message_count = len((session.snapshot or {}).get("messages") or [])
            next_epoch = session.epoch + 1 if session.deleted_at is None else session.epoch
            state = "live" if session.deleted_at is None else "already a tombstone"
            described.append(f"Agent session {session} — {state}")
            described.append(
                [
                    f"fields: {len(fields)} value(s)" + (f" ({', '.join(fields)})" if fields else ""),
                    f"snapshot: {message_count} transcript message(s)",
                    f"turns: {turns}",
                    f"checkpoint rows: {storage['rows']} ({filesizeformat(storage['bytes'])})",
                    f"kept: a tombstone row with deleted_at set, epoch {next_epoch}, "
                    f"version {session.version}",
                ]
            )
        model_count = {
            "agent sessions (kept as tombstones)": len(sessions),
            **totals,
        }
        # session_delete needs no permission on turns or checkpoints: nothing
        # is lacking and nothing is protected.
        return described, model_count, set(), []

    def delete_model(self, request, obj: AgentSession) -> None:
        session_delete(session=obj)

    def delete_queryset(self, request, queryset) -> None:
        for session in queryset:
            session_delete(session=session)

    def response_delete(self, request, obj_display, obj_id):
        response = super().response_delete(request, obj_display, obj_id)
        if not isinstance(response, HttpResponseRedirect):
            return response  # a popup's response
        self.message_user(
            request,
            "Its checkpoints, fields, snapshot and turns were removed; the tombstone is listed "
            "under the “Deleted” filter.",
            messages.INFO,
        )
        # Django sends users without change permission to the index; this
        # admin never grants change, so go back to the (filtered) list.
        url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")
        preserved = self.get_preserved_filters(request)
        return HttpResponseRedirect(
            add_preserved_filters({"preserved_filters": preserved, "opts": self.opts}, url)
        )


# --- API keys ----------------------------------------------------------------------------


class ApiKeyAddForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ("owner",)
        help_texts = {"owner": "Sessions created with this key belong to this owner."}


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("masked_key", "owner", "created_at", "last_used_at", "key_state")
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

    @admin.display(description="state", ordering="revoked_at")
    def key_state(self, key: ApiKey) -> str:
        if key.revoked_at is None:
            return "active"
        return format_html('<span class="agentsite-tombstone">revoked</span> {}', _when(key.revoked_at))

    def get_fields(self, request, obj=None):
        return ("owner",) if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, change=change, **kwargs)

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        if change:  # never reached: keys are not editable
            raise PermissionDenied
        created, raw = api_key_create(owner=obj.owner)
        for model_field in ApiKey._meta.concrete_fields:
            setattr(obj, model_field.attname, getattr(created, model_field.attname))
        obj._state.adding = False
        obj._state.db = created._state.db
        obj._raw_key = raw  # for response_add only; never stored

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
            "raw_key": obj._raw_key,
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
