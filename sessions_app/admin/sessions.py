"""The operator's session admin: find a session, read what happened in it,
set its fields, delete it (docs/operations.md, "Admin").

Business rows are never edited by hand: fields change only through
`session_set_fields` (the "Set fields" tool, `set_fields.py`), and deletes go
through `session_delete` for the delete page *and* the bulk action; it
signals `session_deleting`, on which turns_app purges the session's turns.
Each of those services runs its own durable transaction, so the views that
call them must not open one.

A session's page is mostly its turns, which live in turns_app, above this
app: the inline, the turn links, the transcript, the checkpoint storage and
the delete pages' counts come from the `SessionTurns` that turns_app's admin
registers (`session_turns.py` says why a slot).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import flatten_fieldsets
from django.http import HttpResponseRedirect
from django.template.defaultfilters import filesizeformat, linebreaksbr, pluralize
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from core.admin_display import (
    KEY_CHARS,
    clipped,
    display_value,
    html_table,
    light_changelist,
    pretty_json,
    scrub,
    when,
)
from sessions_app.admin.filters import GraphFilter, LiveFilter, OwnerFilter, StageFilter
from sessions_app.admin.session_turns import session_turns
from sessions_app.admin.set_fields import SetFieldsAdmin
from sessions_app.models import AgentSession
from sessions_app.services import session_delete
from sessions_app.validation import graph_fills_fields


def _shown_message(message: dict) -> str:
    calls = ", ".join(f"{c['name']}({c['args']})" for c in message.get("tool_calls") or [])
    return f"{message['content']}\n[tool calls: {calls}]" if calls else message["content"]


@admin.register(AgentSession)
class AgentSessionAdmin(SetFieldsAdmin):
    list_display = (
        "session_key",
        "owner",
        "graph",
        "stage",
        "version",
        "epoch",
        "turns",
        "last_activity",
        "state_label",
    )
    list_display_links = ("session_key",)
    # Closed lists (three states, the registered graphs) or text boxes (stage,
    # owner): no filter reads the table to build its sidebar.
    list_filter = (LiveFilter, GraphFilter, StageFilter, OwnerFilter)
    search_fields = ("key", "owner")
    search_help_text = "Search by session key or owner."
    ordering = ("-updated_at",)
    # Every column is a column of the session row (turn_count is kept by the
    # commit), so the list is one query whatever the page size.
    list_select_related = False
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    # The turn inline is turns_app's: see get_inlines.
    delete_confirmation_template = "admin/sessions_app/agentsession/delete_confirmation.html"
    delete_selected_confirmation_template = "admin/sessions_app/agentsession/delete_selected_confirmation.html"
    fieldsets = (
        (
            "Session",
            {
                "fields": (
                    "key",
                    "owner",
                    "id",
                    "graph",
                    "state",
                    "stage",
                    "version",
                    "epoch",
                    "turn_count",
                    "head_turn",
                    "active_turn",
                    "created_at",
                    "updated_at",
                )
            },
        ),
        ("Pending interrupt", {"fields": ("pending_interrupt",)}),
        ("Fields", {"fields": ("fields_table",)}),
        ("Transcript", {"fields": ("transcript",)}),
        ("Form spec", {"fields": ("form_spec_table",)}),
        ("Checkpoints", {"fields": ("checkpoint_storage",)}),
        ("Metadata", {"classes": ("collapse",), "fields": ("metadata_json",)}),
    )
    # Everything shown is read-only: the fieldsets are the whole list.
    readonly_fields = tuple(flatten_fieldsets(fieldsets))

    # -- permissions: read-only, deletable through the service ---------------------------

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    # -- list columns ----------------------------------------------------------------------

    @admin.display(description="key", ordering="key")
    def session_key(self, session: AgentSession) -> str:
        return clipped(session.key, KEY_CHARS)

    @admin.display(description="turns", ordering="turn_count")
    def turns(self, session: AgentSession) -> int:
        return session.turn_count

    @admin.display(description="last activity", ordering="updated_at")
    def last_activity(self, session: AgentSession) -> str:
        return when(session.updated_at, seconds=False)

    @admin.display(description="state", ordering="deleted_at")
    def state_label(self, session: AgentSession) -> str:
        if not session.is_deleted:
            return "live"
        # The time is in the tooltip (and on the page): the column stays narrow.
        return format_html(
            '<span class="agentsite-tombstone" title="deleted {}">deleted</span>', when(session.deleted_at)
        )

    # -- change page ---------------------------------------------------------------------

    @admin.display(description="state")
    def state(self, session: AgentSession) -> str:
        if not session.is_deleted:
            return "live"
        return format_html(
            '<strong class="agentsite-tombstone">deleted</strong> at {} — a tombstone: '
            "form, fields, metadata, turns (the transcript) and checkpoints were removed; epoch and version are kept",
            when(session.deleted_at),
        )

    @admin.display(description="active turn")
    def active_turn(self, session: AgentSession) -> str:
        if not session.active_turn_id:
            return "—"
        link = session_turns().turn_link(session.active_turn_id)
        return format_html("{} (lease until {})", link, when(session.lease_expires_at))

    @admin.display(description="fields")
    def fields_table(self, session: AgentSession) -> str:
        values = session.fields or {}
        if not values and not graph_fills_fields(session.graph):
            # A session made before forms went only to graphs with a `fields`
            # channel keeps the default form: nothing will ever fill it.
            return format_html('<p class="agentsite-empty">{}</p>', f"The {session.graph} graph fills no fields.")
        specs = {spec.get("name"): spec for spec in session.form or []}
        rows = []
        for name, spec in specs.items():
            value = values.get(name)
            missing = spec.get("required") and value is None and not session.is_deleted
            rows.append(
                [
                    name,
                    spec.get("type", ""),
                    mark_safe('<span class="agentsite-missing">missing</span>') if missing else display_value(value),
                ]
            )
        # Values outside the form (should not happen, but show what is stored).
        rows.extend([name, "not in form", display_value(value)] for name, value in values.items() if name not in specs)
        return html_table(["field", "type", "value"], rows, "The session has no form.")

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
        return html_table(["name", "type", "required", "description", "options"], rows, "No form spec.")

    @admin.display(description="messages")
    def transcript(self, session: AgentSession) -> str:
        messages_ = scrub(session_turns().transcript(session))
        if not messages_:
            return format_html('<p class="agentsite-empty">{}</p>', "No committed messages.")
        items = format_html_join(
            "",
            '<li class="agentsite-msg agentsite-msg-{}"><span class="agentsite-role">{}</span>'
            '<div class="agentsite-content">{}</div></li>',
            (
                (
                    m["role"],
                    m["role"],
                    linebreaksbr(_shown_message(m), autoescape=True),
                )
                for m in messages_
            ),
        )
        return format_html('<ol class="agentsite-transcript">{}</ol>', items)

    @admin.display(description="head turn")
    def head_turn(self, session: AgentSession) -> str:
        if not session.head_turn_id:
            return "— (the start)"
        return session_turns().turn_link(session.head_turn_id)

    @admin.display(description="waiting for")
    def pending_interrupt(self, session: AgentSession) -> str:
        if not session.interrupt:
            return "— (nothing: the graph is not paused)"
        return format_html(
            '{}<p>Resume with a turn whose body is <code>{{"resume": …}}</code>.</p>',
            pretty_json(session.interrupt.get("interrupts")),
        )

    @admin.display(description="storage")
    def checkpoint_storage(self, session: AgentSession) -> str:
        storage = session_turns().checkpoint_storage(session)
        return format_html(
            "{} row{}, {} in the checkpointer's tables (threads <code>{}:*</code>)",
            storage["rows"],
            pluralize(storage["rows"]),
            filesizeformat(storage["bytes"]),
            session.id,
        )

    @admin.display(description="metadata")
    def metadata_json(self, session: AgentSession) -> str:
        return pretty_json(session.metadata)

    def get_inlines(self, request, obj):
        return session_turns().inlines

    def get_changelist(self, request, **kwargs):
        return light_changelist("form", "fields", "metadata", "interrupt")

    def get_object(self, request, object_id, from_field=None):
        # For display only: writes go through the services, which read the row again.
        session = super().get_object(request, object_id, from_field)
        if session is not None:
            for name in ("form", "fields", "metadata", "interrupt"):
                setattr(session, name, scrub(getattr(session, name)))
        return session

    # -- delete through the service -----------------------------------------------------------

    def get_deleted_objects(self, objs, request):
        """What `session_delete` removes and keeps, per session, for both
        confirmation pages. The rows stay (tombstones), so Django's cascade
        collector would describe the wrong thing."""
        sessions = list(objs)
        turns_of = session_turns()
        counts = turns_of.turn_counts([s.pk for s in sessions])
        described: list[Any] = []
        totals = {"turns": 0, "checkpoint rows": 0}
        for session in sessions:
            storage = turns_of.checkpoint_storage(session)
            turns = counts.get(session.pk, 0)
            totals["turns"] += turns
            totals["checkpoint rows"] += storage["rows"]
            fields = sorted((session.fields or {}).keys())
            message_count = len(turns_of.transcript(session))
            next_epoch = session.epoch if session.is_deleted else session.epoch + 1
            state = "already a tombstone" if session.is_deleted else "live"
            described.append(f"Agent session {session} — {state}")
            described.append(
                [
                    f"fields: {len(fields)} value(s)" + (f" ({', '.join(fields)})" if fields else ""),
                    f"transcript: {message_count} message(s)",
                    f"turns: {turns}",
                    f"checkpoint rows: {storage['rows']} ({filesizeformat(storage['bytes'])})",
                    f"kept: a tombstone row with deleted_at set, epoch {next_epoch}, version {session.version}",
                ]
            )
        model_count = {
            "agent sessions (kept as tombstones)": len(sessions),
            **totals,
        }
        # session_delete needs no permission on turns or checkpoints: nothing
        # is lacking and nothing is protected.
        return described, model_count, set(), []

    def delete_view(self, request, object_id, extra_context=None):
        # Django wraps the delete view in a transaction; `session_delete` runs
        # its own durable one (purge + tombstone), which must not be nested.
        # (_delete_view: the view without the transaction; django-stubs leave it out.)
        return self._delete_view(request, object_id, extra_context)  # type: ignore[attr-defined]

    def delete_model(self, request, obj: AgentSession) -> None:
        session_delete(session_id=obj.pk)

    def delete_queryset(self, request, queryset) -> None:
        # One transaction per session: each delete is whole on its own.
        for session_id in queryset.values_list("pk", flat=True):
            session_delete(session_id=session_id)

    def response_delete(self, request, obj_display, obj_id):
        response = super().response_delete(request, obj_display, obj_id)
        if not isinstance(response, HttpResponseRedirect):
            return response  # a popup's response
        self.message_user(
            request,
            "Its checkpoints, form, fields, metadata and turns were removed; the tombstone is listed "
            "under the “Deleted” filter.",
            messages.INFO,
        )
        # Django sends users without change permission to the index; this
        # admin never grants change, so go back to the (filtered) list.
        url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")
        preserved = self.get_preserved_filters(request)
        return HttpResponseRedirect(add_preserved_filters({"preserved_filters": preserved, "opts": self.opts}, url))
