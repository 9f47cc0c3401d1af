"""manage.py's entry point, and how a process that cannot start says so.

Start-up trouble an operator can fix (a setting from the environment, a
database that is not there or not migrated, a second server on an SQLite
file) ends the process promptly with a non-zero status and one line saying
what is wrong as the last thing printed — not a traceback, and never a
runserver that hangs without listening. `--traceback` still shows one.
"""

from __future__ import annotations

import json
import os
import sys

# Commands that never open the database: no probe before them.
NO_DATABASE = {
    "help",
    "version",
    "check",
    "collectstatic",
    "findstatic",
    "makemigrations",
    "diffsettings",
    "startapp",
    "startproject",
    "makemessages",
    "compilemessages",
    "sendtestemail",
}
EXIT_REFUSED = 1


def say(message: str) -> None:
    sys.stdout.flush()
    if os.environ.get("LOG_FORMAT") == "json":  # settings may be what is broken
        line = json.dumps({"level": "CRITICAL", "logger": "agentsite", "message": f"agentsite: {message}"})
    else:
        line = f"agentsite: {message}"
    print(line, file=sys.stderr, flush=True)


def refuse_to_start(message: str) -> None:
    """End a serving process that must not serve. `os._exit`, not
    `sys.exit`: under runserver's autoreloader the application is loaded on a
    thread, where SystemExit would end only that thread and leave the
    process up, not listening. The reloader passes the status on."""
    say(f"cannot start: {message}")
    os._exit(EXIT_REFUSED)


def already_serving(name: object, holder: str) -> str:
    return (
        f"another agentsite server (pid {holder}) is already serving {name}. "
        "SQLite mode allows one server process per database file; stop it, "
        "or use PostgreSQL (DATABASE_URL=postgres://…) to run several."
    )


def sqlite_holder(settings_dict: dict) -> str | None:
    """Who holds the SQLite file's single-instance lock (agentsite.startup
    takes it to serve): its pid, or None when no server serves the file.
    Looked at only; the serving process takes the lock itself."""
    import fcntl

    from core.database import is_postgres, sqlite_lock_path

    if is_postgres(settings_dict):
        return None
    lock_path = sqlite_lock_path(settings_dict["NAME"])
    try:
        handle = open(lock_path)  # noqa: SIM115  (closed below, lock or not)
    except FileNotFoundError:
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "another process"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


def refuse_if_served() -> None:
    """`make run`'s first step (`python -m agentsite.cli`), and runserver's:
    a second server on an SQLite file is refused before anything touches the
    file (make run's `migrate`) and before runserver says "Starting …"."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    from django.core.exceptions import ImproperlyConfigured

    try:
        from django.conf import settings

        holder = sqlite_holder(settings.DATABASES["default"])
    except ImproperlyConfigured as exc:
        say(str(exc))
        sys.exit(EXIT_REFUSED)
    if holder is not None:
        say(f"cannot start: {already_serving(settings.DATABASES['default']['NAME'], holder)}")
        sys.exit(EXIT_REFUSED)


def _command(argv: list[str]) -> str:
    args = [a for a in argv[1:] if not a.startswith("-")]
    return args[0] if args else "help"


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    from core.database import DatabaseUnavailable, probe_database

    wants_traceback = "--traceback" in argv
    command = _command(argv)
    try:
        from django.conf import settings

        settings.INSTALLED_APPS  # noqa: B018  (settings from the environment are checked on first use)
        if command == "runserver" and "--help" not in argv and "-h" not in argv:
            refuse_if_served()
        if command not in NO_DATABASE and "--help" not in argv and "-h" not in argv:
            # Before Django's own connection: its pool would wait 10 s and
            # then say only that it timed out.
            probe_database(settings.DATABASES["default"])
        execute_from_command_line(argv)
    except ImproperlyConfigured as exc:  # DatabaseUnavailable and StartupError too
        if wants_traceback:
            raise
        say(str(exc))
        sys.exit(EXIT_REFUSED)
    except OperationalError:
        # The database went away after the probe: explain it if it is gone,
        # otherwise (a bug, a missing table) the traceback is the right answer.
        try:
            probe_database(settings.DATABASES["default"])
        except DatabaseUnavailable as gone:
            if wants_traceback:
                raise
            say(str(gone))
            sys.exit(EXIT_REFUSED)
        raise


if __name__ == "__main__":
    refuse_if_served()
