"""The session admin's "Set fields" tool: a page of its own next to the
read-only change page, which sets a session's fields through
`session_set_fields` (version-conditional, like the API) and reports the
outcome as admin messages. The service runs its own durable transaction, so
the view must not open one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from core.errors import ApiError, InvalidFields, VersionConflict
from sessions_app.admin.forms import SetFieldsForm
from sessions_app.services import session_set_fields

if TYPE_CHECKING:
    from sessions_app.models import AgentSession


class SetFieldsAdmin(admin.ModelAdmin):
    """The session admin's base: the tool's URL, view and permission, and
    `can_set_fields` on the change page (its template shows the button)."""

    def has_set_fields_permission(self, request) -> bool:
        """Setting fields through the service needs the model's change
        permission, although the page itself is never an edit form."""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "can_set_fields": self.has_set_fields_permission(request),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self):
        return [
            path(
                "<path:object_id>/set-fields/",
                self.admin_site.admin_view(self.set_fields_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_set_fields",
            ),
            *super().get_urls(),
        ]

    def set_fields_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self.get_object(request, unquote(object_id))
        if session is None:
            # Django's own answer to a missing object (a private ModelAdmin method django-stubs leave out).
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_set_fields_permission(request):
            raise PermissionDenied
        change_url = reverse("admin:sessions_app_agentsession_change", args=[session.pk])
        if session.is_deleted:
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
            f"Fields set ({changed} changed); the session is now at version {update.session.version}.",
            messages.SUCCESS,
        )
        return True
