from django.core.management.base import CommandError

from core.commands import MigratedDatabaseCommand
from sessions_app.models import ApiKey
from sessions_app.services import api_key_revoke


class Command(MigratedDatabaseCommand):
    help = "Revoke the API key with this prefix (the part after ask_, shown when it was created)."

    def add_arguments(self, parser):
        parser.add_argument("prefix")

    def handle(self, *args, prefix: str, **options):
        key = ApiKey.objects.filter(prefix=prefix.removeprefix("ask_")).first()
        if key is None:
            raise CommandError(f"no API key with prefix {prefix!r}")
        api_key_revoke(api_key=key)
        self.stdout.write(f"revoked {key.prefix}… ({key.owner})")
