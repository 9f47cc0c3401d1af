"""Static files (the admin's CSS and JS) served by the app itself, with
DEBUG off, under daphne: WhiteNoise, whose middleware is sync-only. Under
ASGI Django would run every request through one more thread hop for it, so
this subclass is async: a request that is not for a static file goes on
without leaving the event loop."""

from __future__ import annotations

import warnings

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware


class AsyncWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    sync_capable = False
    async_capable = True

    def __init__(self, get_response=None, **kwargs) -> None:
        assert iscoroutinefunction(get_response), "an async middleware chain is expected"
        with warnings.catch_warnings():
            # STATIC_ROOT exists only after collectstatic; the finders cover
            # a process that never ran it, so its absence is no news.
            warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)
            super().__init__(get_response, **kwargs)
        markcoroutinefunction(self)

    async def __call__(self, request):
        if self.autorefresh:  # DEBUG: looks on disk, every request
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(request.path_info)
        else:  # indexed once at start-up
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return await self.get_response(request)
        return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
