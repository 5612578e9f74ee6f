"""Credentials of the cluster's internal traffic: the meta gRPC, the replication gRPC, Raft.

These ports must admit only the cluster's own brokers, meta nodes and its operator's tools: the
meta gRPC changes metadata, the replication gRPC hands out partition data, and pysyncobj's Raft
peers exchange pickled messages (whoever may send one may run code on the node). Two
credentials, used alone or together (every one configured is required):

- ``internal.secret``, the same on every member. gRPC clients send a token derived from it with
  every call and the servers refuse calls without it; Raft peers encrypt and authenticate their
  traffic with a password derived from it (pysyncobj's ``password``), so the Raft port is closed
  too. Without TLS the token crosses the network in clear: it keeps out whoever can reach the
  ports, not whoever can read the traffic. Raft has no other credential: a quorum of more than
  one meta node refuses to start without it (``meta.node``; a single node closes its Raft port
  with a random password).
- ``internal.ssl.*``: TLS with client certificates on both gRPC services. Servers require a
  certificate chaining to the cluster CA, clients present theirs and check the server's (which
  must name the address it is dialled at).

Settings use Kafka's PEM keystore conventions under an ``internal.`` prefix; they are declared
once here and mixed into the meta node's and the broker's settings.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from grpc import aio
from pydantic import Field, SecretStr

from common import dev_ca
from common.settings import KafkaSettings, field_name, parse_properties

log = logging.getLogger("rafka.internal_security")

TOKEN_METADATA_KEY = "rafka-internal-token-bin"  # "-bin": gRPC carries the value as raw bytes
MIN_SECRET_LENGTH = 16
_REFUSAL_LOG_INTERVAL_S = 60.0  # one log line per peer host and minute: a retry loop floods


class InternalSecurityError(ValueError):
    """The internal credentials are unusable; the message says which and what to do."""


class InternalSecurityConfig(KafkaSettings):
    """The ``internal.*`` settings, mixed into MetaConfig and BrokerConfig."""

    internal_secret: SecretStr = Field(
        SecretStr(""),
        description="internal.secret: the cluster secret (at least 16 characters), the same on "
        "every meta node, broker and admin tool: gRPC calls without it are refused and the "
        "meta nodes' Raft traffic is encrypted with it. Required with more than one meta node. "
        "Empty: the meta gRPC and replication ports are open to anyone (logged as a warning), "
        "and a single meta node's Raft port admits nobody.",
    )
    internal_ssl_keystore_location: str = Field(
        "",
        description="internal.ssl.keystore.location: PEM file with this node's certificate "
        "chain and private key, for TLS with client certificates on the internal gRPC services.",
    )
    internal_ssl_keystore_certificate_chain: str = Field(
        "", description="internal.ssl.keystore.certificate.chain: the same chain, inline PEM."
    )
    internal_ssl_keystore_key: SecretStr = Field(
        SecretStr(""), description="internal.ssl.keystore.key: the same private key, inline PEM."
    )
    internal_ssl_key_password: SecretStr = Field(
        SecretStr(""), description="internal.ssl.key.password: of an encrypted private key."
    )
    internal_ssl_truststore_location: str = Field(
        "",
        description="internal.ssl.truststore.location: PEM file of the cluster CA: peers' "
        "certificates must chain to it.",
    )
    internal_ssl_truststore_certificates: str = Field(
        "", description="internal.ssl.truststore.certificates: the cluster CA, inline PEM."
    )


@dataclass(frozen=True, repr=False)  # no repr: it holds the credentials
class InternalSecurity:
    """One member's internal credentials, loaded and checked; builds servers' and clients'
    gRPC security from them. ``InternalSecurity()`` is no credential at all (open ports)."""

    token: bytes = b""  # sent in call metadata; empty: no internal.secret
    raft_password: str | None = None
    certificate_chain: bytes = b""  # PEM; empty: no TLS
    private_key: bytes = b""  # PEM, unencrypted (what gRPC takes)
    trusted_cas: bytes = b""  # PEM

    @classmethod
    def from_config(cls, config: InternalSecurityConfig) -> InternalSecurity:
        """Load the credentials the settings name; InternalSecurityError if unusable."""
        secret = config.internal_secret.get_secret_value()
        if secret and len(secret) < MIN_SECRET_LENGTH:
            raise InternalSecurityError(
                f"internal.secret has {len(secret)} characters, fewer than {MIN_SECRET_LENGTH}: "
                "use a long random one, e.g. `openssl rand -hex 32`, the same on every node"
            )
        chain, key = _keystore(config)
        cas = _pem_setting(
            config,
            "internal.ssl.truststore.location",
            config.internal_ssl_truststore_certificates,
        )
        if bool(chain) != bool(cas):
            missing = "internal.ssl.truststore.*" if chain else "internal.ssl.keystore.*"
            raise InternalSecurityError(
                f"internal TLS needs both this node's certificate and the cluster CA; "
                f"{missing} is not set: set it, or neither (then internal.secret alone)"
            )
        if cas:
            _load_certificates(cas, "internal.ssl.truststore")
        return cls(
            token=_derive(secret, b"rafka internal gRPC token") if secret else b"",
            raft_password=_derive(secret, b"rafka internal Raft password").hex()
            if secret
            else None,
            certificate_chain=chain,
            private_key=key,
            trusted_cas=cas,
        )

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> InternalSecurity:
        """The credentials of an admin tool, from the ``internal.*`` entries of its client
        properties (``--command-config FILE``); other entries are ignored."""
        internal = {k: v for k, v in properties.items() if k.startswith("internal.")}
        try:
            config = InternalSecurityConfig.load(None, internal)
        except ValueError as exc:
            raise InternalSecurityError(str(exc)) from exc
        return cls.from_config(config)

    @classmethod
    def from_file(cls, path: Path) -> InternalSecurity:
        """``from_properties`` of a client properties file (``--command-config FILE``)."""
        try:
            text = path.read_text()
        except OSError as exc:
            raise InternalSecurityError(
                f"cannot read {path} ({exc.strerror}): fix the path or its permissions"
            ) from exc
        return cls.from_properties(parse_properties(text))

    @property
    def tls(self) -> bool:
        return bool(self.certificate_chain)

    @property
    def open(self) -> bool:
        """No credential: anyone reaching the ports gets in."""
        return not (self.token or self.tls)

    def describe(self) -> str:
        """What protects the internal traffic, for start-up logs."""
        parts = (["TLS with client certificates"] if self.tls else []) + (
            ["cluster secret"] if self.token else []
        )
        return " + ".join(parts) or "nothing (open)"

    # ------------------------------------------------------------ servers

    def server_interceptors(self, asynchronous: bool) -> list[Any]:
        """Interceptors for ``grpc.server`` (``asynchronous`` False) or ``grpc.aio.server``:
        calls without the token are refused with UNAUTHENTICATED."""
        if not self.token:
            return []
        return [(_AioTokenCheck if asynchronous else _TokenCheck)(self.token)]

    def add_port(self, server: grpc.Server | aio.Server, address: str) -> int:
        """Bind ``address``: with TLS, requiring client certificates from the cluster CA.
        Returns the port (0 or RuntimeError, as gRPC does, when it cannot bind)."""
        if not self.tls:
            return server.add_insecure_port(address)
        credentials = grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.trusted_cas,
            require_client_auth=True,
        )
        return server.add_secure_port(address, credentials)

    def warn_if_open(self, what: str, ports: str) -> None:
        """Log, for a manual setup without credentials, that its internal ports are open."""
        if self.open:
            log.warning(
                "%s has no internal credential: %s accepts anyone who can reach it (who "
                "could change metadata or read partition data). Set internal.secret (the same "
                "on every meta node and broker) and/or internal.ssl.keystore.* and "
                "internal.ssl.truststore.*",
                what,
                ports,
            )

    # ------------------------------------------------------------ clients

    def channel(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> aio.Channel:
        """An asyncio channel to an internal gRPC service, presenting these credentials."""
        if self.tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=self.trusted_cas,
                private_key=self.private_key,
                certificate_chain=self.certificate_chain,
            )
            channel = aio.secure_channel(address, credentials, options)
        else:
            channel = aio.insecure_channel(address, options=options)
        return _TokenChannel(channel, self.token) if self.token else channel


# ------------------------------------------------------------ loading


def _derive(secret: str, purpose: bytes) -> bytes:
    """A key for one purpose: a sniffed gRPC token does not give the Raft password."""
    return hmac.new(secret.encode(), purpose, hashlib.sha256).digest()


def _pem_setting(config: InternalSecurityConfig, location_name: str, inline: str) -> bytes:
    """PEM text from a ``*.location`` file or its inline twin (not both)."""
    location = getattr(config, field_name(location_name))
    if location and inline.strip():
        raise InternalSecurityError(
            f"{location_name} and its inline PEM setting are both set: keep one"
        )
    if not location:
        return inline.strip().encode()
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise InternalSecurityError(
            f"{location_name} {location} cannot be read ({exc.strerror}): fix the path or the "
            "file's permissions"
        ) from exc


def _keystore(config: InternalSecurityConfig) -> tuple[bytes, bytes]:
    """(certificate chain, unencrypted private key) as PEM, checked to belong together."""
    location = config.internal_ssl_keystore_location
    inline_key = config.internal_ssl_keystore_key.get_secret_value().strip().encode()
    if location and (config.internal_ssl_keystore_certificate_chain.strip() or inline_key):
        raise InternalSecurityError(
            "internal.ssl.keystore.location and internal.ssl.keystore.certificate.chain/key "
            "are both set: keep one"
        )
    if location:
        pem = _pem_setting(config, "internal.ssl.keystore.location", "")
        key_pem, chain_pem = pem, pem  # one file holds both
    else:
        key_pem, chain_pem = inline_key, config.internal_ssl_keystore_certificate_chain.encode()
    if not (key_pem.strip() or chain_pem.strip()):
        return b"", b""
    certificates = _load_certificates(chain_pem, "internal.ssl.keystore")
    password = config.internal_ssl_key_password.get_secret_value().encode() or None
    try:
        key = serialization.load_pem_private_key(key_pem, password)
    except (ValueError, TypeError) as exc:
        raise InternalSecurityError(
            f"internal.ssl.keystore has no readable PEM private key ({exc}): it needs the "
            "node's key, unencrypted or with internal.ssl.key.password"
        ) from exc
    if key.public_key() != certificates[0].public_key():
        raise InternalSecurityError(
            "internal.ssl.keystore: the private key does not belong to the first certificate "
            "of the chain: put this node's own certificate first"
        )
    unencrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)
    return chain, unencrypted


def _load_certificates(pem: bytes, setting: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise InternalSecurityError(
            f"{setting} holds no readable PEM certificate ({exc}): point it at a PEM file"
        ) from exc


# ------------------------------------------------------------ the token check


def _carries(metadata: Sequence[tuple[str, str | bytes]] | None, token: bytes) -> bool:
    for key, value in metadata or ():
        if key == TOKEN_METADATA_KEY:
            presented = value if isinstance(value, bytes) else value.encode()
            return hmac.compare_digest(presented, token)
    return False


class RefusalLimiter:
    """Whether a refusal is worth a log line: at most one a minute per key (a peer host, and
    what it was refused), so that a retry loop or a stranger's flood does not fill the log."""

    def __init__(self) -> None:
        self._last: dict[Hashable, float] = {}

    def __call__(self, key: Hashable) -> bool:
        now = time.monotonic()
        if now - self._last.get(key, -_REFUSAL_LOG_INTERVAL_S) < _REFUSAL_LOG_INTERVAL_S:
            return False
        if len(self._last) > 10_000:
            self._last.clear()
        self._last[key] = now
        return True


