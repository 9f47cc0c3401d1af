"""A base for management commands that use the business tables."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand

from core.database import migration_problem


class NotMigrated(ImproperlyConfigured):
    """The business tables are not there yet. Not a CommandError, which
    Django prints as `CommandError: …`: manage.py's entry point
    (agentsite.cli) tells an ImproperlyConfigured in the one line every
    start-up trouble gets, `agentsite: …` (docs/operations.md, "Start-up
    checks"), and `--traceback` still shows the traceback."""


class MigratedDatabaseCommand(BaseCommand):
    """Before `migrate` the tables are missing and the command would die in
    a traceback (which `2>/dev/null` hides, leaving an empty key in a shell
    variable): it says to migrate instead, and exits non-zero."""

    def execute(self, *args, **options):
        problem = migration_problem()
        if problem is not None:
            raise NotMigrated(problem)
        return super().execute(*args, **options)
