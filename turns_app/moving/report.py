"""What a move answers: a report of what it copied, or MoveRefused with
the one line that says why it did not run."""

from __future__ import annotations

from dataclasses import dataclass, field


class MoveRefused(Exception):
    """The move cannot (or must not) run; the message says why, in one line,
    and nothing was written to the target's tables."""


@dataclass
class MoveReport:
    rows: dict[str, int] = field(default_factory=dict)  # db_table -> rows copied
    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    seconds: float = 0.0
