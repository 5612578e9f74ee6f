"""The SASL state machine of a connection (Kafka's SaslServerAuthenticator): handshake,
authenticate, bare v0 tokens, session lifetimes, re-authentication, hostile sequences."""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from dataplane.config import BrokerConfig
from dataplane.connection import Connection
from dataplane.protocol.errors import ConnectionClosed, ErrorCode
from dataplane.security.sasl import SaslAuthenticator, SaslConfigError
from dataplane.security.sasl.scram import SCRAM_MECHANISMS
from meta.model import DelegationToken, ScramCredential
from tests.unit.security.test_sasl_scram import client_final, credential

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="bob-secret";'
)
SHA256 = SCRAM_MECHANISMS["SCRAM-SHA-256"]


@dataclass
class FakeCache:
    scram_credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    delegation_tokens: dict[str, DelegationToken] = field(default_factory=dict)


def authenticator(**overrides: Any) -> tuple[SaslAuthenticator, FakeCache]:
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "delegation.token.secret.key": "cluster-secret",
    } | overrides
    cache = FakeCache()
    cache.scram_credentials["carol", "SCRAM-SHA-256"] = credential(SHA256, b"carol-secret")
    return SaslAuthenticator(BrokerConfig.load(overrides=settings), cache), cache  # type: ignore[arg-type]


def connection(sasl: SaslAuthenticator) -> Connection:
    conn = Connection("10.0.0.1:5555", listener="SASL_PLAINTEXT")
    conn.security_protocol = "SASL_PLAINTEXT"
    conn.sasl = sasl.new_session("SASL_PLAINTEXT")
    return conn


def authenticate(sasl: SaslAuthenticator, conn: Connection, token: bytes, version: int = 2) -> Any:
    async def main() -> Any:
        return await sasl.authenticate(conn, token, version)

    return anyio.run(main)


def plain(sasl: SaslAuthenticator, conn: Connection, user: str, password: str) -> Any:
    assert sasl.handshake(conn, "PLAIN", 1)[0] == ErrorCode.none
    return authenticate(sasl, conn, f"\x00{user}\x00{password}".encode())