class _RefusalLog:
    """Logs refused calls, at most once a minute per peer host and method."""

    def __init__(self) -> None:
        self._limit = RefusalLimiter()

    def __call__(self, method: str, peer: str) -> None:
        host = peer.rpartition(":")[0] or peer  # "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7"
        if not self._limit((host, method)):
            return
        log.warning(
            "Refused %s from %s: the call carries no valid internal.secret token. If it is a "
            "member of this cluster (broker, meta node, admin tool), give it the cluster's "
            "internal.secret",
            method,
            host,
        )


_REFUSAL_DETAILS = (
    "no valid internal credential: this port serves only the cluster's members (internal.secret)"
)


def _handler_kind(handler: grpc.RpcMethodHandler) -> Callable[..., grpc.RpcMethodHandler]:
    """The factory of handlers of the same kind (streaming or not each way) as ``handler``."""
    return {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]


class _TokenCheck(grpc.ServerInterceptor):
    """For the threaded server (the meta node)."""

    def __init__(self, token: bytes) -> None:
        self._token = token
        self._log = _RefusalLog()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None or _carries(details.invocation_metadata, self._token):
            return handler

        def refuse(_request: object, context: grpc.ServicerContext) -> None:
            self._log(details.method, context.peer())
            context.abort(grpc.StatusCode.UNAUTHENTICATED, _REFUSAL_DETAILS)

        return _handler_kind(handler)(refuse)


