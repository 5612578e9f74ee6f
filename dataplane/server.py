"""The Kafka protocol listener: one task pair per connection, responses in request order.

A connection's reader parses each frame, runs its handler up to the point where the handler
must wait (an acks=all produce waiting for replicas, a fetch long poll), and queues the result;
the writer sends results strictly in request order. So requests of one connection are applied
in order (a pipelined producer's appends keep their order) while waits overlap.

Each listener (``listeners``) has its security protocol: TLS listeners wrap the socket after the
accept (the plaintext path is the bare socket, untouched); on SASL listeners a connection may
only negotiate versions and authenticate until its SASL session is authenticated and current.

Limits (connection_quotas.py): max.connections, max.connections.per.ip and
connections.max.idle.ms as Kafka applies them; an accept that fails (out of descriptors) is
logged and retried after a pause while the open connections are served on. The answers ready
and not yet written hold at most _MAX_QUEUED_BYTES per connection (and _MAX_IN_FLIGHT of them):
past that the reader stops reading requests, so a client that does not read its answers cannot
make the broker hold unbounded memory.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import ssl
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from functools import partial
from typing import Any, cast

import anyio
from anyio.abc import ByteStream, SocketAttribute, SocketListener, SocketStream
from kio.schema.index import api_key_map

from dataplane import metrics
from dataplane.connection import Connection
from dataplane.connection_quotas import ConnectionQuotas, Live
from dataplane.handlers import HANDLERS, SUPPORTED_VERSIONS
from dataplane.log.errors import out_of_resources, resource_advice
from dataplane.metrics.requests import BY_API, RequestStamp
from dataplane.metrics.requests import listener as listener_metrics
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
from dataplane.quota import throttle as quota
from dataplane.request_context import BrokerServices, RequestContext
from dataplane.security.listeners import Listener
from dataplane.security.sasl.session import SaslState
from dataplane.security.ssl_principal import NoMatchingRule
from dataplane.security.tls import ServerTls
from dataplane.security.tls_stream import ServerTlsStream

log = logging.getLogger("rafka.server")

_SIZE = struct.Struct(">i")
_WRITE_BATCH_BYTES = 1 << 20  # answers gathered for one write at most
_MAX_IN_FLIGHT = 64  # queued responses per connection before the reader waits (back-pressure)
_MAX_QUEUED_BYTES = 16 << 20  # bytes of ready answers per connection before the reader waits
_ACCEPT_BACKOFF_S = 0.2  # pause after a failed accept (the pending connection stays queued)
_RECV = 1 << 20
_TLS_HANDSHAKE_TIMEOUT_S = 10.0
_FAILED_AUTH_LINGER_S = 1.0  # how long a refused client gets to read the error and close
# What a SASL connection may send before it is authenticated, or once its session expired
# (KIP-368): ApiVersions, SaslHandshake, SaslAuthenticate.
_SASL_OPEN_APIS = frozenset({18, 17, 36})
_SASL_AUTHENTICATE = 36


class FrameReader:
    """Splits the byte stream into frames, enforcing socket.request.max.bytes."""

    def __init__(self, stream: ByteStream, max_bytes: int) -> None:
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

    async def read(self, unauthenticated_max: int = 0) -> bytes | None:
        """The next frame without its length prefix; None at a clean end of stream. A client
        that has not authenticated yet (``unauthenticated_max`` set) may send no more than
        sasl.server.max.receive.size, so it cannot make the broker buffer a large frame."""
        if not await self._fill(4):
            if self._buf:
                raise ConnectionClosed(f"stream ended inside a length prefix ({len(self._buf)} B)")
            return None
        (size,) = _SIZE.unpack_from(self._buf, 0)
        limit, setting = (
            (unauthenticated_max, "sasl.server.max.receive.size before authentication")
            if unauthenticated_max
            else (self._max, "socket.request.max.bytes")
        )
        if size < 0 or size > limit:
            raise ConnectionClosed(
                f"request of {size} bytes exceeds {setting}={limit}"
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
    listeners: Sequence[Listener],
    tls: Mapping[str, ServerTls],
    quotas: ConnectionQuotas,
    *,
    task_status: Any = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Accept Kafka connections on every listener until cancelled; handlers get `services`.
    `tls` holds the context of each TLS listener (by name); `quotas` the connection limits."""
    async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
        tg.start_soon(quotas.sweep)
        for listener in listeners:
            sockets = await anyio.create_tcp_listener(
                local_host=listener.host or None, local_port=listener.port, reuse_port=False
            )
            await stack.enter_async_context(sockets)
            log.info(
                "serving the Kafka protocol on %s:%d (listener %s, %s)",
                listener.host or "*",
                listener.port,
                listener.name,
                listener.security_protocol,
            )
            context = tls.get(listener.name)
            if context is not None:
                tg.start_soon(context.watch)
            handle = partial(_connection, services, listener, context, quotas)
            for socket_listener in sockets.listeners:  # one per address family
                tg.start_soon(
                    _accept, cast(SocketListener, socket_listener), listener, quotas, handle
                )
        task_status.started()