def test_plain_login_sets_the_principal() -> None:
    sasl, _ = authenticator()
    conn = connection(sasl)
    error, mechanisms = sasl.handshake(conn, "PLAIN", 1)
    assert (error, mechanisms) == (ErrorCode.none, ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"))
    result = authenticate(sasl, conn, b"\x00alice\x00alice-secret")
    assert result.error == ErrorCode.none
    assert result.session_lifetime_ms == 0
    assert conn.principal == "User:alice"
    assert conn.sasl is not None
    assert conn.sasl.authenticated
    assert conn.sasl.expires_at_ms == 0


def test_wrong_password_fails_and_closes(caplog: pytest.LogCaptureFixture) -> None:
    sasl, _ = authenticator()
    conn = connection(sasl)
    with caplog.at_level(logging.INFO, "rafka.sasl"):
        result = plain(sasl, conn, "alice", "nope-nope")
    assert result.error == ErrorCode.sasl_authentication_failed
    assert result.message == "Authentication failed: Invalid username or password"
    assert conn.sasl is not None
    assert conn.sasl.closing
    assert not conn.sasl.authenticated
    assert "10.0.0.1:5555" in caplog.text
    assert "nope-nope" not in caplog.text
    assert conn.principal == "User:ANONYMOUS"
    with pytest.raises(ConnectionClosed):
        sasl.handshake(conn, "PLAIN", 1)


def test_mechanism_not_enabled() -> None:
    sasl, _ = authenticator()
    conn = connection(sasl)
    error, mechanisms = sasl.handshake(conn, "SCRAM-SHA-512", 1)
    assert error == ErrorCode.unsupported_sasl_mechanism
    assert "PLAIN" in mechanisms
    assert conn.sasl is not None
    assert conn.sasl.closing


def test_authenticate_before_handshake_and_second_handshake() -> None:
    sasl, _ = authenticator()
    conn = connection(sasl)
    result = authenticate(sasl, conn, b"\x00alice\x00alice-secret")
    assert result.error == ErrorCode.illegal_sasl_state
    assert conn.sasl is not None
    assert conn.sasl.closing
    conn = connection(sasl)
    sasl.handshake(conn, "PLAIN", 1)
    assert sasl.handshake(conn, "PLAIN", 1)[0] == ErrorCode.illegal_sasl_state
    assert conn.sasl is not None
    assert conn.sasl.closing


def test_oversized_token() -> None:
    sasl, _ = authenticator(**{"sasl.server.max.receive.size": "64"})
    conn = connection(sasl)
    result = plain(sasl, conn, "alice", "x" * 100)
    assert result.error == ErrorCode.sasl_authentication_failed
    assert conn.sasl is not None
    assert conn.sasl.closing


def test_garbage_never_raises() -> None:
    sasl, _ = authenticator()
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"):
        for garbage in (b"", b"\x00", b"\xff" * 50, b"n,,", b"=" * 10, bytes(range(256))):
            conn = connection(sasl)
            sasl.handshake(conn, mechanism, 1)
            result = authenticate(sasl, conn, garbage)
            if result.error == ErrorCode.none:  # OAUTHBEARER's error challenge, then failure
                result = authenticate(sasl, conn, b"\x01")
            assert result.error == ErrorCode.sasl_authentication_failed, (mechanism, garbage)


def test_session_lifetime_and_reauthentication() -> None:
    sasl, _ = authenticator(**{"connections.max.reauth.ms": "60000"})
    conn = connection(sasl)
    before = int(time.time() * 1000)
    result = plain(sasl, conn, "alice", "alice-secret")
    assert result.session_lifetime_ms == 60000
    assert conn.sasl is not None
    assert conn.sasl.expires_at_ms >= before + 60000
    # KIP-368: a new handshake + authenticate on the same connection, same principal
    result = plain(sasl, conn, "alice", "alice-secret")
    assert result.error == ErrorCode.none
    assert conn.sasl.authenticated
    # another principal is refused and the connection closes
    result = plain(sasl, conn, "bob", "bob-secret")
    assert result.error == ErrorCode.sasl_authentication_failed
    assert (
        result.message
        == "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert conn.sasl.closing
    assert not conn.sasl.authenticated


def test_reauthentication_keeps_the_mechanism() -> None:
    sasl, _ = authenticator()
    conn = connection(sasl)
    plain(sasl, conn, "alice", "alice-secret")
    assert sasl.handshake(conn, "SCRAM-SHA-256", 1)[0] == ErrorCode.none
    result = authenticate(sasl, conn, b"n,,n=alice,r=abc")
    assert result.error == ErrorCode.sasl_authentication_failed
    assert result.message is not None
    assert "re-authentication of mechanism 'PLAIN'" in result.message


def test_v0_clients_cannot_reauthenticate() -> None:
    sasl, _ = authenticator()
    conn = connection(sasl)
    sasl.handshake(conn, "PLAIN", 1)
    authenticate(sasl, conn, b"\x00alice\x00alice-secret", version=0)
    assert sasl.handshake(conn, "PLAIN", 1)[0] == ErrorCode.illegal_sasl_state
    assert conn.sasl is not None
    assert conn.sasl.authenticated
    assert not conn.sasl.closing
    again = authenticate(sasl, conn, b"\x00alice\x00alice-secret")
    assert again.error == ErrorCode.illegal_sasl_state


def raw(sasl: SaslAuthenticator, conn: Connection, token: bytes) -> bytes:
    async def main() -> bytes:
        return await sasl.raw_token(conn, token)

    return anyio.run(main)


def test_v0_handshake_takes_bare_tokens() -> None:
    sasl, _ = authenticator()
    conn = connection(sasl)
    assert sasl.handshake(conn, "SCRAM-SHA-256", 0)[0] == ErrorCode.none
    assert conn.sasl is not None
    assert conn.sasl.raw_tokens
    first = b"n,,n=carol,r=abc"
    server_first = raw(sasl, conn, first)
    assert raw(sasl, conn, client_final(SHA256, b"carol-secret", first, server_first)).startswith(
        b"v="
    )
    assert conn.principal == "User:carol"
    assert not conn.sasl.raw_tokens

    conn = connection(sasl)  # a wrong proof closes the connection, no e=invalid-proof (Kafka's)
    sasl.handshake(conn, "SCRAM-SHA-256", 0)
    server_first = raw(sasl, conn, first)
    with pytest.raises(ConnectionClosed, match="wrong password"):
        raw(sasl, conn, client_final(SHA256, b"wrong", first, server_first))

    conn = connection(sasl)
    sasl.handshake(conn, "PLAIN", 0)
    with pytest.raises(ConnectionClosed, match="wrong password"):
        raw(sasl, conn, b"\x00alice\x00wrong")


def scram_login(
    sasl: SaslAuthenticator, conn: Connection, user: str, password: bytes, extensions: str = ""
) -> Any:
    sasl.handshake(conn, "SCRAM-SHA-256", 1)
    first = f"n,,n={user},r=abc{extensions}".encode()
    result = authenticate(sasl, conn, first)
    if result.error:
        return result
    return authenticate(sasl, conn, client_final(SHA256, password, first, result.auth_bytes))


def test_scram_and_delegation_tokens() -> None:
    sasl, cache = authenticator(**{"connections.max.reauth.ms": "3600000"})
    conn = connection(sasl)
    assert scram_login(sasl, conn, "carol", b"carol-secret").error == ErrorCode.none
    assert conn.principal == "User:carol"
    assert conn.sasl is not None
    assert not conn.sasl.token_authenticated

    now = int(time.time() * 1000)
    token = DelegationToken(
        "tok", b"h" * 64, "User:dave", "User:dave", (), now, now + 5000, now + 9000
    )
    cache.delegation_tokens["tok"] = token
    conn = connection(sasl)
    password = base64.b64encode(token.hmac)
    result = scram_login(sasl, conn, "tok", password, ",tokenauth=true")
    assert result.error == ErrorCode.none
    assert conn.principal == "User:dave"
    assert conn.sasl is not None
    assert conn.sasl.token_authenticated
    assert 0 < result.session_lifetime_ms <= 5000  # the token's expiry, not reauth.ms

    cache.delegation_tokens["tok"] = DelegationToken(
        "tok", b"h" * 64, "User:dave", "User:dave", (), now - 9000, now - 1, now + 9000
    )
    result = scram_login(sasl, connection(sasl), "tok", password, ",tokenauth=true")
    assert result.error == ErrorCode.sasl_authentication_failed


def test_not_a_sasl_connection() -> None:
    sasl, _ = authenticator()
    conn = Connection("1.2.3.4:5")
    assert sasl.handshake(conn, "PLAIN", 1)[0] == ErrorCode.illegal_sasl_state
    assert authenticate(sasl, conn, b"x").error == ErrorCode.illegal_sasl_state


def test_config_errors(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(SaslConfigError, match="GSSAPI"):
        authenticator(**{"sasl.enabled.mechanisms": "GSSAPI,PLAIN"})
    with pytest.raises(SaslConfigError, match="https"):
        authenticator(**{"sasl.oauthbearer.jwks.endpoint.url": "http://idp/jwks"})
    with pytest.raises(SaslConfigError, match="does not parse") as e:
        authenticator(
            **{"listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x required user_a="pw'}
        )
    assert "pw" not in str(e.value).replace("password", "")
    with caplog.at_level(logging.WARNING, "rafka.sasl"):
        authenticator(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": ""})
    assert "unsecured validator" in caplog.text
    assert "every PLAIN login fails" in caplog.text