class _AioTokenCheck(aio.ServerInterceptor):
    """For asyncio servers (the broker's replication service)."""

    def __init__(self, token: bytes) -> None:
        self._token = token
        self._log = _RefusalLog()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None or _carries(details.invocation_metadata, self._token):
            return handler

        async def refuse(_request: object, context: aio.ServicerContext) -> None:
            self._log(details.method, context.peer())
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, _REFUSAL_DETAILS)

        return _handler_kind(handler)(refuse)


class _TokenChannel(aio.Channel):
    """A channel whose calls all carry the token in their metadata. (gRPC's client
    interceptors would do it, but on streaming calls they add tasks to every message and
    misbehave when the server refuses the call; call credentials need TLS.)"""

    def __init__(self, channel: aio.Channel, token: bytes) -> None:
        self._channel = channel
        self._metadata = ((TOKEN_METADATA_KEY, token),)

    async def __aenter__(self) -> _TokenChannel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._channel.close()

    async def close(self, grace: float | None = None) -> None:
        await self._channel.close(grace)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self._channel.channel_ready()

    def unary_unary(self, *args: Any, **kwargs: Any) -> Any:
        return _WithToken(self._channel.unary_unary(*args, **kwargs), self._metadata)

    def unary_stream(self, *args: Any, **kwargs: Any) -> Any:
        return _WithToken(self._channel.unary_stream(*args, **kwargs), self._metadata)

    def stream_unary(self, *args: Any, **kwargs: Any) -> Any:
        return _WithToken(self._channel.stream_unary(*args, **kwargs), self._metadata)

    def stream_stream(self, *args: Any, **kwargs: Any) -> Any:
        return _WithToken(self._channel.stream_stream(*args, **kwargs), self._metadata)