async def _accept(
    sockets: SocketListener,
    listener: Listener,
    quotas: ConnectionQuotas,
    handle: Any,
) -> None:
    """Kafka's acceptor: wait for a connection slot (max.connections), accept, hand the
    connection to its own task. A failed accept never ends the listener: out of descriptors,
    it is logged and retried after a pause, the open connections being served meanwhile."""
    failures = 0
    async with anyio.create_task_group() as tg:
        while True:
            await quotas.wait_for_slot()
            try:
                stream = await sockets.accept()
            except OSError as e:
                failures += 1
                if failures == 1 or failures % 100 == 0:
                    log.error(
                        "cannot accept connections on listener %s (%d failure(s) in a row): %s%s; "
                        "the open connections are served meanwhile",
                        listener.name,
                        failures,
                        e,
                        f"; {resource_advice(e)}" if out_of_resources(e) else "",
                    )
                await anyio.sleep(_ACCEPT_BACKOFF_S)
                continue
            failures = 0
            tg.start_soon(handle, stream)


async def _connection(
    services: BrokerServices,
    listener: Listener,
    tls: ServerTls | None,
    quotas: ConnectionQuotas,
    stream: SocketStream,
) -> None:
    try:
        addr = stream.extra(SocketAttribute.remote_address)
        host, peer = (
            (addr[0], f"{addr[0]}:{addr[1]}") if isinstance(addr, tuple) else ("", str(addr))
        )
    except Exception:
        host, peer = "", "?"
    with anyio.CancelScope() as scope:
        live = Live(host, scope.cancel)
        if not quotas.admit(live):
            await stream.aclose()
            return
        try:
            await _serve_connection(services, listener, tls, stream, live, host, peer)
        except anyio.get_cancelled_exc_class() as e:
            await _contain_stray_cancellation(peer, e)
        finally:
            quotas.release(live)
    if scope.cancel_called:
        await stream.aclose()  # closed for its limits (idle, max.connections)


async def _contain_stray_cancellation(peer: str, cancelled: BaseException) -> None:
    """A cancellation that no cancel scope raised (a library's own CancelledError) ends this
    connection only: escaping, it would cancel the acceptor's task group, and with it every
    connection and the accepting of new ones, without a word. A scope's cancellation (the
    connection's limits, the broker stopping) goes on."""
    await anyio.lowlevel.checkpoint_if_cancelled()
    log.error(
        "internal error on connection from %s: a cancellation that no cancel scope raised; "
        "closed the connection (please report)",
        peer,
        exc_info=cancelled,
    )


