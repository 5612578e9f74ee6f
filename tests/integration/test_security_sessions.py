"""Who a connection is and for how long: mTLS principals, SASL re-authentication (KIP-368), and
hostile input on the SASL exchange.

Two small clusters (1 meta node, 1 broker each):
- SSL with `ssl.client.auth=required` and the StandardAuthorizer: the principal is the client
  certificate's subject, mapped by `ssl.principal.mapping.rules` (CN -> User:<cn>);
- SASL_SSL with `connections.max.reauth.ms` short: clients re-authenticate on their live
  connections and keep working; a session left to expire is closed. Raw-socket tests send it
  what no client would (tests/integration/kafka_wire.py) and check that it answers or closes,
  says why in its log, and keeps serving everyone else.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from cluster.client_security import ClientSecurity, OAuthBearerClient, ScramClient
from common import dev_ca
from meta.acl import AclOperation, PatternType, ResourceType
from tests.integration.clients.drivers import ensure_setup, run_driver, security_env
from tests.integration.clients.group_member import Member
from tests.integration.conftest import wait_for
from tests.integration.kafka_wire import WireClient
from tests.integration.secured_cluster import SecuredCluster, secured_cluster

CLIENTS = ["confluent", "kcat", "kafka-python", "aiokafka", "kafkajs", "java-4.3.0"]
REAUTH_MS = 3000
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3


# ---------------------------------------------------------------- mTLS


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecuredCluster, Path]]:
    ensure_setup()
    tmp = tmp_path_factory.mktemp("mtls")
    tls = dev_ca.tls_dir(tmp / "cluster")
    ca = dev_ca.ensure_ca(tls)  # the cluster's CA, which also signs the client certificates
    overrides = {
        "ssl.client.auth": "required",
        "ssl.truststore.location": str(ca),
        "ssl.principal.mapping.rules": "RULE:^.*CN=([^,]+).*$/$1/L,DEFAULT",
    }
    with secured_cluster(tmp, "SSL", brokers=1, overrides=overrides) as s:
        s.allow(
            "User:mtls-writer", AclOperation.WRITE, ResourceType.TOPIC, "m-", PatternType.PREFIXED
        )
        s.create_topic("forbidden")
        yield s, tls


def client_certificate(tls: Path, common_name: str) -> dict[str, str]:
    """$RAFKA_CLIENT_SECURITY keys of a client certificate the cluster's CA signs (chain and
    key in separate files, as Java wants them)."""
    pem = dev_ca.issue_certificate(
        tls,
        f"{common_name}.pem",
        common_name,
        server=False,
        subject=[(NameOID.ORGANIZATIONAL_UNIT_NAME, "tests")],
    ).read_text()
    key, _, chain = pem.partition("-----END PRIVATE KEY-----\n")
    (tls / f"{common_name}.key").write_text(key + "-----END PRIVATE KEY-----\n")
    (tls / f"{common_name}.crt").write_text(chain)
    return {"cert": str(tls / f"{common_name}.crt"), "key": str(tls / f"{common_name}.key")}


@pytest.mark.parametrize("driver", CLIENTS)
def test_certificate_subject_is_the_principal(mtls: tuple[SecuredCluster, Path], driver: str):
    s, tls = mtls
    topic = f"m-{driver}"
    s.create_topic(topic)
    writer = security_env("SSL", ca=s.ca, **client_certificate(tls, "mtls-writer"))
    args = ("produce", "--bootstrap", s.bootstrap, "--count", "3", "--timeout", "20")
    res = run_driver(driver, *args, "--topic", topic, env=writer)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(res.lines) == 3

    other = security_env("SSL", ca=s.ca, **client_certificate(tls, "mtls-other"))
    res = run_driver(driver, *args[:-1], "8", "--topic", topic, env=other)
    assert (res.returncode, res.error) == (1, "TOPIC_AUTHORIZATION_FAILED"), res.stderr[-3000:]


def test_no_client_certificate_no_connection(mtls: tuple[SecuredCluster, Path]) -> None:
    s, _ = mtls
    anonymous = ClientSecurity("SSL", ca_file=s.ca)
    # TLS 1.3: the handshake ends before the broker checks; its refusal comes with the reply:
    # the certificate_required alert, or a reset if the broker's close wins (both OSError).
    with pytest.raises(OSError), WireClient(port(s), timeout=5, security=anonymous) as c:  # noqa: PT011
        metadata(c)


# ---------------------------------------------------------------- re-authentication


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    ensure_setup()
    tmp = tmp_path_factory.mktemp("sessions")
    overrides = {"authorizer.class.name": "", "connections.max.reauth.ms": str(REAUTH_MS)}
    with secured_cluster(tmp, "SASL_SSL", brokers=1, overrides=overrides) as s:
        s.create_topic("reauth", 1)
        yield s


def port(s: SecuredCluster) -> int:
    return int(s.bootstrap.split(",")[0].rpartition(":")[2])


def metadata(c: WireClient):
    return c.call(
        METADATA, 12, topics=None, allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )  # fmt: skip


def test_session_lifetime_is_announced_and_enforced(sessions: SecuredCluster) -> None:
    """SaslAuthenticate says how long the session lasts; re-authenticating on the connection
    extends it; a session left to expire ends with the connection."""
    with WireClient(port(sessions), security=sessions.security("writer", "SCRAM-SHA-256")) as c:
        assert 0 < c.session_lifetime_ms <= REAUTH_MS
        first_expiry = time.monotonic() + c.session_lifetime_ms / 1000
        wait_for(lambda: time.monotonic() > first_expiry - 1.5, REAUTH_MS, "half the session")
        c.authenticate()  # KIP-368: SaslHandshake + SaslAuthenticate again, same connection
        second_expiry = time.monotonic() + c.session_lifetime_ms / 1000
        wait_for(lambda: time.monotonic() > first_expiry + 0.5, REAUTH_MS, "the first expiry")
        assert metadata(c).brokers, "re-authenticated connection refused"

        def closed() -> bool:
            try:
                metadata(c)
            except (ConnectionError, OSError):
                return True
            return False

        wait_for(closed, 2 * REAUTH_MS / 1000 + 5, "the expired session closed", interval=0.2)
        assert time.monotonic() > second_expiry - 1.0


def test_clients_keep_working_across_reauthentication(sessions: SecuredCluster) -> None:
    """A Java producer and a librdkafka group consumer run for several session lifetimes."""
    env = sessions.env("writer", "SCRAM-SHA-512")
    argv = ["produce-stream", "--bootstrap", sessions.bootstrap, "--topic", "reauth"]
    argv += ["--duration", str(3 * REAUTH_MS / 1000), "--rate", "20", "--idempotence", "false"]
    consumer = Member(
        "confluent",
        sessions.bootstrap,
        "reauth",
        "reauth-group",
        "--commit",
        "sync",
        env=sessions.env("reader", "PLAIN"),
    )
    try:
        res = run_driver("java-4.3.0", *argv, env=env, timeout=60)
        assert res.returncode == 0, res.stderr[-3000:]
        done = res.lines[-1]
        assert done["event"] == "done", done
        assert done["failed"] == 0, done
        assert done["acked"] > 0, done
        consumer.wait_records(done["acked"], 30)
        assert consumer.stop() == 0, consumer.describe()
    finally:
        consumer.close()
    assert not consumer.of("error"), consumer.of("error")
    assert all(c["error"] is None for c in consumer.of("commit")), consumer.of("commit")


# ---------------------------------------------------------------- hostile input


def raw(s: SecuredCluster) -> WireClient:
    """A TLS connection to the SASL_SSL listener, not authenticated: the test speaks SASL."""
    return WireClient(
        port(s), timeout=5, security=s.security("writer", "PLAIN"), authenticate=False
    )


def answers_error_or_closes(c: WireClient, token: bytes) -> str:
    """Sends SaslAuthenticate(token): "error <name>" or "closed". OAUTHBEARER's error
    challenge (RFC 7628: JSON, error code 0) is answered with %x01, which must then fail."""
    try:
        r = c.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
        if r.error_code == 0 and r.auth_bytes.startswith(b"{"):
            assert json.loads(r.auth_bytes)["status"], r.auth_bytes
            r = c.call(SASL_AUTHENTICATE, 2, auth_bytes=b"\x01")
    except (ConnectionError, OSError):
        return "closed"
    assert r.error_code != 0, f"accepted {token[:60]!r}: {r}"
    return f"error {r.error_code.name}"


def handshake(c: WireClient, mechanism: str) -> None:
    assert c.call(SASL_HANDSHAKE, 1, mechanism=mechanism).error_code == 0


@pytest.fixture
def still_serving(sessions: SecuredCluster) -> Iterator[None]:
    """After the test: the broker lives and a proper client still gets in and is answered."""
    yield
    for node in sessions.cluster.nodes.values():
        assert node.proc is not None, f"{node.name} died"
        assert node.proc.poll() is None, f"{node.name} died"
    with WireClient(port(sessions), security=sessions.security("reader", "SCRAM-SHA-512")) as c:
        assert metadata(c).brokers


def local_address(c: WireClient) -> str:
    """host:port of our end, as the broker's log names the client."""
    host, local_port = c.sock.getsockname()[:2]
    return f"{host}:{local_port}"


