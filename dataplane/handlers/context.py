"""The contract between the server and the handlers: what a handler is given and returns.

A handler is given a `RequestContext` and the kio request, and returns a `Response` (both in
dataplane/request_context.py, below the handlers, since the helpers they share take the one and
quota throttling rewrites the other; handlers import them from here with the rest of their
contract).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

from dataplane.request_context import RequestContext, Response

Request: TypeAlias = Any
"""The kio request object of the version the header names. Its fields differ from version to
version, so a handler reads them as the version allows (`getattr` for optional ones)."""

Handler: TypeAlias = Callable[[RequestContext, Request], Awaitable[Response]]


class HandlerModule(Protocol):
    """A module of handlers/: the API it serves, the versions it accepts, its handler."""

    API_KEY: int
    VERSIONS: tuple[int, int]  # (min, max)

    @property
    def handle(self) -> Handler: ...