async def _serve_connection(
    services: BrokerServices,
    listener: Listener,
    tls: ServerTls | None,
    stream: SocketStream,
    live: Live,
    host: str,
    peer: str,
) -> None:
    conn = Connection(
        peer, listener=listener.name, security_protocol=listener.security_protocol, host=host
    )
    if services.quotas.connections.enabled and await _over_connection_rate(services, conn, stream):
        return
    transport: ByteStream = stream
    connections, auth_ok, auth_failed = listener_metrics(listener.name)
    if tls is not None:
        wrapped = await _tls_handshake(tls, conn, stream)
        if wrapped is None:
            auth_failed.inc()
            return
        auth_ok.inc()
        transport = wrapped
    if listener.sasl:
        conn.sasl = services.sasl.new_session(listener.name)
    send, receive = anyio.create_memory_object_stream[Any](_MAX_IN_FLIGHT)
    connections.inc()
    async with transport:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_writer, transport, receive, live)
                async with send:
                    await _reader(services, conn, transport, send, live)
            if conn.sasl is not None and conn.sasl.closing:
                await _linger(transport)
        except* ConnectionClosed as group:
            metrics.CLOSED.inc()
            log.warning("closing connection from %s: %s", peer, group.exceptions[0])
        except* (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as group:
            log.debug("connection from %s ended: %r", peer, group.exceptions[0])  # peer gone
        except* Exception as group:  # never let one connection take the listener down
            log.error("internal error on connection from %s; closed it", peer, exc_info=group)
        finally:
            connections.dec()
            if conn.share_sessions:
                services.share_partitions.connection_closed(conn, conn.share_sessions)


async def _tls_handshake(
    tls: ServerTls, conn: Connection, stream: SocketStream
) -> ServerTlsStream | None:
    """The TLS stream of an accepted connection, its principal set from the client certificate
    on SSL listeners; None (socket closed, reason logged) if the handshake fails."""
    try:
        with anyio.fail_after(_TLS_HANDSHAKE_TIMEOUT_S):
            wrapped = await ServerTlsStream.handshake(stream, tls.context)
    except TimeoutError:
        await stream.aclose()
        log.warning(
            "TLS handshake with %s on listener %s took over %.0fs; closed the connection",
            conn.peer,
            conn.listener,
            _TLS_HANDSHAKE_TIMEOUT_S,
        )
        return None
    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError) as e:
        await stream.aclose()
        if isinstance(e, ssl.SSLError):
            log.warning(
                "TLS handshake with %s on listener %s failed: %s — the client must use TLS "
                "(security.protocol SSL or SASL_SSL), trust the broker's CA%s",
                conn.peer,
                conn.listener,
                e.reason or e,
                " and present a certificate the truststore trusts" if tls.client_auth else "",
            )
        else:  # closed before finishing the handshake, such as a port probe
            log.debug("connection from %s closed during the TLS handshake", conn.peer)
        return None
    certificate = wrapped.peer_certificate()
    if certificate is not None and conn.security_protocol == "SSL":
        try:
            conn.principal = tls.principal(certificate)
        except NoMatchingRule as e:
            await wrapped.aclose()
            log.warning(
                "refused the client certificate of %s on listener %s: %s — add a rule (or "
                "DEFAULT) to ssl.principal.mapping.rules",
                conn.peer,
                conn.listener,
                e,
            )
            return None
    return wrapped


async def _reader(  # noqa: C901 - a request's way through a connection, in order
    services: BrokerServices, conn: Connection, stream: ByteStream, out: Any, live: Live
) -> None:
    frames = FrameReader(stream, services.config.socket_request_max_bytes)
    sasl_max = services.config.sasl_server_max_receive_size
    while (
        frame := await _read_frame(
            frames,
            conn,
            sasl_max if conn.sasl is not None and not conn.sasl.authenticated else 0,
            live,
        )
    ) is not None:
        received = live.last_active = time.monotonic()
        if conn.sasl is not None and conn.sasl.raw_tokens:  # bare SASL tokens (SaslHandshake v0)
            with _sasl_outcome(conn):
                token = await services.sasl.raw_token(conn, frame)
            await _queue(out, live, None, False, token, None)
            if conn.sasl.closing:
                return  # authentication failed: the answer goes out, then _linger and close
            continue
        try:
            header = parse_header(frame, SUPPORTED_VERSIONS)
        except MalformedRequest as e:
            raise ConnectionClosed(f"malformed request header: {e}") from e
        api = BY_API.get(header.api_key)
        if api is not None:
            api.requests += 1
        if conn.sasl is not None and header.api_key not in _SASL_OPEN_APIS:
            _check_sasl_session(conn, header)
        versions = SUPPORTED_VERSIONS.get(header.api_key)
        if versions is None:
            raise ConnectionClosed(
                f"unknown API key {header.api_key} (client {header.client_id!r}); "
                "Kafka closes the connection on requests it cannot parse"
            )
        if not versions[0] <= header.api_version <= versions[1]:
            if header.api_key == API_VERSIONS:
                await _queue(
                    out, live, header.correlation_id, False, _unsupported_api_versions(), None
                )
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
        ctx = RequestContext(services, header, conn, SUPPORTED_VERSIONS, size=len(frame))
        started = time.monotonic()
        try:
            if header.api_key == _SASL_AUTHENTICATE:
                with _sasl_outcome(conn):
                    result = await HANDLERS[header.api_key](ctx, body)
            else:
                result = await HANDLERS[header.api_key](ctx, body)
        except ConnectionClosed:
            raise
        except Exception as e:
            raise _internal_error(header, e) from e
        if services.quotas.request.enabled:
            quota.request_time(ctx, int((time.monotonic() - started) * 1e9))
        if ctx.throttle_ms:
            result = quota.with_throttle_time(
                result, ctx.throttle_ms, header.api_key, header.api_version
            )
        if result is None:
            continue  # acks=0 produce: Kafka sends no response
        flexible = response_header_flexible(header.api_key, header.api_version)
        stamp = (
            RequestStamp(api, received, started, time.monotonic(), ctx.throttle_ms)
            if api is not None
            else None
        )
        await _queue(out, live, header.correlation_id, flexible, result, stamp)
        if conn.sasl is not None and conn.sasl.closing:
            return  # SASL authentication failed: the answer goes out, then _linger and close