class _WithToken:
    """A multi-callable adding the token to the metadata of each call."""

    def __init__(self, multicallable: Any, metadata: tuple[tuple[str, bytes], ...]) -> None:
        self._multicallable = multicallable
        self._metadata = metadata

    def __call__(self, *args: Any, metadata: Any = None, **kwargs: Any) -> Any:
        return self._multicallable(*args, metadata=(*(metadata or ()), *self._metadata), **kwargs)


# ------------------------------------------------------------ local clusters


def local_cluster_credentials(directory: Path, tls: bool) -> dict[str, str]:
    """Internal credentials for a local cluster (`rafka up`, tests): a fresh random secret and,
    with ``tls``, a development CA of the internal traffic only (``tls/internal/``, apart from
    the one of the client listeners) and one certificate for 127.0.0.1 and localhost that every
    node and admin tool of the cluster uses. The returned ``internal.*`` properties are also
    written to ``directory/internal.properties`` (0600), for admin commands' --command-config."""
    directory.mkdir(parents=True, exist_ok=True)
    properties = {"internal.secret": secrets.token_hex(32)}
    if tls:
        tls_dir = dev_ca.tls_dir(directory) / "internal"
        ca = dev_ca.ensure_ca(tls_dir)
        keystore = dev_ca.issue_certificate(
            tls_dir, "node.pem", "rafka-internal", server=True, client=True
        )
        properties |= {
            "internal.ssl.keystore.location": str(keystore),
            "internal.ssl.truststore.location": str(ca),
        }
    text = "".join(f"{key}={value}\n" for key, value in properties.items())
    path = directory / "internal.properties"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return properties
