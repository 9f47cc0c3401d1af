"""What a move copies: every model of the apps that hold conversations, in
an order that puts a row's parents first; what stays behind, and why."""

from __future__ import annotations

from django.apps import apps
from django.db import models

# The apps whose models hold what a user would lose: every model in them moves.
MOVED_APPS = ("sessions_app", "assistants_app", "turns_app", "booking")
# Installed models that stay behind, and why (tests/turns_app/test_move_sessions.py
# fails when a model is in neither MOVED_APPS nor here).
NOT_MOVED = {
    "auth.user": "admin accounts: create them again with `manage.py createsuperuser`",
    "auth.group": "admin permissions refer to content-type ids, which differ between databases",
    "auth.permission": "created by `migrate` on the target",
    "contenttypes.contenttype": "created by `migrate` on the target",
    "admin.logentry": "the admin's change log refers to content-type ids",
    "sessions.session": "admin browser logins; people log in again",
    "axes.accessattempt": "admin login throttling, per deployment",
    "axes.accessattemptexpiration": "admin login throttling, per deployment",
    "axes.accesslog": "admin login throttling, per deployment",
    "axes.accessfailurelog": "admin login throttling, per deployment",
}

# Models of MOVED_APPS whose rows are not copied, and why: the target's
# database derives them from the moved rows (its triggers), or they belong
# to the source's running processes.
DERIVED = {
    "sessions_app.ownersessioncount": "each owner's live sessions, counted by the target's triggers as sessions move",
    "turns_app.turnfollower": "clients of the source's processes waiting on its turns, not the target's",
}


def moved_models() -> list[type[models.Model]]:
    """Every model of MOVED_APPS, parents before the models that point at them."""
    found = [
        m for label in MOVED_APPS for m in apps.get_app_config(label).get_models() if m._meta.label_lower not in DERIVED
    ]
    ordered: list[type[models.Model]] = []

    def visit(model: type[models.Model], path: tuple = ()) -> None:
        if model in ordered or model in path:
            return
        for f in model._meta.concrete_fields:
            target = f.related_model
            if f.is_relation and isinstance(target, type) and target in found and target is not model:
                visit(target, (*path, model))
        ordered.append(model)

    for model in found:
        visit(model)
    return ordered
