"""One resource per event loop, opened once: the checkpoint savers and the
store each hold connections that belong to the loop that opened them."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    def __init__(self) -> None:
        self.by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()
        self._opening: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    async def get(self, open_: Callable[[], Awaitable[T]]) -> T:
        """This loop's entry; the first caller opens it, concurrent ones wait for it."""
        loop = asyncio.get_running_loop()
        entry = self.by_loop.get(loop)
        if entry is None:
            async with self._opening.setdefault(loop, asyncio.Lock()):
                entry = self.by_loop.get(loop)
                if entry is None:
                    entry = await open_()
                    self.by_loop[loop] = entry
        return entry
