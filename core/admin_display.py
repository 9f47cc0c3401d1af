"""Rendering helpers the admin pages share: read-only values, tables and
JSON blocks, and a text-box list filter. Plain Django, no app models."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.timezone import localtime


def scrub(value: Any) -> Any:
    """A copy of stored JSON with lone surrogates shown as U+FFFD. The API
    refuses them, but SQLite kept what older versions (or a model) stored,
    and one of them in a page fails the whole response's encoding."""
    if isinstance(value, str):
        if value.isascii():
            return value
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value


def display_value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# Compact and sortable; the locale's "Nov. 30, 2026, 8:04 p.m." wraps in a
# 1280 px table column.
WHEN_FORMAT = "Y-m-d H:i:s"


# Longer session keys are cut with "…" in lists (whole in the tooltip and on
# the page): the session list's and the turn list's key columns.
KEY_CHARS = 40


def clipped(value: str | None, limit: int) -> str:
    """A long value cut to `limit` characters with "…", whole in the tooltip:
    a 255-character session key must not widen a list past the screen."""
    if not value:
        return "—" if value is None else ""
    if len(value) <= limit:
        return value
    return format_html('<span title="{}">{}…</span>', value, value[: limit - 1])


def when(moment, *, seconds: bool = True) -> str:
    """`seconds=False` for list columns, where every pixel of width counts."""
    return date_format(localtime(moment), WHEN_FORMAT if seconds else WHEN_FORMAT[:-2]) if moment else "—"


def html_table(headers: list[str], rows: list[list[Any]], empty: str) -> str:
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


def pretty_json(value: Any) -> str:
    """A read-only `<pre>` block of indented JSON (escaped)."""
    if value is None or value == "":
        return "—"
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    return format_html('<pre class="agentsite-json">{}</pre>', text)


def pretty_json_text(raw: str | None) -> str:
    """Stored JSON text (a turn's committed body) shown indented; text that is
    not JSON is shown as it is."""
    if not raw:
        return "—"
    try:
        return pretty_json(json.loads(raw))
    except ValueError:
        return format_html('<pre class="agentsite-json">{}</pre>', raw)


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


def light_changelist(*deferred: str) -> type[ChangeList]:
    """A ChangeList that leaves `deferred` columns out of its query: a list
    page shows none of them, and a session's transcript or form can be
    megabytes a row. Change pages still load whole rows."""

    class LightChangeList(ChangeList):
        def get_queryset(self, request, exclude_parameters=None):
            return super().get_queryset(request, exclude_parameters).defer(*deferred)

    return LightChangeList
