"""The Kafka protocol listener: one task pair per connection, responses in request order.

A connection's reader parses each frame, runs its handler up to the point where the handler
must wait (an acks=all produce waiting for replicas, a fetch long poll), and queues the result;
the writer sends results strictly in request order. So requests of one connection are applied
in order (a pipelined producer's appends keep their order) while waits overlap.
"""

from __future__ import annotations

import inspect
import logging
import struct
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream

from dataplane import metrics
from dataplane.handlers import HANDLERS, SUPPORTED_VERSIONS
from dataplane.handlers.context import BrokerServices, Connection, RequestContext
from dataplane.protocol.codec import (
    API_VERSIONS,
    MalformedRequest,
    RequestHeader,
    decode_body,
    encode_with_kio,
    frame_response,
    parse_header,
    response_header_flexible,
)
from dataplane.protocol.errors import ConnectionClosed

log = logging.getLogger("rafka.server")

_SIZE = struct.Struct(">i")
_MAX_IN_FLIGHT = 64  # queued responses per connection before the reader waits (back-pressure)
_RECV = 1 << 20


class FrameReader:
    """Splits the byte stream into frames, enforcing socket.request.max.bytes."""

    def __init__(self, stream: SocketStream, max_bytes: int) -> None:
        self._stream = stream
        self._max = max_bytes
        self._buf = bytearray()

    async def _fill(self, n: int) -> bool:
        while len(self._buf) < n:
            try:
                self._buf += await self._stream.receive(max(_RECV, n - len(self._buf)))
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return False
        return True

    async def read(self) -> bytes | None:
        """The next frame without its length prefix; None at a clean end of stream."""
        if not await self._fill(4):
            if self._buf:
                raise ConnectionClosed(f"stream ended inside a length prefix ({len(self._buf)} B)")
            return None
        (size,) = _SIZE.unpack_from(self._buf, 0)
        if size < 0 or size > self._max:
            raise ConnectionClosed(
                f"request of {size} bytes exceeds socket.request.max.bytes={self._max}"
                if size > 0
                else f"negative frame length {size}"
            )
        if not await self._fill(4 + size):
            raise ConnectionClosed(f"stream ended inside a {size}-byte frame")
        frame = bytes(memoryview(self._buf)[4 : 4 + size])
        metrics.BYTES_IN.inc(4 + size)
        del self._buf[: 4 + size]
        return frame


async def serve(
    services: BrokerServices,
    host: str,
    port: int,
    *,
    task_status: Any = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Accept Kafka connections until cancelled; handlers get `services`."""
    listener = await anyio.create_tcp_listener(
        local_host=host or None, local_port=port, reuse_port=False
    )
    log.info("serving the Kafka protocol on %s:%d", host or "*", port)
    task_status.started()
    async with listener:
        await listener.serve(lambda stream: _connection(services, stream))


async def _connection(services: BrokerServices, stream: SocketStream) -> None:
    try:
        addr = stream.extra(SocketAttribute.remote_address)
        peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
    except Exception:
        peer = "?"
    conn = Connection(peer)
    send, receive = anyio.create_memory_object_stream[Any](_MAX_IN_FLIGHT)
    async with stream:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_writer, stream, receive)
                async with send:
                    await _reader(services, conn, stream, send)
        except* ConnectionClosed as group:
            metrics.CLOSED.inc()
            log.warning("closing connection from %s: %s", peer, group.exceptions[0])
        except* (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the peer went away; nothing to answer
        except* Exception as group:  # never let one connection take the listener down
            log.error("internal error on connection from %s; closed it", peer, exc_info=group)


async def _reader(
    services: BrokerServices, conn: Connection, stream: SocketStream, out: Any
) -> None:
    frames = FrameReader(stream, services.config.socket_request_max_bytes)
    while (frame := await frames.read()) is not None:
        try:
            header = parse_header(frame, SUPPORTED_VERSIONS)
        except MalformedRequest as e:
            raise ConnectionClosed(f"malformed request header: {e}") from e
        metrics.request(header.api_key)
        versions = SUPPORTED_VERSIONS.get(header.api_key)
        if versions is None:
            raise ConnectionClosed(
                f"unknown API key {header.api_key} (client {header.client_id!r}); "
                "Kafka closes the connection on requests it cannot parse"
            )
        if not versions[0] <= header.api_version <= versions[1]:
            if header.api_key == API_VERSIONS:
                await out.send((header.correlation_id, False, _unsupported_api_versions()))
                continue
            raise ConnectionClosed(
                f"API key {header.api_key} version {header.api_version} is not supported "
                f"(supported {versions[0]}-{versions[1]}); the client should have negotiated "
                "versions with ApiVersions"
            )
        try:
            body = decode_body(header, frame)
        except MalformedRequest as e:
            raise ConnectionClosed(str(e)) from e
        ctx = RequestContext(services, header, conn, SUPPORTED_VERSIONS)
        try:
            result = await HANDLERS[header.api_key](ctx, body)
        except ConnectionClosed:
            raise
        except Exception as e:
            raise _internal_error(header, e) from e
        if result is None:
            continue  # acks=0 produce: Kafka sends no response
        flexible = response_header_flexible(header.api_key, header.api_version)
        await out.send((header.correlation_id, flexible, result))


async def _writer(stream: SocketStream, queue: Any) -> None:
    async with queue:
        async for correlation_id, flexible, result in queue:
            if inspect.isawaitable(result):
                try:
                    result = await result
                except Exception as e:
                    raise _internal_error(None, e) from e
            try:
                body = result if isinstance(result, bytes | list) else encode_with_kio(result)
            except Exception as e:
                raise _internal_error(None, e) from e
            data = b"".join(frame_response(correlation_id, flexible, body))
            metrics.BYTES_OUT.inc(len(data))
            await stream.send(data)


def _internal_error(header: RequestHeader | None, e: Exception) -> ConnectionClosed:
    """A bug of ours: log it with its traceback and close only this connection."""
    what = f"API {header.api_key} v{header.api_version}" if header else "a deferred response"
    log.error(
        "internal error handling %s; closing the connection (please report)", what, exc_info=e
    )
    return ConnectionClosed(f"internal error handling {what}: {e!r}")


def _unsupported_api_versions() -> bytes:
    """ApiVersions v0 body with UNSUPPORTED_VERSION and our ranges, as KIP-511 asks."""
    from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i16

    return encode_with_kio(
        ApiVersionsResponse(
            error_code=ErrorCode.unsupported_version,
            api_keys=tuple(
                ApiVersion(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
                for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
            ),
        )
    )
