import pytest
from django.core.management import CommandError, call_command

from core.errors import Unauthorized
from sessions_app.models import ApiKey
from sessions_app.services import api_key_authenticate

pytestmark = pytest.mark.django_db


def test_create_prints_the_key_once_and_stores_only_its_hash(capsys):
    call_command("create_api_key", "carol")
    raw = capsys.readouterr().out.strip()
    key = ApiKey.objects.get(owner="carol")
    assert raw.startswith(f"ask_{key.prefix}_")
    assert raw not in key.key_hash and len(key.key_hash) == 64
    assert api_key_authenticate(raw=raw) == key


def test_revoke_makes_the_key_fail(capsys):
    call_command("create_api_key", "carol")
    raw = capsys.readouterr().out.strip()
    prefix = ApiKey.objects.get(owner="carol").prefix
    call_command("revoke_api_key", prefix)
    with pytest.raises(Unauthorized):
        api_key_authenticate(raw=raw)
    with pytest.raises(CommandError):
        call_command("revoke_api_key", "nope")


def test_create_refuses_a_blank_owner():
    with pytest.raises(CommandError):
        call_command("create_api_key", "  ")
