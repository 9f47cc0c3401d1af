"""With LOG_FORMAT=json every line the server writes is one JSON object.
daphne writes its access log straight to stdout, past `logging`; in JSON
mode its entries go through the `daphne.access` logger instead."""

from __future__ import annotations

import logging

access_logger = logging.getLogger("daphne.access")


def _write_entry(self, host, date, request, status=None, length=None, ident=None, user=None) -> None:
    access_logger.info(
        '%s "%s" %s %s',
        host,
        request,
        status or "-",
        length or "-",
        extra={"client": host, "request": request, "status": status, "length": length},
    )


def route_daphne_access_log() -> None:
    from daphne.access import AccessLogGenerator

    AccessLogGenerator.write_entry = _write_entry
