"""Assistants in the admin (assistants_app/admin.py): listed with their
owner and version, each page with its config, context, metadata and every
version, read-only; an operator may delete one, versions and all."""

from __future__ import annotations

import pytest

from assistants_app.models import Assistant, AssistantVersion
from assistants_app.services import assistant_create, assistant_patch
from tests.admin.conftest import admin_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_assistants_are_listed_shown_with_their_versions_and_deletable(staff_client):
    made, _ = assistant_create(
        owner="alice",
        graph_id="intake",
        config={"configurable": {"tone": "dry-as-dust"}},
        context={"system_prompt": "Speak like Ada"},
        metadata={"team": "blue"},
        name="ada-helper",
    )
    assistant_patch(owner="alice", assistant_id=str(made.assistant_id), metadata={"stage": "beta-stage"})
    listing = staff_client.get(admin_url("assistants_app_assistant_changelist"))
    assert listing.status_code == 200
    page = listing.content.decode()
    assert "ada-helper" in page and "alice" in page and str(made.assistant_id) in page

    shown = staff_client.get(admin_url("assistants_app_assistant_change", made.pk))
    assert shown.status_code == 200
    page = shown.content.decode()
    for text in ("dry-as-dust", "Speak like Ada", "beta-stage", "ada-helper"):
        assert text in page, text
    # Read-only: no save button, no editable field of its values.
    assert 'name="_save"' not in page and 'name="name"' not in page
    assert page.count("agentsite-json") >= 6  # the assistant's three and each version's

    gone = staff_client.post(admin_url("assistants_app_assistant_delete", made.pk), {"post": "yes"})
    assert gone.status_code == 302
    assert not Assistant.objects.exists() and not AssistantVersion.objects.exists()


def test_the_admin_adds_no_assistant(staff_client):
    assert staff_client.get(admin_url("assistants_app_assistant_add")).status_code == 403
