"""The failure-window report (docs/invariants.md, "Failure windows"): every system scenario records what it
attempted and what the database holds afterwards; the run prints one table
and writes it to artifacts/system-report.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db import connection

from core.database import is_postgres

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Row:
    scenario: str
    database: str
    attempted: int
    committed: int
    aborted: int
    lost: int
    duplicated: int
    recovery_seconds: float | None
    # Bookings (the booking graph's side effect) in the database afterwards:
    # each must be a committed turn's, exactly once. None: no bookings made.
    bookings: int | None = None


ROWS: list[Row] = []


def database_kind() -> str:
    return "PostgreSQL" if is_postgres(connection.settings_dict) else "SQLite"


def record(
    scenario: str,
    *,
    attempted: int,
    committed: int,
    aborted: int,
    lost: int,
    duplicated: int,
    recovery_seconds: float | None = None,
    bookings: int | None = None,
) -> None:
    """Call once per scenario run, after the scenario's own assertions held
    (a failing scenario must fail its test, not just print a bad row)."""
    ROWS.append(
        Row(scenario, database_kind(), attempted, committed, aborted, lost, duplicated, recovery_seconds, bookings)
    )


def table() -> str:
    lines = [
        "| scenario | database | attempted | committed | aborted | lost | duplicated | bookings | recovery |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in ROWS:
        recovery = "" if r.recovery_seconds is None else f"{r.recovery_seconds:.2f} s"
        bookings = "" if r.bookings is None else str(r.bookings)
        lines.append(
            f"| {r.scenario} | {r.database} | {r.attempted} | {r.committed} | {r.aborted} "
            f"| {r.lost} | {r.duplicated} | {bookings} | {recovery} |"
        )
    return "\n".join(lines)


def write() -> Path | None:
    if not ROWS:
        return None
    out = ROOT / "artifacts" / f"system-report-{database_kind().lower()}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(table() + "\n")
    return out
