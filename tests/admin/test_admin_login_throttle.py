"""Admin login throttling (django-axes; docs/operations.md, "Admin"): repeated wrong
passwords lock that username out from that address, even for the right
password, while other users and addresses can still log in."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)

LOGIN = "/admin/login/?next=/admin/"


def attempt(client: Client, username: str, password: str):
    return client.post(LOGIN, {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_wrong_passwords_lock_the_username_out(admin_user, django_user_model, settings):
    django_user_model.objects.create_superuser("other", "o@example.com", "other-password")
    attacker = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = attempt(attacker, "admin", "wrong")
        assert response.status_code == 200  # the form again, with its error
    assert attempt(attacker, "admin", "wrong").status_code == 429
    # Locked: even the right password is refused now.
    response = attempt(attacker, "admin", "password")
    assert response.status_code == 429
    assert not logged_in(attacker)

    # Another user from the same address, and the admin from elsewhere, still get in.
    neighbour = Client(REMOTE_ADDR="198.51.100.7")
    assert attempt(neighbour, "other", "other-password").status_code == 302
    assert logged_in(neighbour)
    elsewhere = Client(REMOTE_ADDR="203.0.113.9")
    assert attempt(elsewhere, "admin", "password").status_code == 302
    assert logged_in(elsewhere)


def test_a_success_resets_the_count(admin_user, settings):
    client = Client(REMOTE_ADDR="198.51.100.8")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt(client, "admin", "wrong")
    assert attempt(client, "admin", "password").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt(client, "admin", "wrong").status_code == 200
    assert attempt(client, "admin", "password").status_code == 302
