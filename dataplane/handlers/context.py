"""The contract between the server and the handlers: what a handler is given and returns.

A handler is given a `RequestContext` (dataplane/request_context.py, below the handlers since
the helpers they share take it too; handlers import it from here with the rest of their
contract) and the kio request, and returns a `Response`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

from kio.static.protocol import Payload

from dataplane.protocol.encoders import Bytes
from dataplane.request_context import RequestContext

Request: TypeAlias = Any
"""The kio request object of the version the header names. Its fields differ from version to
version, so a handler reads them as the version allows (`getattr` for optional ones)."""

Body: TypeAlias = bytes | list[Bytes] | Payload
"""A response body: encoded by a fast encoder (bytes, or buffers to send back to back), or a kio
response object the server encodes."""

Response: TypeAlias = Body | Awaitable[Body] | None
"""What a handler returns: the body; an awaitable of it when the answer must wait (acks=all,
a fetch long poll), while the server goes on reading the connection and keeps answers in
request order (an awaitable whose `ready` attribute is true would not wait: the server writes
it with the answers beside it); None for no answer at all (acks=0)."""

Handler: TypeAlias = Callable[[RequestContext, Request], Awaitable[Response]]


class HandlerModule(Protocol):
    """A module of handlers/: the API it serves, the versions it accepts, its handler."""

    API_KEY: int
    VERSIONS: tuple[int, int]  # (min, max)

    @property
    def handle(self) -> Handler: ...
