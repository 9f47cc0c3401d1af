"""How many HTTP requests this process is answering: a graceful stop waits
for them (the last events of a stream included) before closing."""

from __future__ import annotations

import asyncio


class InFlight:
    def __init__(self) -> None:
        self.count = 0

    def track(self, app):
        """The ASGI app, counting the HTTP requests it is inside of."""

        async def tracked(scope, receive, send):
            if scope["type"] != "http":
                return await app(scope, receive, send)
            self.count += 1
            try:
                return await app(scope, receive, send)
            finally:
                self.count -= 1

        return tracked

    async def wait_idle(self, timeout: float) -> bool:
        """True once no request is in flight, False if `timeout` ran out first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.count > 0:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True


requests = InFlight()
