"""grpc.aio calls inside anyio cancel scopes.

A task cancelled while it awaits a grpc.aio unary call (or a stream's read) gets a
CancelledError that grpc.aio raises itself once its internal task has cancelled the call; it
bears no mark of the anyio cancel scope that cancelled the task, so that scope (a
move_on_after, a fail_after, a cancelled task group) does not recognise it as its own and lets
it through. An escaped CancelledError cancels the enclosing task group without an error or a
log line: one transaction verification that reached its deadline inside a Produce ended a
broker's acceptor and every client connection, silently. Awaiting calls through `rpc` turns
the cancellation back into the scope's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import anyio
import grpc
from grpc import aio

T = TypeVar("T")


async def rpc(call: Awaitable[T]) -> T:
    """The answer of a grpc.aio call (or a stream's read or write). Cancelled by an anyio
    scope: the scope's own cancellation; cancelled by nobody's scope (its channel was closed
    under it): AioRpcError CANCELLED, which callers handle as any failed call."""
    try:
        return await call
    except asyncio.CancelledError:
        await anyio.lowlevel.checkpoint_if_cancelled()  # raises the cancelling scope's own
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # cancelled by plain asyncio (task.cancel, asyncio.timeout): theirs as is
        raise aio.AioRpcError(
            grpc.StatusCode.CANCELLED,
            aio.Metadata(),
            aio.Metadata(),
            details="the call was cancelled locally (its channel closed)",
        ) from None
