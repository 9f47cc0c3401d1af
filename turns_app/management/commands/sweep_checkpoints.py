from django.core.management.base import BaseCommand

from turns_app.checkpoints import checkpoints_sweep
from turns_app.services import events_compact, turns_expire_dead


class Command(BaseCommand):
    help = (
        "Abort turns whose lease ran out (their process died), then drop checkpoint "
        "threads no session reads any more (late writes from deleted epochs, runs whose "
        "lease was taken), and compact the event logs of turns that ended more than "
        "AGENT_EVENT_RETENTION_SECONDS ago. Safe while serving."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="list, do not delete")

    def handle(self, *args, dry_run: bool = False, **options):
        if not dry_run:
            expired = turns_expire_dead()
            self.stdout.write(f"aborted {expired} turn(s) whose lease ran out")
            compacted = events_compact()
            self.stdout.write(f"compacted {compacted} event(s) of finished turns")
        dropped = checkpoints_sweep(dry_run=dry_run)
        verb = "would drop" if dry_run else "dropped"
        self.stdout.write(f"{verb} {len(dropped)} checkpoint thread(s)")
        for thread_id in dropped:
            self.stdout.write(f"  {thread_id}", style_func=None)
