from django.core.management.base import CommandError

from core.commands import MigratedDatabaseCommand
from turns_app.moving import BATCH_SIZE, MoveRefused, move_sessions


class Command(MigratedDatabaseCommand):
    help = (
        "Copy every session (with its turns, history, events, bookings and paused runs' checkpoints) "
        "and every API key from this database (DATABASE_URL, normally the SQLite file) into the "
        "PostgreSQL database --to names, keeping ids, versions and timestamps. Migrates the target "
        "first; refuses one that already holds sessions unless --replace. Stop the server first."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--to", required=True, metavar="DATABASE_URL", help="postgres://USER:PASSWORD@HOST:5432/NAME"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="delete every session, turn, API key, booking and checkpoint the target holds first",
        )
        parser.add_argument(
            "--strip-nul",
            action="store_true",
            help="drop the NUL character (U+0000), which PostgreSQL cannot store, from every value",
        )
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="rows read and written at a time")

    def handle(self, *args, to: str, replace: bool, strip_nul: bool, batch_size: int, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        try:
            report = move_sessions(
                to=to, replace=replace, strip_nul=strip_nul, batch_size=batch_size, say=self.stderr.write
            )
        except MoveRefused as exc:
            raise CommandError(str(exc)) from None
        rows = report.rows
        self.stdout.write(
            f"moved {rows.get('agent_sessions', 0)} session(s), {rows.get('agent_turns', 0)} turn(s), "
            f"{rows.get('agent_api_keys', 0)} API key(s) and {report.threads} checkpoint thread(s) "
            f"in {report.seconds:.1f} s; serve from the target now: DATABASE_URL=<the --to URL>"
        )
