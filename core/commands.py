"""A base for management commands that use the business tables."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.database import migration_problem


class MigratedDatabaseCommand(BaseCommand):
    """Before `migrate` the tables are missing and the command would die in
    a traceback (which `2>/dev/null` hides, leaving an empty key in a shell
    variable): it says to migrate instead, and exits non-zero."""

    def execute(self, *args, **options):
        problem = migration_problem()
        if problem is not None:
            raise CommandError(problem)
        return super().execute(*args, **options)