async def _linger(stream: ByteStream) -> None:
    """After a failed authentication, whose answer is out: wait for the client to close (at
    most _FAILED_AUTH_LINGER_S), reading and dropping what it sends. Closing at once costs
    some clients the answer: kafka-python drops bytes read together with the end of the
    stream, and reports a bare disconnection instead of SASL_AUTHENTICATION_FAILED."""
    with (
        anyio.move_on_after(_FAILED_AUTH_LINGER_S),
        contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError),
    ):
        while True:
            await stream.receive()


async def _read_frame(
    frames: FrameReader, conn: Connection, unauthenticated_max: int, live: Live
) -> bytes | None:
    """The next frame, once a quota throttle's mute is over (KIP-219: the throttled client's
    requests wait in its socket buffer, not in the broker) and the writer has taken the
    answers past _MAX_QUEUED_BYTES."""
    if conn.muted_until:
        await quota.wait_unmuted(conn)
    while live.queued > _MAX_QUEUED_BYTES:
        live.drained = anyio.Event()
        await live.drained.wait()
    return await frames.read(unauthenticated_max)


async def _queue(
    out: Any,
    live: Live,
    correlation_id: int | None,
    flexible: bool,
    result: Any,
    stamp: RequestStamp | None,
) -> None:
    """Queue an answer for the writer, counting the bytes of a ready one (an awaitable one is
    resolved by the writer, one at a time)."""
    if isinstance(result, bytes):
        size = len(result)
    elif isinstance(result, list):
        size = sum(map(len, result))
    else:
        size = 0
    live.queued += size
    await out.send((correlation_id, flexible, result, stamp, size))


async def _over_connection_rate(
    services: BrokerServices, conn: Connection, stream: SocketStream
) -> bool:
    """KIP-612: a connection over its IP's connection_creation_rate is not served; it is
    closed after the throttle time (Kafka's delayed close, so the client does not retry at
    once). True: it was."""
    throttle_ms = services.quotas.connections.record(conn.host)
    if throttle_ms <= 0:
        return False
    log.info(
        "connection from %s is over the connection_creation_rate quota of %s; closing it in "
        "%d ms (raise or remove the ip quota with `rafka quotas alter` if it should be served)",
        conn.peer,
        conn.host,
        throttle_ms,
    )
    await anyio.sleep(throttle_ms / 1000.0)
    await stream.aclose()
    return True


def _check_sasl_session(conn: Connection, header: RequestHeader) -> None:
    """Kafka closes a SASL connection that sends anything but the handshake before it has
    authenticated, or after its session lifetime (KIP-368) without re-authenticating."""
    session = conn.sasl
    assert session is not None
    if session.authenticated and (
        not session.expires_at_ms or time.time() * 1000 < session.expires_at_ms
    ):
        return
    api = api_key_map.get(header.api_key, "unknown API")
    what = (
        "after its SASL session expired (connections.max.reauth.ms) without re-authenticating"
        if session.authenticated
        else "before SASL authentication"
    )
    raise ConnectionClosed(
        f"{api} (API key {header.api_key}, client {header.client_id!r}) {what} on listener "
        f"{conn.listener}; the client must authenticate with SaslHandshake/SaslAuthenticate "
        "(check its sasl.mechanism and security.protocol)"
    )


@contextmanager
def _sasl_outcome(conn: Connection) -> Iterator[None]:
    """Count a SASL step that completes or fails an authentication (Kafka's
    successful-/failed-authentication-total of the listener)."""
    session = conn.sasl
    before = session.state if session is not None else None
    try:
        yield
    except ConnectionClosed:
        listener_metrics(conn.listener)[2].inc()
        raise
    if session is None or session.state is before:
        return
    if session.closing:
        listener_metrics(conn.listener)[2].inc()
    elif session.state is SaslState.COMPLETE:
        listener_metrics(conn.listener)[1].inc()


async def _writer(stream: ByteStream, queue: Any, live: Live) -> None:
    async with queue:
        try:
            await _write_all(stream, queue, live)
        finally:
            _discard_queued(queue)


