"""The contract between the server and the handlers: what a handler is given and returns.

A handler is given a `RequestContext` and the kio request, and returns a `Response`. Those two
live in dataplane/request_context.py, below the handlers (the helpers handlers share take the one
and quota throttling rewrites the other), and handlers import them from there; this module holds
only what the handlers' registry adds: the untyped `Request`, the `Handler` signature and the
`HandlerModule` protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

from dataplane import request_context

Request: TypeAlias = Any
"""The kio request object of the version the header names, untyped. A handler whose versions
share the fields it reads names kio's classes instead (a union of one class per version served);
one reading fields only some versions have (`x if version >= n`, `getattr` for optional ones)
keeps this: mypy cannot narrow kio's union by the header's version."""

Handler: TypeAlias = Callable[
    [request_context.RequestContext, Request], Awaitable[request_context.Response]
]


class HandlerModule(Protocol):
    """A module of handlers/: the API it serves, the versions it accepts, its handler."""

    API_KEY: int
    VERSIONS: tuple[int, int]  # (min, max)

    @property
    def handle(self) -> Handler: ...
