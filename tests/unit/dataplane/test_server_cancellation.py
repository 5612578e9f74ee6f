"""The acceptor survives a connection that ends with a CancelledError no cancel scope raised
(a library's own, as grpc.aio raises when a call it awaits is cancelled): only that connection
closes; before, the stray cancellation cancelled the acceptor's task group, closing every
client connection and accepting no new one, with no log line."""

from __future__ import annotations

import asyncio
import struct
from functools import partial
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest
from anyio.abc import SocketListener, SocketStream

from dataplane import server
from dataplane.connection_quotas import ConnectionQuotas
from dataplane.handlers import HANDLERS
from dataplane.security.listeners import Listener

API_VERSIONS = 18


def _request(correlation_id: int, client_id: bytes) -> bytes:
    """An ApiVersions v0 request: header v1 (key, version, correlation id, client id)."""
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


async def _answer(client: SocketStream) -> int | None:
    """The correlation id of the next answer; None when the broker closed the connection."""
    data = b""
    try:
        while len(data) < 8:
            data += await client.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        return None
    return int(struct.unpack_from(">i", data, 4)[0])


async def _handler(ctx: Any, request: Any) -> bytes:
    if ctx.header.client_id == "stray":
        raise asyncio.CancelledError()  # as grpc.aio's own, unknown to every cancel scope
    return b""


def test_a_stray_cancellation_closes_only_its_connection(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(HANDLERS, API_VERSIONS, _handler)
    services: Any = SimpleNamespace(  # stands in for BrokerServices
        config=SimpleNamespace(socket_request_max_bytes=1 << 20, sasl_server_max_receive_size=0),
        quotas=SimpleNamespace(
            connections=SimpleNamespace(enabled=False), request=SimpleNamespace(enabled=False)
        ),
    )
    quotas = ConnectionQuotas(
        SimpleNamespace(  # type: ignore[arg-type]
            max_connections=100,
            max_connections_per_ip=100,
            max_connections_per_ip_overrides="",
            connections_max_idle_ms=600_000,
        )
    )
    listener = Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")

    async def main() -> tuple[int | None, int | None, int | None]:
        async with await anyio.create_tcp_listener(local_host="127.0.0.1") as sockets:
            port = sockets.extra(anyio.abc.SocketAttribute.local_port)
            handle = partial(server._connection, services, listener, None, quotas)
            async with anyio.create_task_group() as tg:
                (socket_listener,) = sockets.listeners
                tg.start_soon(
                    server._accept, cast(SocketListener, socket_listener), listener, quotas, handle
                )
                with anyio.fail_after(20):
                    bystander = await anyio.connect_tcp("127.0.0.1", port)
                    await bystander.send(_request(1, b"bystander"))
                    assert await _answer(bystander) == 1
                    stray = await anyio.connect_tcp("127.0.0.1", port)
                    await stray.send(_request(2, b"stray"))
                    stray_answer = await _answer(stray)
                    await bystander.send(_request(3, b"bystander"))
                    bystander_answer = await _answer(bystander)
                    newcomer = await anyio.connect_tcp("127.0.0.1", port)
                    await newcomer.send(_request(4, b"newcomer"))
                    newcomer_answer = await _answer(newcomer)
                tg.cancel_scope.cancel()
        return stray_answer, bystander_answer, newcomer_answer

    assert anyio.run(main) == (None, 3, 4)
    assert "a cancellation that no cancel scope raised" in caplog.text
