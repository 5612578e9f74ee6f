"""`rpc`: a grpc.aio call cancelled by an anyio scope ends as that scope's cancellation (the
scope catches it, nothing around it is cancelled); a call cancelled under its caller (its
channel closed) ends as AioRpcError CANCELLED."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import grpc
import pytest

from common.grpc_cancellation import rpc

Scenario = Callable[[grpc.aio.Channel], Awaitable[None]]


async def _late_unary(request: bytes, context: Any) -> bytes:
    await asyncio.sleep(30)
    return request


async def _late_bidi(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for request in requests:
        await asyncio.sleep(30)
        yield request


async def _unary(channel: grpc.aio.Channel) -> None:
    await rpc(channel.unary_unary("/t.Late/Unary")(b"x", timeout=60))


async def _stream_read(channel: grpc.aio.Channel) -> None:
    call = channel.stream_stream("/t.Late/Bidi")()
    await rpc(call.write(b"x"))
    await rpc(call.read())


async def _with_server(scenario: Callable[[grpc.aio.Channel], Awaitable[Any]]) -> Any:
    server = grpc.aio.server()
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(_late_unary),
        "Bidi": grpc.stream_stream_rpc_method_handler(_late_bidi),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Late", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        with anyio.fail_after(20):
            return await scenario(channel)
    finally:
        await channel.close()
        await server.stop(0)


@pytest.mark.parametrize("call", [_unary, _stream_read], ids=["unary", "stream-read"])
def test_a_deadline_in_flight_is_the_scopes_own_cancellation(call: Scenario) -> None:
    async def scenario(channel: grpc.aio.Channel) -> tuple[bool, bool]:
        neighbour_done = False

        async def neighbour() -> None:
            nonlocal neighbour_done
            await anyio.sleep(0.5)
            neighbour_done = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(neighbour)
            with anyio.move_on_after(0.1) as deadline:
                await call(channel)
        return deadline.cancelled_caught, neighbour_done

    assert anyio.run(_with_server, scenario) == (True, True)


def test_a_call_cancelled_under_its_caller_is_an_rpc_error() -> None:
    async def scenario(channel: grpc.aio.Channel) -> grpc.StatusCode:
        call = channel.unary_unary("/t.Late/Unary")(b"x", timeout=60)
        asyncio.get_running_loop().call_later(0.1, call.cancel)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await rpc(call)
        return failed.value.code()

    assert anyio.run(_with_server, scenario) == grpc.StatusCode.CANCELLED
