"""Copying the business rows: every moved model, a page at a time in
primary-key order, values as they were read (timestamps included); the
NUL character PostgreSQL cannot store refused or, asked to, stripped."""

from __future__ import annotations

from typing import Any

from django.core.management.color import no_style
from django.db import DEFAULT_DB_ALIAS, connections, models

from turns_app.moving.moved_models import moved_models
from turns_app.moving.report import MoveRefused

BATCH_SIZE = 500


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, (list, tuple)):
        return any(has_nul(v) for v in value)
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    return False


def without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    if isinstance(value, tuple):
        return tuple(without_nul(v) for v in value)
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    return value


def _check_nul(obj: models.Model, fields: list[models.Field], strip_nul: bool) -> None:
    """PostgreSQL stores no U+0000 in text or jsonb; SQLite does. The service
    refuses it in requests and strips it from model output, but rows written
    before that (or by hand) may hold it."""
    for f in fields:
        value = getattr(obj, f.attname)
        if not has_nul(value):
            continue
        if not strip_nul:
            raise MoveRefused(
                f"{obj._meta.db_table} row {obj.pk} holds the NUL character (U+0000) in `{f.attname}`, "
                "which PostgreSQL cannot store: rerun with --strip-nul to drop it from every value"
            )
        setattr(obj, f.attname, without_nul(value))


def copy_model(model: type[models.Model], target: str, *, batch_size: int, strip_nul: bool) -> int:
    """Copy every row of `model`, `batch_size` at a time in primary-key order.
    `_insert(raw=True)` is what loaddata's `save_base(raw=True)` ends in: it
    writes the values read, where bulk_create would stamp `auto_now` /
    `auto_now_add` fields with the time of the move."""
    fields = list(model._meta.local_concrete_fields)
    source_rows = model._base_manager.using(DEFAULT_DB_ALIAS).order_by("pk")
    target_rows = model._base_manager.using(target)
    ops = connections[target].ops
    copied = 0
    last = None
    while True:
        page = source_rows if last is None else source_rows.filter(pk__gt=last)
        batch = list(page[:batch_size])
        if not batch:
            return copied
        for obj in batch:
            _check_nul(obj, fields, strip_nul)
        step = max(ops.bulk_batch_size(fields, batch), 1)
        for start in range(0, len(batch), step):
            # QuerySet._insert: the rows as they are (raw, no save() or
            # auto_now); a private method django-stubs leave out.
            target_rows._insert(batch[start : start + step], fields=fields, using=target, raw=True)  # type: ignore[attr-defined]
        copied += len(batch)
        last = batch[-1].pk
        forget_queries(target)


def forget_queries(target: str) -> None:
    # Under DEBUG every statement (a whole batch's values) is kept in memory.
    connections[DEFAULT_DB_ALIAS].queries_log.clear()
    connections[target].queries_log.clear()


def reset_sequences(target: str) -> None:
    conn = connections[target]
    with conn.cursor() as cursor:
        for sql in conn.ops.sequence_reset_sql(no_style(), moved_models()):
            cursor.execute(sql)