def broker_log(s: SecuredCluster) -> str:
    return s.cluster.nodes["broker-1"].log_file.read_text(errors="replace")


@pytest.mark.usefixtures("still_serving")
def test_request_before_authentication_closes_and_is_logged(sessions: SecuredCluster) -> None:
    with raw(sessions) as c:
        client = local_address(c)
        try:
            metadata(c)
            raise AssertionError("Metadata answered before authentication")
        except (ConnectionError, OSError):
            pass
    wait_for(lambda: client in broker_log(sessions), 5, f"a log line naming {client}")


@pytest.mark.usefixtures("still_serving")
def test_unknown_mechanism_is_answered_with_the_enabled_ones(sessions: SecuredCluster) -> None:
    with raw(sessions) as c:
        r = c.call(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
    assert r.error_code.name == "unsupported_sasl_mechanism"
    assert {"PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"} <= set(r.mechanisms)


GARBAGE = {
    "PLAIN": [b"", b"\xff\xfe\x00garbage", b"no-separators", b"\0writer\0" + b"x" * 70_000],
    "SCRAM-SHA-256": [b"", b"n,,", b"n,,n=writer", b"n,,r=abc", b"\xff" * 300, b"p=x,,n=a,r=b"],
    "OAUTHBEARER": [b"", b"n,,\x01auth=Bearer not.a.jwt\x01\x01", b"\x01\x01\x01"],
}


@pytest.mark.parametrize(
    ("mechanism", "token"), [(m, t) for m, tokens in GARBAGE.items() for t in tokens]
)
@pytest.mark.usefixtures("still_serving")
def test_garbage_tokens_are_refused(sessions: SecuredCluster, mechanism: str, token: bytes) -> None:
    with raw(sessions) as c:
        client = local_address(c)
        handshake(c, mechanism)
        answers_error_or_closes(c, token)
    wait_for(lambda: client in broker_log(sessions), 5, f"a log line naming {client}")


@pytest.mark.usefixtures("still_serving")
def test_oversized_token_is_refused(sessions: SecuredCluster) -> None:
    with raw(sessions) as c:
        handshake(c, "PLAIN")
        assert answers_error_or_closes(c, b"\0writer\0" + b"x" * 600_000) in (
            "closed",
            "error sasl_authentication_failed",
            "error illegal_sasl_state",
        )


@pytest.mark.usefixtures("still_serving")
def test_jwt_not_signed_by_the_jwks_is_refused(sessions: SecuredCluster) -> None:
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = sessions.jwt("writer", key=other_key)
    with raw(sessions) as c:
        handshake(c, "OAUTHBEARER")
        client = OAuthBearerClient(token)
        r = c.call(SASL_AUTHENTICATE, 2, auth_bytes=client.first())
        if r.error_code == 0:  # the error challenge; the kvsep makes the broker fail it
            assert json.loads(r.auth_bytes)["status"]
            r = c.call(SASL_AUTHENTICATE, 2, auth_bytes=client.respond(r.auth_bytes))
        assert r.error_code.name == "sasl_authentication_failed"


@pytest.mark.parametrize("wrong", ["nonce", "proof"])
@pytest.mark.usefixtures("still_serving")
def test_scram_with_a_wrong_nonce_or_proof_is_refused(sessions: SecuredCluster, wrong: str):
    with raw(sessions) as c:
        handshake(c, "SCRAM-SHA-256")
        client = ScramClient("SCRAM-SHA-256", "writer", "writer-secret")
        r = c.call(SASL_AUTHENTICATE, 2, auth_bytes=client.first())
        assert r.error_code == 0, r
        server_nonce = dict(kv.split("=", 1) for kv in r.auth_bytes.decode().split(","))["r"]
        final = (
            client.final(r.auth_bytes, nonce=server_nonce + "x")
            if wrong == "nonce"
            else client.final(r.auth_bytes, proof=os.urandom(32))
        )
        assert answers_error_or_closes(c, final) in ("closed", "error sasl_authentication_failed")


@pytest.mark.usefixtures("still_serving")
def test_v0_raw_token_garbage_closes(sessions: SecuredCluster) -> None:
    """SaslHandshake v0: the tokens follow as bare length-prefixed frames (old clients)."""
    with raw(sessions) as c:
        assert c.call(SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == 0
        c.sock.sendall(len(b"\0writer\0wrong").to_bytes(4, "big") + b"\0writer\0wrong")
        assert c.closed_by_peer()


@pytest.mark.usefixtures("still_serving")
def test_v0_raw_tokens_authenticate(sessions: SecuredCluster) -> None:
    token = b"\0writer\0writer-secret"
    with raw(sessions) as c:
        assert c.call(SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == 0
        c.sock.sendall(len(token).to_bytes(4, "big") + token)
        assert c.recv_frame() == b""  # the server's (empty) final token
        assert metadata(c).brokers


def test_drivers_refuse_delegation_tokens_they_cannot_send(sessions: SecuredCluster) -> None:
    """Only Java has SCRAM's tokenauth; the other drivers say so (exit 3) instead of sending
    a token as a password."""
    env = sessions.env(
        "x", "SCRAM-SHA-256", password=base64.b64encode(b"h").decode(), tokenauth=True
    )
    for driver in ("confluent", "kafka-python", "kafkajs", "kcat"):
        res = run_driver(driver, "produce", "--bootstrap", sessions.bootstrap, "--topic", "reauth",
                         "--count", "1", "--timeout", "5", env=env)  # fmt: skip
        assert res.returncode == 3, (driver, res.stderr[-2000:])
