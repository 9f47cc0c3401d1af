"""Graceful stop under daphne: on SIGTERM or SIGINT the server stops
accepting connections, lets running turns finish for up to
AGENT_SHUTDOWN_GRACE_SECONDS, aborts the rest with `server_shutdown` (their
streams get it as their `error` event), waits for the responses in flight to
go out, and only then stops the reactor. A second signal stops at once.

daphne hands both signals straight to Twisted, whose shutdown cancels every
request at once (`kill_all_applications`), so the handlers are replaced once
the reactor runs. Under `runserver`'s autoreloader the server runs on a
thread and the reloader owns the signals: Ctrl-C there stops at once (a dev
server; turns left pending are aborted at the next start).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading

from django.conf import settings

from core.http.inflight import requests
from turns_app import shutdown
from turns_app.execution import running_turns

logger = logging.getLogger(__name__)

# After the turns: how long the last responses get to reach their clients.
FLUSH_SECONDS = 5.0

_stop: asyncio.Future | None = None


def install() -> None:
    if "twisted.internet.reactor" not in sys.modules:
        return  # not under daphne
    from twisted.internet import reactor

    reactor.callWhenRunning(_take_signals)


def _take_signals() -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # runserver's autoreloader: see above
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job ignores Ctrl-C
        signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def _on_signal(signum: int, frame) -> None:
    from twisted.internet import reactor

    # A signal handler must not touch the loop directly: hand it over.
    if _stop is None:
        reactor.callFromThread(_begin, signal.Signals(signum).name)
    else:
        logger.warning("second %s: stopping now", signal.Signals(signum).name)
        reactor.callFromThread(_stop_reactor)


def _begin(name: str) -> None:
    global _stop
    if _stop is None:
        _stop = asyncio.ensure_future(stop_gracefully(name))


def _stop_reactor() -> None:
    from twisted.internet import reactor

    if reactor.running:
        # The ignore: zope.interface declares methods without self, which mypy
        # reads right only with the mypy-zope plugin.
        reactor.stop()  # type: ignore[misc]


def _stop_listening() -> int:
    from twisted.internet import reactor
    from twisted.internet.interfaces import IListeningPort

    # The ignore: zope.interface declares methods without self, which mypy
    # reads right only with the mypy-zope plugin.
    ports = [r for r in reactor.getReaders() if IListeningPort.providedBy(r)]  # type: ignore[misc]
    for port in ports:
        port.stopListening()
    return len(ports)


async def stop_gracefully(name: str) -> None:
    grace = settings.AGENT_SHUTDOWN_GRACE_SECONDS
    try:
        shutdown.begin()
        closed = _stop_listening()
        running = len(running_turns())
        logger.info(
            "%s: stopped accepting (%d listening socket(s)); %d turn(s) running, waiting up to %g s",
            name,
            closed,
            running,
            grace,
        )
        drained = await shutdown.drain(running_turns, grace)
        if not await requests.wait_idle(FLUSH_SECONDS):
            logger.warning("%d request(s) still open after %g s; closing them", requests.count, FLUSH_SECONDS)
        logger.info("stopping: %d turn(s) finished, %d aborted (server_shutdown)", drained.finished, drained.stopped)
    except Exception:
        logger.exception("the graceful stop failed; stopping now")
    finally:
        _stop_reactor()
