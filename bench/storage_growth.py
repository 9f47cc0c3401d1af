"""Checkpoint storage and turn time as a conversation grows, with retention
(AGENT_CHECKPOINT_KEEP=1, the default) against a baseline that keeps every
turn's checkpoint, run side by side on the same database kind.

    .venv/bin/python bench/storage_growth.py                 # SQLite (temp file)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python bench/storage_growth.py --turns 100  # PostgreSQL (temp database)

It prints bytes held in the checkpointer's tables for one session at
checkpoints along the way, and the mean time per turn in each window.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")


def prepare_database() -> tuple[str, callable]:
    """A throwaway database of the kind DATABASE_URL names; returns its URL and a cleanup."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        import psycopg

        name = f"agentsite_bench_{uuid.uuid4().hex[:8]}"
        base, _, _ = url.rpartition("/")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

        def drop():
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        return f"{base}/{name}", drop
    folder = tempfile.mkdtemp(prefix="agentsite-bench-")
    return f"sqlite:///{folder}/bench.sqlite3", lambda: None


async def conversation(keep: int, turns: int, marks: list[int]) -> list[tuple[int, int, float]]:
    from django.conf import settings

    from agentsite.agent.checkpointer import close_savers, thread_storage
    from agentsite.asyncdb import db
    from sessions_app.models import AgentSession
    from turns_app.runner import await_turn, start_turn

    settings.AGENT_CHECKPOINT_KEEP = keep
    key = f"bench-keep-{keep}"
    text = ("I would like to book a table for my team; " * 17)[:700]
    rows: list[tuple[int, int, float]] = []
    window_start = time.perf_counter()
    last_mark = 0
    try:
        for n in range(1, turns + 1):
            run = await start_turn(
                owner="bench",
                key=key,
                request={"text": f"{n}: {text}", "client_mode": "chat", "need_form_update": True},
                idempotency_key=None,
            )
            await await_turn(run)
            if n in marks:
                elapsed = time.perf_counter() - window_start
                session = await db(lambda: AgentSession.objects.get(owner="bench", key=key))
                stored = await db(thread_storage, thread_prefix=f"{session.id}:")
                rows.append((n, stored["bytes"], 1000 * elapsed / (n - last_mark)))
                last_mark = n
                window_start = time.perf_counter()
    finally:
        await close_savers()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    marks = sorted({m for m in (10, 50, 100, args.turns) if m <= args.turns})

    url, cleanup = prepare_database()
    os.environ["DATABASE_URL"] = url
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        retained = asyncio.run(conversation(1, args.turns, marks))
        baseline = asyncio.run(conversation(10**9, args.turns, marks))
    finally:
        from django.db import connections

        connections.close_all()
        cleanup()

    kind = "PostgreSQL" if url.startswith("postgres") else "SQLite"
    print(f"checkpoint storage for one session, {kind}, ~700 chars of user text a turn")
    print(f"{'turns':>6} | {'keep all (baseline)':>20} | {'keep 1 (default)':>17} | {'ratio':>6} | "
          f"{'ms/turn base':>12} | {'ms/turn keep 1':>14}")
    for (n, base_bytes, base_ms), (_, kept_bytes, kept_ms) in zip(baseline, retained):
        ratio = base_bytes / kept_bytes if kept_bytes else float("inf")
        print(f"{n:>6} | {base_bytes / 1e6:>17.3f} MB | {kept_bytes / 1e6:>14.3f} MB | {ratio:>5.1f}x | "
              f"{base_ms:>12.1f} | {kept_ms:>14.1f}")


if __name__ == "__main__":
    main()
