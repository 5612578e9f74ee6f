"""What a handler's `Response` (bytes, buffers, a kio entity, a deferred answer or nothing)
is in a given test: each helper fails the test if the handler answered in another shape."""

from __future__ import annotations

import inspect
from typing import Any

from dataplane.request_context import Body, Response


def encoded(response: Response) -> bytes:
    """An answer encoded at once into one buffer."""
    assert isinstance(response, bytes), f"not bytes: {type(response)}"
    return response


def entity(response: Response) -> Any:
    """An answer left to the server to encode: the kio response entity."""
    assert response is not None, "no answer"
    assert not isinstance(response, bytes | list), "already encoded"
    assert not inspect.isawaitable(response), "a deferred answer"
    return response


async def settled(response: Response) -> Body:
    """A deferred answer (acks=all, a long poll), once it is ready."""
    assert inspect.isawaitable(response), f"not deferred: {type(response)}"
    return await response
