"""SQLite connections for the store's semantic search: LangGraph's SQLite
store scores a search with sqlite-vec's distance functions, which it loads
as an extension on its connection. Some Python builds (pyenv's and other
builds without `--enable-loadable-sqlite-extensions`) cannot load one: their
`sqlite3.Connection` has no `enable_load_extension`. On those a store's
connection (`sqlite3.connect(..., factory=VectorConnection)`, or
aiosqlite's, which passes it on) defines the three functions the store calls
in Python instead, on the same vectors (sqlite-vec's float32 blobs), so the
store's own SQL runs unchanged. Where the extension loads, it is loaded.

The vectors are written by the store's own statements; Django's connection,
which applies a turn's writes (turns_app.store_tables), needs no function.
"""

from __future__ import annotations

import math
import sqlite3
from array import array
from collections.abc import Sequence

CAN_LOAD_EXTENSIONS = hasattr(sqlite3.Connection, "enable_load_extension")


def _vectors(a: bytes | None, b: bytes | None) -> tuple[array, array] | None:
    if not isinstance(a, bytes) or not isinstance(b, bytes) or len(a) != len(b) or len(a) % 4:
        return None  # a vector of other dims than the index's now: no score
    first, second = array("f"), array("f")
    first.frombytes(a)
    second.frombytes(b)
    return first, second


def cosine(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Cosine similarity; None for vectors of different dims or a zero one
    (also how a turn's staged store items are scored: graphs.runtime.turn_store)."""
    if len(x) != len(y):
        return None
    norms = math.sqrt(sum(v * v for v in x)) * math.sqrt(sum(v * v for v in y))
    if norms == 0.0:
        return None
    return sum(p * q for p, q in zip(x, y, strict=True)) / norms


def distance_cosine(a: bytes | None, b: bytes | None) -> float | None:
    pair = _vectors(a, b)
    similarity = None if pair is None else cosine(*pair)
    return None if similarity is None else 1.0 - similarity


def distance_l2(a: bytes | None, b: bytes | None) -> float | None:
    pair = _vectors(a, b)
    return None if pair is None else math.sqrt(sum((p - q) ** 2 for p, q in zip(*pair, strict=True)))


def distance_l1(a: bytes | None, b: bytes | None) -> float | None:
    pair = _vectors(a, b)
    return None if pair is None else sum(abs(p - q) for p, q in zip(*pair, strict=True))


FUNCTIONS = {
    "vec_distance_cosine": distance_cosine,
    "vec_distance_L2": distance_l2,
    "vec_distance_L1": distance_l1,
}


class VectorConnection(sqlite3.Connection):
    """A connection on which LangGraph's SQLite store can load sqlite-vec,
    by the extension where Python can load one, else by FUNCTIONS."""

    def enable_load_extension(self, enabled: bool, /) -> None:
        if CAN_LOAD_EXTENSIONS:
            super().enable_load_extension(enabled)

    def load_extension(self, name: str, /, *args: object, **kwargs: object) -> None:
        if CAN_LOAD_EXTENSIONS:
            super().load_extension(name, *args, **kwargs)
            return
        for function, implementation in FUNCTIONS.items():
            self.create_function(function, 2, implementation, deterministic=True)
