"""Small helpers the group API handlers share."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dataplane.request_context import RequestContext

_MS = datetime.timedelta(milliseconds=1)


def ms(value: datetime.timedelta | int) -> int:
    """A kio timedelta field in whole milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value / _MS)
    return int(value)


def client_host(ctx: RequestContext) -> str:
    """As Kafka shows a member's host (InetAddress.toString): "/127.0.0.1"."""
    peer = ctx.conn.peer
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")
