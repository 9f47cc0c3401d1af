from core.commands import MigratedDatabaseCommand
from turns_app.maintenance import maintenance_run


class Command(MigratedDatabaseCommand):
    help = (
        "Run the periodic maintenance once, by hand (the server runs it every "
        "AGENT_MAINTENANCE_INTERVAL_SECONDS): abort turns whose lease ran out, compact the "
        "event logs of turns that ended more than AGENT_EVENT_RETENTION_SECONDS ago, drop "
        "checkpoint threads no session reads any more, delete sessions idle for "
        "AGENT_SESSION_IDLE_DAYS and threads whose TTL ran out, and remove tombstones older than AGENT_TOMBSTONE_DAYS. "
        "Safe while serving."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="list the threads it would drop; change nothing")

    def handle(self, *args, dry_run: bool = False, **options):
        report = maintenance_run(dry_run=dry_run)
        if not dry_run:
            self.stdout.write(f"aborted {report.turns_expired} turn(s) whose lease ran out")
            self.stdout.write(f"compacted {report.events_compacted} event(s) of finished turns")
            self.stdout.write(f"deleted {report.sessions_expired} idle session(s)")
            self.stdout.write(f"deleted {report.threads_ttl_expired} thread(s) whose TTL ran out")
            self.stdout.write(f"pruned {report.threads_ttl_pruned} thread(s) whose keep_latest TTL ran out")
            self.stdout.write(f"removed {report.tombstones_removed} tombstone(s)")
        verb = "would drop" if dry_run else "dropped"
        self.stdout.write(f"{verb} {len(report.threads_dropped)} checkpoint thread(s)")
        for thread_id in report.threads_dropped:
            self.stdout.write(f"  {thread_id}", style_func=None)
