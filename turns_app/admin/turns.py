"""Turns in the admin: a read-only inline on the session page and a read-only
turn page. Turns are written by the turn protocol only
(docs/turn-protocol.md); nothing here can add, change or delete one."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.html import format_html

from core.admin_display import KEY_CHARS, clipped, light_changelist, pretty_json, pretty_json_text, scrub, when
from turns_app.models import AgentTurn

# The inline shows this many turns, newest first; the turn list has them all.
INLINE_TURNS_SHOWN = 100
DIGEST_PREFIX_CHARS = 12
IDEMPOTENCY_KEY_CHARS = 24


def turn_label(turn: AgentTurn) -> str:
    """ "#2 · committed": what a turn is called where its session is known."""
    return f"#{turn.number} · {turn.status}"


def turn_link(turn: AgentTurn) -> str:
    url = reverse("admin:turns_app_agentturn_change", args=[turn.pk])
    return format_html('<a href="{}">{}</a>', url, turn_label(turn))


def turn_link_by_id(turn_id) -> str:
    """A session's head or active turn, by its label rather than its UUID."""
    turn = AgentTurn.objects.filter(pk=turn_id).only("id", "number", "status").first()
    if turn is None:
        return str(turn_id)
    return turn_link(turn)


def error_summary(error: Any) -> str:
    if not error:
        return ""
    error = scrub(error)
    if isinstance(error, dict):
        return f"{error.get('code', '?')}: {error.get('message', '')}"
    return str(error)


class _ReadOnly:
    """Nothing is added, changed or deleted by hand."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class _NewestTurnsFormSet(BaseInlineFormSet):
    def get_queryset(self):
        if not hasattr(self, "_newest"):
            self._newest = super().get_queryset()[:INLINE_TURNS_SHOWN]
        return self._newest


class AgentTurnInline(_ReadOnly, admin.TabularInline):
    model = AgentTurn
    formset = _NewestTurnsFormSet
    fk_name = "session"
    extra = 0
    can_delete = False
    # The first column is the link: one line a turn, no title line above it.
    show_change_link = False
    verbose_name_plural = f"Turns (newest first, at most {INLINE_TURNS_SHOWN})"
    fields = (
        "turn_label",
        "epoch",
        "idempotency_key",
        "digest_prefix",
        "created",
        "finished",
        "error_text",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).order_by("-epoch", "-number")

    @admin.display(description="turn")
    def turn_label(self, turn: AgentTurn) -> str:
        return turn_link(turn)

    @admin.display(description="created")
    def created(self, turn: AgentTurn) -> str:
        return when(turn.created_at)

    @admin.display(description="finished")
    def finished(self, turn: AgentTurn) -> str:
        return when(turn.finished_at)

    @admin.display(description="digest")
    def digest_prefix(self, turn: AgentTurn) -> str:
        return f"{turn.request_digest[:DIGEST_PREFIX_CHARS]}…" if turn.request_digest else ""

    @admin.display(description="error")
    def error_text(self, turn: AgentTurn) -> str:
        return error_summary(turn.error)


@admin.register(AgentTurn)
class AgentTurnAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ("turn_label", "session_key", "session_owner", "epoch", "idempotency", "created")
    list_display_links = ("turn_label",)
    list_filter = ("status",)
    list_select_related = ("session",)
    search_fields = ("session__key", "idempotency_key")
    ordering = ("-created_at",)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "session_link",
                    "id",
                    "epoch",
                    "number",
                    "base_version",
                    "status",
                    "idempotency_key",
                    "request_digest",
                    "created_at",
                    "finished_at",
                    "checkpoint_id",
                    "checkpoint_thread",
                )
            },
        ),
        ("Request", {"fields": ("request_json",)}),
        ("Committed result", {"fields": ("result_json",)}),
        ("Error", {"fields": ("error_json",)}),
    )
    # Everything shown is read-only: the fieldsets are the whole list.
    readonly_fields = tuple(flatten_fieldsets(fieldsets))

    def get_changelist(self, request, **kwargs):
        # The list joins each turn's session for its key and owner: only those.
        return light_changelist(
            "request",
            "result",
            "error",
            "messages",
            "fields",
            "values",
            "interrupts",
            "effects",
            "session__form",
            "session__fields",
            "session__metadata",
            "session__interrupt",
        )

    def get_object(self, request, object_id, from_field=None):
        turn = super().get_object(request, object_id, from_field)
        if turn is not None:
            turn.request, turn.error = scrub(turn.request), scrub(turn.error)
            turn.result = scrub(turn.result)
        return turn

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # Named by the session's key and its number, not by ids.
        turn = self.get_object(request, object_id)
        if turn is not None:
            label = turn_label(turn)
            extra_context = {
                **(extra_context or {}),
                "turn_label": label,
                "subtitle": f"{turn.session.key} {label}",
            }
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="turn", ordering="number")
    def turn_label(self, turn: AgentTurn) -> str:
        return turn_label(turn)

    @admin.display(description="created", ordering="created_at")
    def created(self, turn: AgentTurn) -> str:
        return when(turn.created_at, seconds=False)

    @admin.display(description="finished", ordering="finished_at")
    def finished(self, turn: AgentTurn) -> str:
        return when(turn.finished_at)

    @admin.display(description="session", ordering="session__key")
    def session_key(self, turn: AgentTurn) -> str:
        return clipped(turn.session.key, KEY_CHARS)

    @admin.display(description="idempotency key", ordering="idempotency_key")
    def idempotency(self, turn: AgentTurn) -> str:
        return clipped(turn.idempotency_key, IDEMPOTENCY_KEY_CHARS)

    @admin.display(description="owner", ordering="session__owner")
    def session_owner(self, turn: AgentTurn) -> str:
        return turn.session.owner

    @admin.display(description="session")
    def session_link(self, turn: AgentTurn) -> str:
        url = reverse("admin:sessions_app_agentsession_change", args=[turn.session_id])
        return format_html('<a href="{}">{}</a> ({})', url, turn.session.key, turn.session.owner)

    @admin.display(description="request")
    def request_json(self, turn: AgentTurn) -> str:
        return pretty_json(turn.request)

    @admin.display(description="result")
    def result_json(self, turn: AgentTurn) -> str:
        return pretty_json_text(turn.result)

    @admin.display(description="error")
    def error_json(self, turn: AgentTurn) -> str:
        return pretty_json(turn.error)
