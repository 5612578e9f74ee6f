"""SASL end to end on one broker, with librdkafka (confluent-kafka) and the protocol-level
client: PLAIN, SCRAM-SHA-256/512 users made with AlterUserScramCredentials, OAUTHBEARER with a
JWKS file and with the unsecured development validator, delegation tokens over SCRAM,
session expiry and re-authentication (KIP-368), and hostile input. The multi-client,
ACL-heavy suite is test_security_*.py."""

from __future__ import annotations

import base64
import json
import select
import socket
import struct
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import jwt
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from cryptography.hazmat.primitives.asymmetric import rsa
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from cluster.client_security import ClientSecurity, ScramClient
from cluster.kafka_client import (
    AuthenticationError,
    KafkaConnection,
    encode,
    request_bytes,
)
from cluster.local import LocalCluster, free_base_port
from dataplane.protocol.codec import EntityBuilder, entity_class
from tests.integration.conftest import wait_for

DEV_OFFSET = 50  # the second listener: OAUTHBEARER with Kafka's unsecured validator
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
AUDIENCE, ISSUER = "kafka", "https://idp.test"
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
CREATE_TOKEN, EXPIRE_TOKEN, DESCRIBE_TOKENS = 38, 40, 41
REAUTH_MS = 2000  # SCRAM-SHA-512 sessions on the main listener last this long


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, signing_key: rsa.RSAPrivateKey
) -> Iterator[LocalCluster]:
    tmp = tmp_path_factory.mktemp("sasl")
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    (tmp / "jwks.json").write_text(json.dumps({"keys": [jwk | {"kid": "k1"}]}))
    base = free_base_port(1, 1)
    main = "listener.name.sasl_plaintext."
    overrides = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{base},DEV://127.0.0.1:{base + DEV_OFFSET}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,DEV:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.dev.sasl.enabled.mechanisms": "OAUTHBEARER",
        f"{main}plain.sasl.jaas.config": (
            f'{PLAIN_MODULE} required user_admin="admin-secret" user_alice="alice-secret";'
        ),
        f"{main}oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (tmp / "jwks.json").as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        f"{main}scram-sha-512.connections.max.reauth.ms": str(REAUTH_MS),
        "sasl.server.max.receive.size": "4096",
        "delegation.token.secret.key": "test-delegation-secret",
    }
    c = LocalCluster(1, 1, tmp, base, overrides, security_protocol="SASL_PLAINTEXT")
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _broker_log(cluster: LocalCluster) -> str:
    return cluster.nodes["broker-1"].log_file.read_text()


def _port(cluster: LocalCluster) -> int:
    return cluster.nodes["broker-1"].port


def _client(cluster: LocalCluster, mechanism: str, **config: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
    } | config


def _produces(config: dict[str, Any], topic: str, n: int = 20) -> None:
    producer = Producer(config | {"linger.ms": 5})
    for i in range(n):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0


def _refused(config: dict[str, Any]) -> KafkaError:
    """The authentication error librdkafka reports for these settings."""
    errors: list[KafkaError] = []
    producer = Producer(config | {"error_cb": errors.append})

    def failed() -> bool:
        producer.poll(0.2)
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_for(failed, 20, "an authentication error")
    return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)