def _discard_queued(queue: Any) -> None:
    """The connection ended: close the deferred answers still queued (acks=all produces
    waiting for replicas), which nobody will await now."""
    while True:
        try:
            _, _, result, _, _ = queue.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return
        if inspect.iscoroutine(result):
            result.close()


async def _write_all(stream: ByteStream, queue: Any, live: Live) -> None:
    """Send each queued answer in request order, awaiting the deferred ones. Answers that are
    ready together go out in one write: a client that pipelines (librdkafka sends a Produce per
    partition) gets one syscall and one wake-up for them instead of one per answer."""
    batch = _Batch(live)
    while (item := await _next_answer(queue, batch, stream)) is not None:
        correlation_id, flexible, result, stamp, size = item
        if size:
            live.queued -= size
            if live.queued <= _MAX_QUEUED_BYTES:
                live.drained.set()
        if inspect.isawaitable(result):
            if not getattr(result, "ready", False):
                await batch.send(stream)  # ready answers do not wait behind this one
            try:
                result = await result
            except Exception as e:
                raise _internal_error(None, e) from e
        try:
            body = result if isinstance(result, bytes | list) else encode_with_kio(result)
        except Exception as e:
            raise _internal_error(None, e) from e
        if correlation_id is None:  # a bare SASL token (bytes): no response header
            batch.add([_SIZE.pack(len(body)), bytes(body)], None)
        else:
            batch.add(frame_response(correlation_id, flexible, body), stamp)
        if batch.size >= _WRITE_BATCH_BYTES:
            await batch.send(stream)
    await batch.send(stream)


async def _next_answer(queue: Any, batch: _Batch, stream: ByteStream) -> Any:
    """The next queued answer, None once the reader is done. The batch goes out before
    waiting for one, after the reader had a turn to queue the answers of requests it has
    read already."""
    try:
        if batch.parts:
            with contextlib.suppress(anyio.WouldBlock):
                return queue.receive_nowait()
            await anyio.lowlevel.checkpoint()
        with contextlib.suppress(anyio.WouldBlock):
            return queue.receive_nowait()
        await batch.send(stream)
        return await queue.receive()
    except anyio.EndOfStream:
        return None


class _Batch:
    """Framed answers waiting for one write, with the stamps to observe once it is out."""

    __slots__ = ("live", "parts", "size", "stamps")

    def __init__(self, live: Live) -> None:
        self.live = live
        self.parts: list[bytes] = []
        self.stamps: list[tuple[RequestStamp, float]] = []
        self.size = 0

    def add(self, parts: list, stamp: RequestStamp | None) -> None:
        """One framed answer: its buffers, the first starting with the frame's length."""
        self.parts.extend(parts)
        self.size += 4 + _SIZE.unpack_from(parts[0])[0]
        if stamp is not None:
            self.stamps.append((stamp, time.monotonic()))

    async def send(self, stream: ByteStream) -> None:
        if not self.parts:
            return
        data = b"".join(self.parts)
        metrics.BYTES_OUT.inc(len(data))
        started = time.monotonic()
        self.parts, self.size = [], 0
        await stream.send(data)
        self.live.last_active = sent = time.monotonic()
        if self.stamps:
            for stamp, ready in self.stamps:
                stamp.api.observe(
                    stamp.received,
                    stamp.started,
                    stamp.answered,
                    ready,
                    sent,
                    started,
                    stamp.throttle_ms,
                )
            self.stamps = []


def _internal_error(header: RequestHeader | None, e: Exception) -> ConnectionClosed:
    """A bug of ours: log it with its traceback and close only this connection."""
    what = f"API {header.api_key} v{header.api_version}" if header else "a deferred response"
    log.error(
        "internal error handling %s; closing the connection (please report)", what, exc_info=e
    )
    return ConnectionClosed(f"internal error handling {what}: {e!r}")


def _unsupported_api_versions() -> bytes:
    """ApiVersions v0 body with UNSUPPORTED_VERSION and the versions of ApiVersions alone, as
    KIP-511 asks and Kafka's ApiVersionsRequest.getErrorResponse answers: the client retries
    at one of them, then learns the other APIs."""
    from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i16

    low, high = SUPPORTED_VERSIONS[API_VERSIONS]
    return encode_with_kio(
        ApiVersionsResponse(
            error_code=ErrorCode.unsupported_version,
            api_keys=(
                ApiVersion(api_key=i16(API_VERSIONS), min_version=i16(low), max_version=i16(high)),
            ),
        )
    )
