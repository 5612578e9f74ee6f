"""A minimal blocking Kafka protocol client: one connection, one request at a time.

Requests and responses are kio's dataclasses; `KafkaConnection.call(api_key, version, **fields)`
builds the request of that version (fields it lacks are dropped, as in the broker's
EntityBuilder), sends it and decodes the answer with kio. The `rafka` admin commands use it to
talk to brokers as kafka-topics.sh and kafka-consumer-groups.sh do; tests use it to pin exact
versions and to send raw bytes.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any, Self

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from cluster.client_security import ClientSecurity, SaslFailed
from dataplane.protocol.codec import (
    EntityBuilder,
    entity_class,
    is_flexible,
    response_header_flexible,
)


def request_bytes(
    api_key: int, version: int, correlation_id: int, body: bytes, client_id: bytes = b"rafka"
) -> bytes:
    """A framed request: length, header v1 (v2 when flexible), body."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if is_flexible(api_key, version):
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def encode(obj: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(obj))(out, obj)
    return out.getvalue()


def builder(api_key: int, version: int) -> EntityBuilder:
    """Builds nested request structs of one version: `builder(0, 9).TopicProduceData(...)`."""
    return EntityBuilder(api_key, version, EntityType.request)


def split_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """ "host:port" (or "[v6]:port", or a bare host) -> (host, port)."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit():
        return address.strip(), default_port
    return host.strip("[]"), int(port)


SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
PLAINTEXT = ClientSecurity()


class AuthenticationError(ConnectionError):
    """The broker refused the credentials (Kafka's error name first), or the exchange broke."""

    def __init__(self, error: str, message: str) -> None:
        self.error = error
        super().__init__(f"{error}: {message}")


class KafkaConnection:
    client_id = b"rafka"

    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        timeout: float = 15,
        security: ClientSecurity = PLAINTEXT,
        authenticate: bool = True,
    ) -> None:
        self.security = security
        self.session_lifetime_ms = 0
        self._corr = 0
        self.sock = socket.create_connection((host, port), timeout=timeout)
        try:
            if security.tls:
                self.sock = security.ssl_context().wrap_socket(self.sock, server_hostname=host)
            if security.sasl and authenticate:
                self.authenticate()
        except BaseException:
            self.sock.close()
            raise

    @classmethod
    def to_any(
        cls, bootstrap: str, timeout: float = 15, security: ClientSecurity = PLAINTEXT
    ) -> Self:
        """A connection to the first reachable of the comma-separated `bootstrap` addresses
        (credentials the broker refuses are not retried elsewhere)."""
        errors = []
        for address in filter(None, (a.strip() for a in bootstrap.split(","))):
            host, port = split_address(address)
            try:
                return cls(port, host, timeout, security)
            except AuthenticationError:
                raise
            except OSError as e:
                errors.append(f"{address}: {e}")
        raise ConnectionError(f"no broker reachable ({'; '.join(errors) or 'no address given'})")

    def authenticate(self) -> None:
        """SaslHandshake v1 then SaslAuthenticate v2 until the mechanism is done; the broker's
        session lifetime (KIP-368) is kept in `session_lifetime_ms`."""
        mechanism = self.security.mechanism
        r = self.call(SASL_HANDSHAKE, 1, mechanism=mechanism)
        if r.error_code != ErrorCode.none:
            raise AuthenticationError(
                r.error_code.name.upper(),
                f"{mechanism} not enabled on this listener (it offers "
                f"{', '.join(r.mechanisms) or 'none'})",
            )
        client = self.security.mechanism_client()
        token: bytes | None = client.first()
        while token is not None:
            a = self.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
            if a.error_code != ErrorCode.none:
                raise AuthenticationError(a.error_code.name.upper(), a.error_message or "")
            self.session_lifetime_ms = int(a.session_lifetime.total_seconds() * 1000)
            try:
                token = client.respond(a.auth_bytes)
            except SaslFailed as e:
                raise AuthenticationError("SASL_AUTHENTICATION_FAILED", str(e)) from None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, **fields: Any) -> int:
        cls = entity_class(api_key, version, EntityType.request)
        request = getattr(builder(api_key, version), cls.__name__)(**fields)
        self._corr += 1
        self.sock.sendall(
            request_bytes(api_key, version, self._corr, encode(request), self.client_id)
        )
        return self._corr

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        frame, offset = self._response(api_key, version, correlation_id)
        response, _ = entity_reader(entity_class(api_key, version, EntityType.response))(
            frame, offset
        )
        return response

    def _response(self, api_key: int, version: int, correlation_id: int) -> tuple[bytes, int]:
        """The response frame of `correlation_id` and where its body starts."""
        frame = self.recv_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        if corr != correlation_id:
            raise ConnectionError(f"response {corr} for request {correlation_id}")
        return frame, 4 + (1 if response_header_flexible(api_key, version) else 0)

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        return self.receive(api_key, version, self.send(api_key, version, **fields))

    def call_raw(self, api_key: int, version: int, **fields: Any) -> bytes:
        """The response body undecoded, for a caller with its own schema (kio's reader refuses
        some values Kafka sends, such as the -1 start time of a transactional id with no
        transaction)."""
        frame, offset = self._response(api_key, version, self.send(api_key, version, **fields))
        return frame[offset:]

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exactly(4))
        return self.recv_exactly(size)

    def recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def closed_by_peer(self) -> bool:
        """True when the broker closed the connection (EOF or reset) without answering."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