def test_plain(cluster: LocalCluster) -> None:
    _produces(
        _client(cluster, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"}),
        "plain",
    )
    error = _refused(
        _client(cluster, "PLAIN", **{"sasl.username": "alice", "sasl.password": "wrong-pw"})
    )
    assert "Invalid username or password" in error.str()
    wait_for(
        lambda: "failed SASL/PLAIN authentication of 127.0.0.1:" in _broker_log(cluster),
        10,
        "the refusal logged with the client address",
    )
    assert "wrong-pw" not in _broker_log(cluster)


def _admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient(
        _client(cluster, "PLAIN", **{"sasl.username": "admin", "sasl.password": "admin-secret"})
    )


def _describe(admin: AdminClient, user: str) -> Future[Any]:
    futures = admin.describe_user_scram_credentials([user])
    assert isinstance(futures, dict)
    return futures[user]


def test_scram_users(cluster: LocalCluster) -> None:
    admin = _admin(cluster)
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion("sam", ScramCredentialInfo(m, 8192), b"sam-secret")
        for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    for future in admin.alter_user_scram_credentials(upserts[:1]).values():
        future.result(30)
    for future in admin.alter_user_scram_credentials(upserts[1:]).values():
        future.result(30)
    weak: UserScramCredentialAlteration = UserScramCredentialUpsertion(
        "weak", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"
    )
    with pytest.raises(KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([weak])["weak"].result(30)

    described = _describe(admin, "sam").result(30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192),
        (ScramMechanism.SCRAM_SHA_512, 8192),
    ]
    with pytest.raises(KafkaException, match="does not exist"):
        _describe(admin, "nobody").result(30)

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        sam = _client(cluster, mechanism, **{"sasl.username": "sam", "sasl.password": "sam-secret"})
        _produces(sam, f"scram-{mechanism.lower()}")
        _refused(sam | {"sasl.password": "not-sams"})

    deletion: UserScramCredentialAlteration = UserScramCredentialDeletion(
        "sam", ScramMechanism.SCRAM_SHA_256
    )
    admin.alter_user_scram_credentials([deletion])["sam"].result(30)
    security = ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", "sam", "sam-secret")

    def sam_refused() -> bool:
        try:
            KafkaConnection(_port(cluster), security=security).sock.close()
        except AuthenticationError:
            return True
        return False

    wait_for(sam_refused, 1, "the deleted credential refused")


def _jwt(key: rsa.RSAPrivateKey, **claims: Any) -> tuple[str, float]:
    """A signed JWT, and the expiry librdkafka is told (in the future even when the token's
    own exp is not, so the broker is the one to refuse it)."""
    expiry = time.time() + 300
    claims = {"sub": "olivia", "aud": AUDIENCE, "iss": ISSUER, "exp": int(expiry)} | claims
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"}), expiry


def test_oauthbearer_with_a_jwks(cluster: LocalCluster, signing_key: rsa.RSAPrivateKey) -> None:
    def token_cb(**claims: Any) -> Any:
        return lambda _config: _jwt(signing_key, **claims)

    _produces(_client(cluster, "OAUTHBEARER", oauth_cb=token_cb()), "oauth")
    expired = token_cb(exp=int(time.time()) - 120)
    for bad in (expired, token_cb(aud="elsewhere"), token_cb(iss="https://evil")):
        _refused(_client(cluster, "OAUTHBEARER", oauth_cb=bad))
    wait_for(
        lambda: "OAUTHBEARER token refused: ExpiredSignatureError" in _broker_log(cluster),
        10,
        "the expired JWT logged",
    )


def test_oauthbearer_unsecured_on_the_dev_listener(cluster: LocalCluster) -> None:
    config = {
        "bootstrap.servers": f"127.0.0.1:{_port(cluster) + DEV_OFFSET}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=dev",
    }
    _produces(config, "dev")
    assert "OAUTHBEARER uses Kafka's unsecured validator" in _broker_log(cluster)
    # The main listener checks signatures: the same unsigned token is refused there.
    _refused(config | {"bootstrap.servers": cluster.bootstrap})


def _connect(cluster: LocalCluster, security: ClientSecurity) -> KafkaConnection:
    return KafkaConnection(_port(cluster), security=security)


def _scram_user(cluster: LocalCluster, user: str, password: str) -> None:
    upsert: UserScramCredentialAlteration = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    admin = _admin(cluster)  # referenced until the answer is in
    admin.alter_user_scram_credentials([upsert])[user].result(30)


def test_delegation_tokens(cluster: LocalCluster) -> None:
    alice = ClientSecurity("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    with _connect(cluster, alice) as conn:
        created = conn.call(
            CREATE_TOKEN,
            3,
            owner_principal_type=None,
            owner_principal_name=None,
            renewers=(),
            max_lifetime=-1,
        )
        assert created.error_code == ErrorCode.none
        assert created.principal_name == "alice"
        described = conn.call(DESCRIBE_TOKENS, 3, owners=None)
        assert created.token_id in [t.token_id for t in described.tokens]
    with_token = ClientSecurity(
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        created.token_id,
        base64.b64encode(created.hmac).decode(),
        tokenauth=True,
    )
    with _connect(cluster, with_token) as conn:
        expiry_ms = created.expiry_timestamp.timestamp() * 1000
        assert 0 < conn.session_lifetime_ms <= expiry_ms - time.time() * 1000 + 1000
        conn.send(
            CREATE_TOKEN,
            3,
            owner_principal_type=None,
            owner_principal_name=None,
            renewers=(),
            max_lifetime=-1,
        )
        # Read the error code by hand: kio cannot parse the -1 timestamps of an error answer.
        (error,) = struct.unpack_from(">h", conn.recv_frame(), 5)  # after the v1 header
        assert error == ErrorCode.delegation_token_request_not_allowed
    with _connect(cluster, alice) as conn:
        expired = conn.call(EXPIRE_TOKEN, 2, hmac=created.hmac, expiry_time_period=-1)
        assert expired.error_code == ErrorCode.none

    def token_refused() -> bool:
        try:
            _connect(cluster, with_token).sock.close()
        except AuthenticationError as e:
            return e.error == "SASL_AUTHENTICATION_FAILED"
        return False

    wait_for(token_refused, 5, "the expired token refused")


def _metadata_works(conn: KafkaConnection) -> bool:
    try:
        conn.call(
            METADATA,
            12,
            topics=(),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    except (ConnectionError, OSError):
        return False
    return True


def test_session_expiry_and_reauthentication(cluster: LocalCluster) -> None:
    _scram_user(cluster, "rita", "rita-secret")
    _scram_user(cluster, "otto", "otto-secret")
    rita = ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "rita", "rita-secret")
    expiring = _connect(cluster, rita)
    assert expiring.session_lifetime_ms == REAUTH_MS
    renewed = _connect(cluster, rita)
    renewed_at = time.monotonic()

    def expired_while_the_other_renews() -> bool:
        nonlocal renewed_at
        if time.monotonic() - renewed_at > REAUTH_MS / 2000:
            renewed.authenticate()  # KIP-368: handshake + authenticate again, same principal
            assert renewed.session_lifetime_ms == REAUTH_MS
            renewed_at = time.monotonic()
        return not _metadata_works(expiring)

    wait_for(expired_while_the_other_renews, 10, "the expired session closed")
    assert _metadata_works(renewed)
    wait_for(
        lambda: "after its SASL session expired" in _broker_log(cluster),
        10,
        "the expiry logged",
    )
    renewed.security = ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "otto", "otto-secret")
    with pytest.raises(AuthenticationError, match="Cannot change principals"):
        renewed.authenticate()
    assert not _metadata_works(renewed)


# -- hostile input, on raw sockets ---------------------------------------------------------------


def _raw(cluster: LocalCluster) -> KafkaConnection:
    return KafkaConnection(_port(cluster), authenticate=False)


def _request(api_key: int, version: int, **fields: Any) -> bytes:
    cls = entity_class(api_key, version, EntityType.request)
    body = getattr(EntityBuilder(api_key, version, EntityType.request), cls.__name__)(**fields)
    return request_bytes(api_key, version, 7, encode(body))


def _closed(conn: KafkaConnection) -> bool:
    try:
        conn.recv_frame()
    except (ConnectionError, OSError):
        return True
    return False


def test_hostile_input(cluster: LocalCluster) -> None:
    # A request before authenticating: the connection is closed.
    conn = _raw(cluster)
    conn.sock.sendall(
        _request(
            METADATA,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    assert _closed(conn)
    # SaslAuthenticate before SaslHandshake: ILLEGAL_SASL_STATE, then closed.
    conn = _raw(cluster)
    r = conn.call(SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00alice-secret")
    assert r.error_code == ErrorCode.illegal_sasl_state
    assert _closed(conn)
    # A mechanism the listener does not enable: the enabled list, then closed.
    conn = _raw(cluster)
    r = conn.call(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
    assert r.error_code == ErrorCode.unsupported_sasl_mechanism
    assert "SCRAM-SHA-512" in r.mechanisms
    assert _closed(conn)
    # Garbage tokens: SASL_AUTHENTICATION_FAILED, then closed.
    for mechanism, token in (
        ("SCRAM-SHA-256", b"\xff\x00garbage"),
        ("OAUTHBEARER", b"n,,\x01auth=Bearer ???\x01\x01"),
    ):
        conn = _raw(cluster)
        assert conn.call(SASL_HANDSHAKE, 1, mechanism=mechanism).error_code == ErrorCode.none
        r = conn.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
        assert r.error_code == ErrorCode.sasl_authentication_failed, mechanism
        assert _closed(conn)
    # A request over sasl.server.max.receive.size before authentication: closed unread.
    conn = _raw(cluster)
    assert conn.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.none
    with pytest.raises(ConnectionError):
        conn.call(SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00" + b"x" * 5000)
    # SCRAM with a wrong nonce, and with a wrong proof: the error alone (no e=invalid-proof, as
    # Kafka sends none).
    _scram_user(cluster, "nina", "nina-secret")
    for wrong in ({"nonce": "not-the-nonce"}, {"proof": b"\x00" * 64}):
        conn = _raw(cluster)
        conn.call(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512")
        client = ScramClient("SCRAM-SHA-512", "nina", "nina-secret")
        first = conn.call(SASL_AUTHENTICATE, 2, auth_bytes=client.first())
        r = conn.call(SASL_AUTHENTICATE, 2, auth_bytes=client.final(first.auth_bytes, **wrong))
        assert r.error_code == ErrorCode.sasl_authentication_failed
        assert _closed(conn)
        assert r.auth_bytes == b""
    log = _broker_log(cluster)
    for why in (
        "before SASL authentication",
        "before SaslHandshake",
        "does not enable",
        "exceeds sasl.server.max.receive.size",
        "invalid nonce",
        "wrong password",
    ):
        assert why in log, why
    assert "nina-secret" not in log
    assert "alice-secret" not in log
    # The broker still serves everyone else.
    _produces(
        _client(cluster, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"}),
        "after-hostile",
    )


def test_a_refused_connection_stays_open_until_the_client_closes_it(cluster: LocalCluster) -> None:
    """After a failed authentication the broker answers, then waits for the client to close
    (at most 1 s) instead of closing at once: a client that reads the answer and the end of
    the stream together may drop the answer (kafka-python's transport does, and reported a
    bare disconnection instead of SASL_AUTHENTICATION_FAILED)."""
    conn = _raw(cluster)
    conn.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
    r = conn.call(SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00nope")
    assert r.error_code == ErrorCode.sasl_authentication_failed
    readable, _, _ = select.select([conn.sock], [], [], 0.3)
    assert not readable, "the broker closed the connection before the client could read"
    conn.sock.sendall(struct.pack(">i", 2) + b"hi")  # read and dropped, not a reset
    started = time.monotonic()
    assert conn.sock.recv(1) == b""  # then closed by the broker: an end of stream, not a reset
    assert time.monotonic() - started < 5


def test_v0_handshake_takes_bare_tokens(cluster: LocalCluster) -> None:
    conn = _raw(cluster)
    assert conn.call(SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == ErrorCode.none
    token = b"\x00alice\x00alice-secret"
    conn.sock.sendall(struct.pack(">i", len(token)) + token)
    assert conn.recv_frame() == b""  # PLAIN's empty answer, as a bare frame
    assert _metadata_works(conn)
    conn = _raw(cluster)  # a wrong password: the broker closes the connection
    conn.call(SASL_HANDSHAKE, 0, mechanism="PLAIN")
    token = b"\x00alice\x00nope"
    conn.sock.sendall(struct.pack(">i", len(token)) + token)
    assert _closed(conn)
    with socket.create_connection(("127.0.0.1", _port(cluster)), timeout=5):
        pass  # still accepting
