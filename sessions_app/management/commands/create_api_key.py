from django.core.management.base import CommandError

from core.commands import MigratedDatabaseCommand
from core.errors import ApiError
from sessions_app.services import api_key_create


class Command(MigratedDatabaseCommand):
    help = "Create an API key for OWNER and print it once; only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("owner", help="who the key belongs to; sessions are per owner")

    def handle(self, *args, owner: str, **options):
        try:
            key, raw = api_key_create(owner=owner)
        except ApiError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(f"API key {key.prefix}… for {key.owner!r} (shown once, store it now):")
        self.stdout.write(raw)
