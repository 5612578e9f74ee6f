"""Authentication, authorization and client quotas: Apache Kafka 4.4 and Rafka both secured the
same way, their answers compared field by field.

One broker each with a SASL_PLAINTEXT listener (PLAIN users in the listener's JAAS config,
SCRAM-SHA-256/512 users made with AlterUserScramCredentials, delegation tokens on) and an SSL
listener with client certificates (PEM stores from a development CA; `CN=<user>` maps to
`User:<user>`), the StandardAuthorizer with `User:admin` as super user and
`allow.everyone.if.no.acl.found=false`. Principals: `admin` (super user), `writer` (the ACLs of
`ACLS`, made by the admin through CreateAcls on both) and `reader` (no ACL at all). Each case
sends the same request as the same principal to both.
"""

from __future__ import annotations

import base64
import datetime
import ssl
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from cluster import admin
from cluster.admin_transactions import _DESCRIBE_TRANSACTIONS_RESPONSE
from cluster.client_security import ClientSecurity, ScramClient
from cluster.kafka_client import AuthenticationError, KafkaConnection, builder
from cluster.local import free_base_port
from cluster.polling import wait_for
from common import dev_ca
from dataplane.protocol.message_codec import Field, Message, Struct
from meta.acl import AclOperation as Op
from meta.acl import AclPermissionType as Permission
from meta.acl import PatternType as Pattern
from meta.acl import ResourceType as Resource
from tests.compat import diff
from tests.compat.conftest import SAME_SETTINGS
from tests.compat.pair import Pair, Side, record
from tests.integration.secured_cluster import (
    AUTHORIZER,
    PASSWORDS,
    PLAIN_MODULE,
    SCRAM,
    SUPER_USER,
    secured_cluster,
)
from tests.peers.apache_kafka import ApacheKafka
from tests.unit.log.batches import make_batch

PROTOCOL = "SASL_PLAINTEXT"
REAUTH_MS = 3_600_000
SHORT_SESSION_MS = 3000  # SCRAM-SHA-512's own connections.max.reauth.ms
# The listener's PLAIN users; username/password are Kafka's own login for inter-broker traffic
# (Rafka's brokers replicate over gRPC and ignore them).
JAAS = (
    f'{PLAIN_MODULE} required username="admin" password="{PASSWORDS["admin"]}" '
    + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    + ";"
)
SETTINGS = SAME_SETTINGS | {
    "sasl.enabled.mechanisms": "PLAIN," + ",".join(SCRAM),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": AUTHORIZER,
    "super.users": SUPER_USER,
    "allow.everyone.if.no.acl.found": "false",
    "delegation.token.secret.key": "compat-delegation-token-secret",
    "connections.max.reauth.ms": str(REAUTH_MS),
    "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": str(SHORT_SESSION_MS),
}
# Kafka alone: a JAAS entry per SCRAM mechanism (Rafka needs none: its SCRAM users live in the
# meta service), and its controller listener takes SASL too, so that the broker's registration
# is authorized as the super user (a PLAINTEXT one would need User:ANONYMOUS as one).
KAFKA_ONLY = {
    "listener.security.protocol.map": f"{PROTOCOL}:{PROTOCOL},SSL:SSL,CONTROLLER:{PROTOCOL}",
    **{
        f"listener.name.sasl_plaintext.{m.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        )
        for m in SCRAM
    },
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": JAAS,
}

(
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
) = 0, 1, 2, 3, 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, SASL_HANDSHAKE, API_VERSIONS = (
    13,
    14,
    15,
    16,
    17,
    18,
)
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 19, 20, 21, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 29, 30, 31, 32, 33
DESCRIBE_LOG_DIRS, SASL_AUTHENTICATE, CREATE_PARTITIONS = 35, 36, 37
CREATE_TOKEN, RENEW_TOKEN, EXPIRE_TOKEN, DESCRIBE_TOKEN, DELETE_GROUPS = 38, 39, 40, 41, 42
ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 44, 45, 46
OFFSET_DELETE, DESCRIBE_QUOTAS, ALTER_QUOTAS, DESCRIBE_SCRAM, ALTER_SCRAM = 47, 48, 49, 50, 51
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 60, 61, 65, 66
CONSUMER_GROUP_HEARTBEAT = 68
UNREGISTER_CONTROLLER = 94

TIMEOUT = datetime.timedelta(seconds=30)
# Kafka's controller words a CLUSTER_AUTHORIZATION_FAILED with its internal request object
# ("Request Request(processor=2, connectionId=..., buffer=...) needs ALTER permission."):
# connection ids and buffer states, not behaviour.
KAFKA_REQUEST_TEXT = ["error_message", "results.*.error_message", "filter_results.*.error_message"]
OPEN, DESCRIBED, CLOSED, DENIED = "sec-open", "sec-described", "sec-closed", "sec-denied"
MISSING = "sec-missing"  # never created
GROUP, OTHER_GROUP = "sec-g-1", "sec-other-group"
TXN, OTHER_TXN = "sec-tx", "sec-other-tx"
# writer's ACLs (all ALLOW unless said): what each authorization case relies on.
ACLS = [
    (Resource.TOPIC, OPEN, Pattern.LITERAL, Op.READ, Permission.ALLOW),
    (Resource.TOPIC, OPEN, Pattern.LITERAL, Op.WRITE, Permission.ALLOW),
    (Resource.TOPIC, DESCRIBED, Pattern.LITERAL, Op.DESCRIBE, Permission.ALLOW),
    (Resource.TOPIC, DENIED, Pattern.LITERAL, Op.ALL, Permission.ALLOW),
    (Resource.TOPIC, DENIED, Pattern.LITERAL, Op.WRITE, Permission.DENY),
    (Resource.TOPIC, "sec-mine-", Pattern.PREFIXED, Op.CREATE, Permission.ALLOW),
    (Resource.GROUP, "sec-g-", Pattern.PREFIXED, Op.READ, Permission.ALLOW),
    (Resource.TRANSACTIONAL_ID, TXN, Pattern.LITERAL, Op.WRITE, Permission.ALLOW),
    (Resource.CLUSTER, "kafka-cluster", Pattern.LITERAL, Op.DESCRIBE, Permission.ALLOW),
]


def security(user: str, mechanism: str = "PLAIN", password: str | None = None) -> ClientSecurity:
    return ClientSecurity(
        PROTOCOL, mechanism, user, PASSWORDS.get(user, "") if password is None else password
    )


ADMIN = security("admin")


@dataclass(frozen=True)
class Certificates:
    """The development CA both brokers trust, their certificate, and client certificates."""

    directory: Path

    @property
    def ca(self) -> str:
        return str(self.directory / dev_ca.CA_FILE)

    def client(self, user: str) -> str:
        """A client certificate CN=`user` (key and chain in one PEM file)."""
        path = self.directory / f"{user}.pem"
        if not path.exists():
            dev_ca.issue_certificate(self.directory, path.name, user, server=False)
        return str(path)

    def settings(self) -> dict[str, str]:
        """The SSL listener's settings, the same on both brokers (Kafka reads PEM stores)."""
        broker = dev_ca.issue_certificate(self.directory, "broker.pem", "broker", server=True)
        return {
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.location": str(broker),
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": self.ca,
            "listener.name.ssl.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]*).*$/$1/,DEFAULT",
        }


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates(tmp_path_factory.mktemp("compat-tls"))


@pytest.fixture(scope="module")
def secured_kafka(
    tmp_path_factory: pytest.TempPathFactory, certificates: Certificates
) -> Iterator[ApacheKafka]:
    kafka = ApacheKafka(
        tmp_path_factory.mktemp("secured-kafka"),
        brokers=1,
        overrides=SETTINGS | certificates.settings() | KAFKA_ONLY,
        protocol=PROTOCOL,
        extra_listeners={"SSL": "SSL"},
        client={
            "security.protocol": PROTOCOL,
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": PASSWORDS["admin"],
        },
    )
    kafka.start()
    try:
        # The SCRAM users, as secured_cluster makes them on Rafka.
        upserts = [(u, m, p, 4096) for u, p in PASSWORDS.items() for m in SCRAM]
        results = admin.alter_users(admin.Brokers(kafka.bootstrap, ADMIN), upserts, [])
        assert not any(results.values()), results
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def secured_rafka(
    tmp_path_factory: pytest.TempPathFactory, certificates: Certificates
) -> Iterator[tuple[str, str]]:
    """Rafka's SASL_PLAINTEXT bootstrap and its SSL listener's address."""
    base, ssl_port = free_base_port(1, 1), free_base_port(1, 0)
    listeners = f"{PROTOCOL}://127.0.0.1:{base},SSL://127.0.0.1:{ssl_port}"
    with secured_cluster(
        tmp_path_factory.mktemp("secured-rafka"),
        PROTOCOL,
        brokers=1,
        overrides=SETTINGS | certificates.settings() | {"listeners": listeners},
        base_port=base,
    ) as cluster:
        yield cluster.bootstrap, f"127.0.0.1:{ssl_port}"


class Principals:
    """One pair per principal, and the topics and ACLs every case relies on."""

    def __init__(self, kafka: ApacheKafka, rafka: tuple[str, str], tls: Certificates) -> None:
        self.kafka, (self.rafka, self.rafka_ssl) = kafka.bootstrap, rafka
        self.kafka_ssl = kafka.listeners["SSL"][0]
        self.tls = tls
        self.admin = Pair(self.kafka, self.rafka, ADMIN)
        self.writer = Pair(self.kafka, self.rafka, security("writer"))
        self.reader = Pair(self.kafka, self.rafka, security("reader"))

    def pair(self, user: str, mechanism: str = "PLAIN") -> Pair:
        return Pair(self.kafka, self.rafka, security(user, mechanism))

    def ssl(self, cert_file: str = "") -> Pair:
        """A pair on the SSL listeners, with this client certificate (none: "")."""
        tls = ClientSecurity("SSL", ca_file=self.tls.ca, cert_file=cert_file)
        return Pair(self.kafka_ssl, self.rafka_ssl, tls)

    def close(self) -> None:
        for p in (self.admin, self.writer, self.reader):
            p.close()


@pytest.fixture(scope="module")
def users(
    secured_kafka: ApacheKafka, secured_rafka: tuple[str, str], certificates: Certificates
) -> Iterator[Principals]:
    p = Principals(secured_kafka, secured_rafka, certificates)
    for side in p.admin.sides:
        brokers = admin.Brokers(side.bootstrap, ADMIN)
        for name in (OPEN, DESCRIBED, CLOSED, DENIED):
            admin.create_topic(brokers, name, 1, 1, {})
    bindings = [
        b.AclCreation(
            resource_type=rt,
            resource_name=name,
            resource_pattern_type=pt,
            principal="User:writer",
            host="*",
            operation=op,
            permission_type=perm,
        )
        for b in [builder(CREATE_ACLS, 3)]
        for rt, name, pt, op, perm in ACLS
    ]
    p.admin.call("CreateAcls: the writer's ACLs", CREATE_ACLS, 3, creations=tuple(bindings))
    wait_for(partial(acls_in_force, p.admin, "User:writer", len(ACLS)), 30, "the ACLs on both")
    produce(p.admin, "Produce as the super user", OPEN)
    for side in p.admin.sides:
        wait_for(partial(coordinators_ready, side), 60, f"{side.name}'s coordinators")
    yield p
    p.close()


def acls_in_force(pair: Pair, principal: str, count: int) -> bool:
    """Whether both brokers' authorizers hold `count` bindings of `principal` (Kafka's broker
    learns a new ACL from its metadata log a moment after CreateAcls answers)."""

    def held(side: Side) -> int:
        r = side.conn().call(DESCRIBE_ACLS, 3, **acl_filter(principal=principal))
        return sum(len(resource.acls) for resource in r.resources)

    return all(n >= count for n in pair.both(held))


def coordinators_ready(side: Side) -> bool:
    """Whether the group and transaction coordinators answer (Kafka makes their topics on the
    first FindCoordinator and is loading them for a moment after; Rafka at start)."""
    c = side.conn()
    found = [
        c.call(FIND_COORDINATOR, 4, key_type=kind, coordinator_keys=(key,)).coordinators[0]
        for kind, key in ((0, GROUP), (1, TXN))
    ]
    pid = c.call(
        INIT_PRODUCER_ID,
        5,
        transactional_id=None,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    return all(f.error_code == ErrorCode.none for f in found) and pid.error_code == 0


# -------------------------------------------------------------------------------- SASL


ALL_TOPICS = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
}


def raw_pair(users: Principals) -> Pair:
    """A pair whose connections are not authenticated (the cases run the exchange by hand)."""
    return Pair(users.kafka, users.rafka)


def unauthenticated(side: Side) -> KafkaConnection:
    return KafkaConnection.to_any(side.bootstrap)


@pytest.mark.parametrize("version", [0, 1])
def test_handshake_unknown_mechanism(users: Principals, version: int) -> None:
    raw_pair(users).call(
        f"SaslHandshake v{version}: GSSAPI (not enabled)",
        SASL_HANDSHAKE,
        version,
        mechanism="GSSAPI",
    )


def authenticate(
    users: Principals,
    case: str,
    mechanism: str,
    *tokens: bytes,
    shape: Callable[[Any], Any] = lambda a: a,
) -> None:
    """Handshake for `mechanism`, then SaslAuthenticate v2 with each token; compares the last
    answer (in the `shape` that keeps what may not differ)."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            assert c.call(SASL_HANDSHAKE, 1, mechanism=mechanism).error_code == ErrorCode.none
            a = None
            for token in tokens:
                a = call_or_closed(c, SASL_AUTHENTICATE, 2, auth_bytes=token)
            answers.append(shape(a))
    pair.compare(case, *answers)


def call_or_closed(c: KafkaConnection, api_key: int, version: int, **fields: Any) -> Any:
    """The answer, or "<connection closed>" when the broker closes the connection instead."""
    try:
        return c.call(api_key, version, **fields)
    except (ConnectionError, OSError):
        return "<connection closed>"


def test_plain_wrong_password(users: Principals) -> None:
    authenticate(users, "SaslAuthenticate PLAIN: a wrong password", "PLAIN", b"\0writer\0nope")


def test_plain_unknown_user(users: Principals) -> None:
    authenticate(users, "SaslAuthenticate PLAIN: an unknown user", "PLAIN", b"\0nobody\0secret")


@pytest.mark.parametrize(
    ("what", "token"),
    [
        ("no NUL separators", b"writer-secret"),
        ("one NUL separator", b"writer\0writer-secret"),
        ("an empty user name", b"\0\0writer-secret"),
        ("an authorization id of another user", b"reader\0writer\0writer-secret"),
        ("an empty token", b""),
    ],
)
def test_plain_malformed(users: Principals, what: str, token: bytes) -> None:
    authenticate(users, f"SaslAuthenticate PLAIN: {what}", "PLAIN", token)


def test_plain_success_session_lifetime(users: Principals) -> None:
    """KIP-368: the session lifetime is connections.max.reauth.ms (masked: compared as set)."""
    authenticate(
        users, "SaslAuthenticate PLAIN: right password", "PLAIN", b"\0writer\0" + b"writer-secret"
    )
    lifetimes = users.writer.both(lambda side: side.conn().session_lifetime_ms)
    record(
        "SaslAuthenticate: session_lifetime_ms is connections.max.reauth.ms",
        str(lifetimes[0]),
        str(lifetimes[1]),
        [] if lifetimes[0] == lifetimes[1] == REAUTH_MS else [f"lifetimes {lifetimes}"],
    )


def scram_first(mechanism: str, user: str, password: str) -> tuple[ScramClient, bytes]:
    client = ScramClient(mechanism, user, password)
    return client, client.first()


def scram_server_first(answer: Any) -> Any:
    """A SCRAM server-first answer with its random parts (nonce, salt) reduced to their shape."""
    if isinstance(answer, str) or answer.error_code != ErrorCode.none:
        return answer
    attrs = dict(kv.split("=", 1) for kv in answer.auth_bytes.decode().split(","))
    return {
        "error_code": answer.error_code.name,
        "error_message": answer.error_message,
        "keys": sorted(attrs),
        "iterations": attrs.get("i"),
        "salt_bytes": len(base64.b64decode(attrs.get("s", ""))),
    }


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("what", ["the right proof", "a wrong proof", "a wrong nonce"])
def test_scram(users: Principals, mechanism: str, what: str) -> None:
    pair = raw_pair(users)
    firsts, finals = [], []
    for side in pair.sides:
        with unauthenticated(side) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism=mechanism)
            client, token = scram_first(mechanism, "writer", PASSWORDS["writer"])
            first = c.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
            firsts.append(scram_server_first(first))
            if what == "a wrong proof":
                final = client.final(first.auth_bytes, proof=bytes(len(client.scram.hash(b""))))
            elif what == "a wrong nonce":
                final = client.final(first.auth_bytes, nonce=client.client_nonce + "forged")
            else:
                final = client.final(first.auth_bytes)
            answer = call_or_closed(c, SASL_AUTHENTICATE, 2, auth_bytes=final)
            if what == "the right proof":
                assert answer.error_code == ErrorCode.none
                answer = {
                    "error_code": answer.error_code.name,
                    "verified": client.respond(answer.auth_bytes) is None,
                }
            finals.append(answer)
    pair.compare(f"SaslAuthenticate {mechanism}: server-first message", *firsts)
    pair.compare(f"SaslAuthenticate {mechanism}: {what}", *finals)


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_unknown_user(users: Principals, mechanism: str) -> None:
    _, token = scram_first(mechanism, "nobody", "secret")
    authenticate(users, f"SaslAuthenticate {mechanism}: an unknown user", mechanism, token)


@pytest.mark.parametrize(
    ("what", "token"),
    [
        ("a client-first message that is not SCRAM", b"hello"),
        ("channel binding requested", b"p=tls-server-end-point,,n=writer,r=abc"),
        ("an unknown extension", b"n,,n=writer,r=abcdef,ext=1"),
    ],
)
def test_scram_malformed(users: Principals, what: str, token: bytes) -> None:
    authenticate(
        users,
        f"SaslAuthenticate SCRAM-SHA-256: {what}",
        "SCRAM-SHA-256",
        token,
        shape=scram_server_first,
    )


def test_request_before_authentication(users: Principals) -> None:
    """Kafka closes a SASL connection whose first request is neither ApiVersions nor a
    handshake."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            answers.append(call_or_closed(c, METADATA, 12, **ALL_TOPICS))
    pair.compare("Metadata before SaslHandshake", *answers)


def test_request_between_handshake_and_authenticate(users: Principals) -> None:
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
            answers.append(call_or_closed(c, METADATA, 12, **ALL_TOPICS))
    pair.compare("Metadata after SaslHandshake, before SaslAuthenticate", *answers)


def test_api_versions_before_authentication(users: Principals) -> None:
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            a = c.call(API_VERSIONS, 3, client_software_name="compat", client_software_version="1")
            answers.append({"error_code": a.error_code.name})
    pair.compare("ApiVersions before SaslHandshake", *answers)


def test_handshake_v0_bare_tokens(users: Principals) -> None:
    """After a v0 handshake the PLAIN token travels bare (no SaslAuthenticate header)."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            h = c.call(SASL_HANDSHAKE, 0, mechanism="PLAIN")
            token = b"\0writer\0" + PASSWORDS["writer"].encode()
            c.sock.sendall(len(token).to_bytes(4, "big") + token)
            reply = c.recv_frame()
            m = c.call(METADATA, 12, **ALL_TOPICS)
            answers.append(
                {"handshake": diff.plain(h), "reply": reply.hex(), "brokers": len(m.brokers)}
            )
    pair.compare("SaslHandshake v0 + bare PLAIN token", *answers)


def test_reauthentication_as_another_user(users: Principals) -> None:
    """KIP-368: a re-authentication may not change the principal."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=security("writer")) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
            token = b"\0reader\0" + PASSWORDS["reader"].encode()
            answers.append(call_or_closed(c, SASL_AUTHENTICATE, 2, auth_bytes=token))
    pair.compare("SaslAuthenticate: re-authentication as another user", *answers)


def test_reauthentication_with_another_mechanism(users: Principals) -> None:
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=security("writer")) as c:
            answers.append(call_or_closed(c, SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256"))
    pair.compare("SaslHandshake: re-authentication with another mechanism", *answers)


def test_scram_login_of_every_user(users: Principals) -> None:
    """SCRAM users made through AlterUserScramCredentials log in on both."""
    for mechanism in SCRAM:
        outcome = users.pair("reader", mechanism).both(lambda side: logs_in(side.security, side))
        kafka, rafka = map(str, outcome)
        record(
            f"{mechanism} login of a user made by AlterUserScramCredentials",
            kafka,
            rafka,
            [] if outcome == (True, True) else [str(outcome)],
        )


def logs_in(sec: ClientSecurity, side: Side) -> bool:
    try:
        with KafkaConnection.to_any(side.bootstrap, security=sec):
            return True
    except AuthenticationError:
        return False


# --------------------------------------------------------------------------------- SSL


def test_ssl_client_certificate_is_the_principal(users: Principals) -> None:
    """CN=writer maps to User:writer (ssl.principal.mapping.rules): the writer's view."""
    pair = users.ssl(users.tls.client("writer"))
    metadata(pair, "Metadata over SSL as CN=writer: named topics", [OPEN, DESCRIBED, CLOSED])
    pair.call(
        "DescribeCluster over SSL as CN=writer: authorized operations",
        DESCRIBE_CLUSTER,
        1,
        include_cluster_authorized_operations=True,
        endpoint_type=1,
    )
    pair.close()


def test_ssl_super_user_certificate(users: Principals) -> None:
    pair = users.ssl(users.tls.client("admin"))
    pair.call(
        "DescribeCluster over SSL as CN=admin (the super user)",
        DESCRIBE_CLUSTER,
        1,
        include_cluster_authorized_operations=True,
        endpoint_type=1,
    )
    pair.close()


def ssl_outcome(side: Side) -> str:
    """Whether a TLS connection gets an answer to ApiVersions ("answered"), or how it ends."""
    try:
        with KafkaConnection.to_any(side.bootstrap, 10, side.security) as c:
            c.call(API_VERSIONS, 3, client_software_name="compat", client_software_version="1")
            return "answered"
    except (ssl.SSLError, ConnectionError, OSError):
        return "refused (TLS handshake or connection closed)"


@pytest.mark.parametrize("who", ["no client certificate", "a certificate of another CA"])
def test_ssl_client_certificate_required(users: Principals, tmp_path: Path, who: str) -> None:
    cert = ""
    if who != "no client certificate":
        cert = str(dev_ca.issue_certificate(tmp_path, "stranger.pem", "writer", server=False))
    outcome = users.ssl(cert).both(ssl_outcome)
    record(
        f"SSL listener with ssl.client.auth=required: {who}",
        *outcome,
        [] if outcome[0] == outcome[1] else [f"{outcome}"],
    )


# ------------------------------------------------------------------------ authorization


def records() -> bytes:
    now = int(time.time() * 1000)
    return make_batch([b"a", b"b"], timestamps=[now, now])


APPEND = [
    "responses.*.partition_responses.*.log_append_time",
    "responses.*.partition_responses.*.base_offset",
    "responses.*.partition_responses.*.log_start_offset",
]


def produce(
    pair: Pair, case: str, *topics: str, transactional_id: str | None = None, batch: bytes = b""
) -> tuple[Any, Any]:
    b = builder(PRODUCE, 11)
    data = tuple(
        b.TopicProduceData(
            name=t, partition_data=(b.PartitionProduceData(index=0, records=batch or records()),)
        )
        for t in topics
    )
    return pair.call(
        case,
        PRODUCE,
        11,
        masked=APPEND,
        sort=["responses"],
        transactional_id=transactional_id,
        acks=-1,
        timeout=10000,
        topic_data=data,
    )


@pytest.mark.parametrize(
    ("what", "topic"),
    [
        ("WRITE allowed", OPEN),
        ("DESCRIBE only", DESCRIBED),
        ("no ACL", CLOSED),
        ("ALL allowed, WRITE denied", DENIED),
        ("a topic that does not exist", MISSING),
    ],
)
def test_produce_authorization(users: Principals, what: str, topic: str) -> None:
    produce(users.writer, f"Produce as writer: {what}", topic)


def test_produce_mixed_topics(users: Principals) -> None:
    produce(
        users.writer,
        "Produce as writer: allowed and denied topics in one request",
        OPEN,
        CLOSED,
        DESCRIBED,
    )


def test_produce_transactional_unauthorized(users: Principals) -> None:
    batch = make_batch(
        [b"t"],
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        extra_attributes=0x10,
        timestamps=[int(time.time() * 1000)],
    )
    produce(
        users.writer,
        "Produce as writer: a transactional id without WRITE",
        OPEN,
        transactional_id=OTHER_TXN,
        batch=batch,
    )


def fetch(pair: Pair, case: str, *topics: str) -> None:
    b = builder(FETCH, 12)
    pair.call(
        case,
        FETCH,
        12,
        masked=[
            "responses.*.partitions.*.records",
            "responses.*.partitions.*.high_watermark",
            "responses.*.partitions.*.last_stable_offset",
            "responses.*.partitions.*.log_start_offset",
            "session_id",
        ],
        sort=["responses"],
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            b.FetchTopic(
                topic=t,
                partitions=(
                    b.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            )
            for t in topics
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


@pytest.mark.parametrize(
    ("what", "topic"),
    [
        ("READ allowed", OPEN),
        ("DESCRIBE only", DESCRIBED),
        ("no ACL", CLOSED),
        ("a topic that does not exist", MISSING),
    ],
)
def test_fetch_authorization(users: Principals, what: str, topic: str) -> None:
    fetch(users.writer, f"Fetch as writer: {what}", topic)


def test_fetch_mixed_topics(users: Principals) -> None:
    fetch(users.writer, "Fetch as writer: allowed and denied topics", OPEN, CLOSED)


METADATA_MASKED = ["topics.*.partitions.*.leader_epoch"]


def metadata(pair: Pair, case: str, topics: list[str] | None, auto_create: bool = False) -> None:
    b = builder(METADATA, 12)
    pair.call(
        case,
        METADATA,
        12,
        masked=METADATA_MASKED,
        sort=["topics"],
        topics=None
        if topics is None
        else tuple(b.MetadataRequestTopic(name=t, topic_id=uuid.UUID(int=0)) for t in topics),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=True,
    )


def test_metadata_named_topics(users: Principals) -> None:
    metadata(
        users.writer,
        "Metadata as writer: named topics (allowed, described, denied, missing)",
        [OPEN, DESCRIBED, CLOSED, DENIED, MISSING],
    )


def test_metadata_all_topics(users: Principals) -> None:
    metadata(users.writer, "Metadata as writer: all topics (the undescribable left out)", None)


def test_metadata_auto_create_without_create(users: Principals) -> None:
    metadata(users.writer, "Metadata as writer: auto-creation without CREATE", ["sec-auto"], True)


def test_metadata_no_acls(users: Principals) -> None:
    metadata(users.reader, "Metadata as reader (no ACL): all topics", None)


def test_metadata_cluster_authorized_operations(users: Principals) -> None:
    for user, pair in (("writer", users.writer), ("reader", users.reader)):
        pair.call(
            f"Metadata v10 as {user}: cluster authorized operations",
            METADATA,
            10,
            masked=METADATA_MASKED,
            topics=(),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True,
        )


def test_describe_cluster_authorized_operations(users: Principals) -> None:
    for user, pair in (("admin", users.admin), ("writer", users.writer), ("reader", users.reader)):
        pair.call(
            f"DescribeCluster as {user}: authorized operations",
            DESCRIBE_CLUSTER,
            1,
            include_cluster_authorized_operations=True,
            endpoint_type=1,
        )


def test_list_offsets(users: Principals) -> None:
    b = builder(LIST_OFFSETS, 9)
    users.writer.call(
        "ListOffsets as writer: allowed, denied, missing",
        LIST_OFFSETS,
        9,
        sort=["topics"],
        replica_id=-1,
        isolation_level=0,
        topics=tuple(
            b.ListOffsetsTopic(
                name=t,
                partitions=(
                    b.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    ),
                ),
            )
            for t in (OPEN, CLOSED, MISSING)
        ),
    )


def create_topics(pair: Pair, case: str, *names: str, validate_only: bool = True) -> None:
    b = builder(CREATE_TOPICS, 7)
    pair.call(
        case,
        CREATE_TOPICS,
        7,
        masked=["topics.*.configs"],
        sort=["topics"],
        topics=tuple(
            b.CreatableTopic(
                name=n, num_partitions=1, replication_factor=1, assignments=(), configs=()
            )
            for n in names
        ),
        timeout=TIMEOUT,
        validate_only=validate_only,
    )


def test_create_topics_authorization(users: Principals) -> None:
    create_topics(
        users.writer,
        "CreateTopics as writer: CREATE on a prefix, and on nothing",
        "sec-mine-1",
        "sec-not-mine",
    )
    create_topics(users.reader, "CreateTopics as reader (no ACL)", "sec-mine-2")
    create_topics(
        users.writer, "CreateTopics as writer: an existing topic it may not describe", CLOSED
    )


def test_create_topics_with_cluster_create(users: Principals) -> None:
    """CREATE on the cluster allows any topic (its configs stay hidden without
    DESCRIBE_CONFIGS)."""
    b = builder(CREATE_ACLS, 3)
    binding = acl(Resource.CLUSTER, "kafka-cluster", principal="User:revoked", operation=Op.CREATE)
    users.admin.call(
        "CreateAcls: CLUSTER CREATE", CREATE_ACLS, 3, creations=(b.AclCreation(**binding),)
    )
    wait_for(partial(acls_in_force, users.admin, "User:revoked", 1), 30, "the ACL on both")
    create_topics(users.pair("revoked"), "CreateTopics with CLUSTER CREATE", "sec-anything")


def test_delete_topics_authorization(users: Principals) -> None:
    b = builder(DELETE_TOPICS, 6)
    users.writer.call(
        "DeleteTopics as writer: without DELETE, without DESCRIBE, missing",
        DELETE_TOPICS,
        6,
        sort=["responses"],
        masked=["responses.*.topic_id"],
        topics=tuple(
            b.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in (OPEN, CLOSED, MISSING)
        ),
        timeout=TIMEOUT,
    )
    users.writer.call(
        "DeleteTopics as writer: an unknown topic id",
        DELETE_TOPICS,
        6,
        topics=(b.DeleteTopicState(name=None, topic_id=uuid.uuid4()),),
        timeout=TIMEOUT,
    )


def test_create_partitions_authorization(users: Principals) -> None:
    b = builder(CREATE_PARTITIONS, 3)
    users.writer.call(
        "CreatePartitions as writer: without ALTER, without DESCRIBE, missing",
        CREATE_PARTITIONS,
        3,
        sort=["results"],
        topics=tuple(
            b.CreatePartitionsTopic(name=n, count=2, assignments=None)
            for n in (OPEN, CLOSED, MISSING)
        ),
        timeout=TIMEOUT,
        validate_only=True,
    )


def test_delete_records_authorization(users: Principals) -> None:
    b = builder(DELETE_RECORDS, 2)
    users.writer.call(
        "DeleteRecords as writer: without DELETE, without DESCRIBE",
        DELETE_RECORDS,
        2,
        sort=["topics"],
        topics=tuple(
            b.DeleteRecordsTopic(
                name=n, partitions=(b.DeleteRecordsPartition(partition_index=0, offset=0),)
            )
            for n in (OPEN, CLOSED, MISSING)
        ),
        timeout=TIMEOUT,
    )


def describe_configs(pair: Pair, case: str, *resources: tuple[int, str]) -> None:
    b = builder(DESCRIBE_CONFIGS, 4)
    pair.call(
        case,
        DESCRIBE_CONFIGS,
        4,
        masked=["results.*.configs"],
        sort=["results"],
        resources=tuple(
            b.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=None)
            for t, n in resources
        ),
        include_synonyms=False,
        include_documentation=False,
    )


TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER, GROUP_RESOURCE = 2, 4, 8, 32


def test_describe_configs_authorization(users: Principals) -> None:
    describe_configs(
        users.writer,
        "DescribeConfigs as writer: broker, broker logger, topics",
        (BROKER_RESOURCE, "1"),
        (BROKER_LOGGER, "1"),
        (TOPIC_RESOURCE, OPEN),
        (TOPIC_RESOURCE, CLOSED),
        (TOPIC_RESOURCE, DENIED),
    )
    describe_configs(
        users.writer, "DescribeConfigs as writer: cluster-wide defaults", (BROKER_RESOURCE, "")
    )
    describe_configs(users.writer, "DescribeConfigs as writer: a group", (GROUP_RESOURCE, GROUP))


def test_alter_configs_authorization(users: Principals) -> None:
    b = builder(ALTER_CONFIGS, 2)
    users.writer.call(
        "AlterConfigs as writer: broker, topics",
        ALTER_CONFIGS,
        2,
        sort=["responses"],
        resources=tuple(
            b.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=(b.AlterableConfig(name="retention.ms", value="1000"),)
                if t == TOPIC_RESOURCE
                else (b.AlterableConfig(name="log.cleaner.threads", value="2"),),
            )
            for t, n in (
                (BROKER_RESOURCE, "1"),
                (TOPIC_RESOURCE, OPEN),
                (TOPIC_RESOURCE, DENIED),
                (TOPIC_RESOURCE, MISSING),
            )
        ),
        validate_only=True,
    )
    ib = builder(INCREMENTAL_ALTER_CONFIGS, 1)
    users.writer.call(
        "IncrementalAlterConfigs as writer: broker, broker logger, topic",
        INCREMENTAL_ALTER_CONFIGS,
        1,
        sort=["responses"],
        resources=tuple(
            ib.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=(ib.AlterableConfig(name=k, config_operation=0, value=v),),
            )
            for t, n, k, v in (
                (BROKER_RESOURCE, "1", "log.cleaner.threads", "2"),
                (BROKER_LOGGER, "1", "kafka", "INFO"),
                (TOPIC_RESOURCE, OPEN, "retention.ms", "1000"),
            )
        ),
        validate_only=True,
    )


def test_cluster_operations(users: Principals) -> None:
    """APIs guarded by a CLUSTER operation the writer does not have."""
    users.writer.call(
        "DescribeLogDirs as writer (CLUSTER DESCRIBE)",
        DESCRIBE_LOG_DIRS,
        4,
        masked=[
            "results.*.log_dir",
            "results.*.total_bytes",
            "results.*.usable_bytes",
            "results.*.topics",
        ],
        topics=None,
    )
    users.reader.call(
        "DescribeLogDirs as reader (no CLUSTER DESCRIBE)", DESCRIBE_LOG_DIRS, 4, topics=None
    )
    eb = builder(ELECT_LEADERS, 2)
    users.writer.call(
        "ElectLeaders as writer (no CLUSTER ALTER)",
        ELECT_LEADERS,
        2,
        masked=["replica_election_results.*.partition_result.*.error_message"],
        election_type=0,
        topic_partitions=(eb.TopicPartitions(topic=OPEN, partitions=(0,)),),
        timeout=TIMEOUT,
    )
    users.writer.call(
        "AlterPartitionReassignments as writer (no CLUSTER ALTER)",
        ALTER_REASSIGNMENTS,
        0,
        masked=KAFKA_REQUEST_TEXT,
        timeout=TIMEOUT,
        topics=(),
    )
    users.writer.call(
        "UnregisterController as writer (no CLUSTER ALTER)",
        UNREGISTER_CONTROLLER,
        0,
        masked=KAFKA_REQUEST_TEXT,
        controller_id=42,
    )
    users.writer.call(
        "ListPartitionReassignments as writer (CLUSTER DESCRIBE)",
        LIST_REASSIGNMENTS,
        0,
        timeout=TIMEOUT,
        topics=None,
    )
    users.reader.call(
        "ListPartitionReassignments as reader (no CLUSTER DESCRIBE)",
        LIST_REASSIGNMENTS,
        0,
        masked=KAFKA_REQUEST_TEXT,
        timeout=TIMEOUT,
        topics=None,
    )


# ------------------------------------------------------------------------------- groups


def test_find_coordinator_authorization(users: Principals) -> None:
    users.writer.call(
        "FindCoordinator as writer: groups and transactional ids, allowed and not",
        FIND_COORDINATOR,
        4,
        masked=["coordinators.*.node_id"],
        sort=["coordinators"],
        key_type=0,
        coordinator_keys=(GROUP, OTHER_GROUP),
    )
    users.writer.call(
        "FindCoordinator as writer: transactional ids, allowed and not",
        FIND_COORDINATOR,
        4,
        masked=["coordinators.*.node_id"],
        sort=["coordinators"],
        key_type=1,
        coordinator_keys=(TXN, OTHER_TXN),
    )


def test_join_group_unauthorized(users: Principals) -> None:
    b = builder(JOIN_GROUP, 9)
    users.writer.call(
        "JoinGroup as writer: a group without READ",
        JOIN_GROUP,
        9,
        group_id=OTHER_GROUP,
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(b.JoinGroupRequestProtocol(name="range", metadata=b""),),
        reason=None,
    )


def test_group_apis_unauthorized(users: Principals) -> None:
    users.writer.call(
        "Heartbeat as writer: a group without READ",
        HEARTBEAT,
        4,
        group_id=OTHER_GROUP,
        generation_id=1,
        member_id="m",
        group_instance_id=None,
    )
    users.writer.call(
        "SyncGroup as writer: a group without READ",
        SYNC_GROUP,
        5,
        group_id=OTHER_GROUP,
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(),
    )
    lb = builder(LEAVE_GROUP, 5)
    users.writer.call(
        "LeaveGroup as writer: a group without READ",
        LEAVE_GROUP,
        5,
        group_id=OTHER_GROUP,
        members=(lb.MemberIdentity(member_id="m", group_instance_id=None, reason=None),),
    )
    users.writer.call(
        "DescribeGroups as writer: allowed and not, authorized operations",
        DESCRIBE_GROUPS,
        5,
        sort=["groups"],
        groups=(GROUP, OTHER_GROUP),
        include_authorized_operations=True,
    )
    users.writer.call(
        "DeleteGroups as writer: groups without DELETE",
        DELETE_GROUPS,
        2,
        sort=["results"],
        groups_names=(GROUP, OTHER_GROUP),
    )
    users.writer.call("ListGroups as writer", LIST_GROUPS, 5, states_filter=(), types_filter=())
    ob = builder(OFFSET_DELETE, 0)
    users.writer.call(
        "OffsetDelete as writer: a group without DELETE",
        OFFSET_DELETE,
        0,
        group_id=OTHER_GROUP,
        topics=(
            ob.OffsetDeleteRequestTopic(
                name=OPEN, partitions=(ob.OffsetDeleteRequestPartition(partition_index=0),)
            ),
        ),
    )


def offset_commit(pair: Pair, case: str, group: str, *topics: str) -> None:
    b = builder(OFFSET_COMMIT, 9)
    pair.call(
        case,
        OFFSET_COMMIT,
        9,
        sort=["topics"],
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=tuple(
            b.OffsetCommitRequestTopic(
                name=t,
                partitions=(
                    b.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            )
            for t in topics
        ),
    )


def test_offset_commit_authorization(users: Principals) -> None:
    offset_commit(users.writer, "OffsetCommit as writer: a group without READ", OTHER_GROUP, OPEN)
    offset_commit(
        users.writer,
        "OffsetCommit as writer: its group, topics with and without READ",
        GROUP,
        OPEN,
        CLOSED,
        MISSING,
    )


def test_offset_fetch_authorization(users: Principals) -> None:
    b = builder(OFFSET_FETCH, 9)
    users.writer.call(
        "OffsetFetch as writer: groups with and without READ, topics with and without DESCRIBE",
        OFFSET_FETCH,
        9,
        sort=["groups", "groups.*.topics"],
        groups=tuple(
            b.OffsetFetchRequestGroup(
                group_id=g,
                member_id=None,
                member_epoch=-1,
                topics=(
                    b.OffsetFetchRequestTopics(name=OPEN, partition_indexes=(0,)),
                    b.OffsetFetchRequestTopics(name=CLOSED, partition_indexes=(0,)),
                ),
            )
            for g in (GROUP, OTHER_GROUP)
        ),
        require_stable=False,
    )
    b7 = builder(OFFSET_FETCH, 7)
    users.writer.call(
        "OffsetFetch v7 as writer: its group, topics with and without DESCRIBE",
        OFFSET_FETCH,
        7,
        sort=["topics"],
        group_id=GROUP,
        topics=tuple(
            b7.OffsetFetchRequestTopic(name=t, partition_indexes=(0,)) for t in (OPEN, CLOSED)
        ),
        require_stable=False,
    )
    users.writer.call(
        "OffsetFetch as writer: all topics of its group",
        OFFSET_FETCH,
        9,
        groups=(
            b.OffsetFetchRequestGroup(group_id=GROUP, member_id=None, member_epoch=-1, topics=None),
        ),
        require_stable=False,
    )


def test_consumer_group_heartbeat_authorization(users: Principals) -> None:
    common: dict[str, Any] = dict(
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )
    users.writer.call(
        "ConsumerGroupHeartbeat as writer: a group without READ",
        CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=OTHER_GROUP,
        subscribed_topic_names=(OPEN,),
        **common,
    )
    users.writer.call(
        "ConsumerGroupHeartbeat as writer: subscribed to a topic without DESCRIBE",
        CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id="sec-g-hb",
        subscribed_topic_names=(OPEN, CLOSED),
        **common,
    )


# ------------------------------------------------------------------------- transactions


def test_init_producer_id_authorization(users: Principals) -> None:
    masked = ["producer_id", "producer_epoch"]
    for what, pair, txn in (
        ("writer, a transactional id without WRITE", users.writer, OTHER_TXN),
        ("writer, its transactional id", users.writer, TXN),
        ("writer, idempotent (WRITE on a topic)", users.writer, None),
        ("reader, idempotent (no WRITE anywhere)", users.reader, None),
    ):
        pair.call(
            f"InitProducerId as {what}",
            INIT_PRODUCER_ID,
            5,
            masked=masked,
            transactional_id=txn,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )


def test_add_partitions_to_txn_authorization(users: Principals) -> None:
    b = builder(ADD_PARTITIONS_TO_TXN, 3)
    for what, txn, topics in (
        ("a transactional id without WRITE", OTHER_TXN, (OPEN,)),
        ("its transactional id, a topic without WRITE", TXN, (OPEN, CLOSED, MISSING)),
    ):
        users.writer.call(
            f"AddPartitionsToTxn v3 as writer: {what}",
            ADD_PARTITIONS_TO_TXN,
            3,
            sort=["results_by_topic_v3_and_below"],
            v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=12345,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=tuple(
                b.AddPartitionsToTxnTopic(name=t, partitions=(0,)) for t in topics
            ),
        )
    users.writer.call(
        "AddOffsetsToTxn as writer: a transactional id without WRITE",
        ADD_OFFSETS_TO_TXN,
        3,
        transactional_id=OTHER_TXN,
        producer_id=12345,
        producer_epoch=0,
        group_id=GROUP,
    )
    users.writer.call(
        "AddOffsetsToTxn as writer: a group without READ",
        ADD_OFFSETS_TO_TXN,
        3,
        transactional_id=TXN,
        producer_id=12345,
        producer_epoch=0,
        group_id=OTHER_GROUP,
    )
    users.writer.call(
        "EndTxn as writer: a transactional id without WRITE",
        END_TXN,
        4,
        transactional_id=OTHER_TXN,
        producer_id=12345,
        producer_epoch=0,
        committed=True,
    )
    tb = builder(TXN_OFFSET_COMMIT, 3)
    users.writer.call(
        "TxnOffsetCommit as writer: a transactional id without WRITE",
        TXN_OFFSET_COMMIT,
        3,
        transactional_id=OTHER_TXN,
        group_id=GROUP,
        producer_id=12345,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            tb.TxnOffsetCommitRequestTopic(
                name=OPEN,
                partitions=(
                    tb.TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )


def call_decoded(
    pair: Pair,
    case: str,
    message: Message,
    api_key: int,
    version: int,
    masked: list[str] | None = None,
    **fields: Any,
) -> None:
    """`pair.call` for answers kio cannot read (the timestamp -1 Kafka sends with an error),
    decoded with our schema codec."""
    answers = pair.both(
        lambda side: message.decode(side.conn().call_raw(api_key, version, **fields), version)[0]
    )
    pair.compare(case, *answers, masked=masked or [])


def test_transaction_listings(users: Principals) -> None:
    call_decoded(
        users.writer,
        "DescribeTransactions as writer: an id without DESCRIBE",
        _DESCRIBE_TRANSACTIONS_RESPONSE,
        DESCRIBE_TRANSACTIONS,
        0,
        transactional_ids=(OTHER_TXN,),
    )
    call_decoded(
        users.writer,
        "DescribeTransactions as writer: its id",
        _DESCRIBE_TRANSACTIONS_RESPONSE,
        DESCRIBE_TRANSACTIONS,
        0,
        masked=["transaction_states.*.producer_id"],
        transactional_ids=(TXN,),
    )
    users.reader.call(
        "ListTransactions as reader",
        LIST_TRANSACTIONS,
        1,
        state_filters=(),
        producer_id_filters=(),
        duration_filter=-1,
    )
    db = builder(DESCRIBE_PRODUCERS, 0)
    users.writer.call(
        "DescribeProducers as writer: topics with and without READ",
        DESCRIBE_PRODUCERS,
        0,
        sort=["topics"],
        topics=tuple(db.TopicRequest(name=t, partition_indexes=(0,)) for t in (OPEN, CLOSED)),
    )


# -------------------------------------------------------------------- delegation tokens


def _response(name: str, valid: tuple[int, int], *fields: Field) -> Message:
    """A flexible (v2+) response of plain fields, decoded to a dict."""
    return Message(name, valid, (2, 0x7FFF), Struct(dict, fields, keeps_tags=True))


_EXPIRY = (Field("error_code", "int16"), Field("expiry_timestamp_ms", "int64"))
_THROTTLE = Field("throttle_time_ms", "int32")
CREATE_TOKEN_RESPONSE = _response(
    "CreateDelegationTokenResponse",
    (3, 3),
    Field("error_code", "int16"),
    *(
        Field(name, "string")
        for name in (
            "principal_type",
            "principal_name",
            "token_requester_principal_type",
            "token_requester_principal_name",
        )
    ),
    *(Field(name, "int64") for name in ("issue_ms", "expiry_ms", "max_ms")),
    Field("token_id", "string"),
    Field("hmac", "bytes"),
    _THROTTLE,
)
EXPIRY_RESPONSE = _response("RenewOrExpireDelegationTokenResponse", (2, 2), *_EXPIRY, _THROTTLE)
TOKEN_MASKED = ["issue_ms", "expiry_ms", "max_ms", "token_id", "hmac"]


def test_delegation_tokens(users: Principals) -> None:
    call_decoded(
        users.writer,
        "CreateDelegationToken as writer for itself",
        CREATE_TOKEN_RESPONSE,
        CREATE_TOKEN,
        3,
        masked=TOKEN_MASKED,
        owner_principal_type=None,
        owner_principal_name=None,
        renewers=(),
        max_lifetime=datetime.timedelta(hours=1),
    )
    call_decoded(
        users.writer,
        "CreateDelegationToken as writer for another user (no CREATE_TOKENS)",
        CREATE_TOKEN_RESPONSE,
        CREATE_TOKEN,
        3,
        masked=TOKEN_MASKED,
        owner_principal_type="User",
        owner_principal_name="reader",
        renewers=(),
        max_lifetime=datetime.timedelta(hours=1),
    )
    users.reader.call(
        "DescribeDelegationToken as reader: another user's tokens are not listed",
        DESCRIBE_TOKEN,
        3,
        owners=None,
    )
    call_decoded(
        users.writer,
        "RenewDelegationToken as writer: an unknown HMAC",
        EXPIRY_RESPONSE,
        RENEW_TOKEN,
        2,
        hmac=b"not-a-token",
        renew_period=datetime.timedelta(hours=1),
    )
    call_decoded(
        users.writer,
        "ExpireDelegationToken as writer: an unknown HMAC",
        EXPIRY_RESPONSE,
        EXPIRE_TOKEN,
        2,
        hmac=b"not-a-token",
        expiry_time_period=datetime.timedelta(hours=1),
    )

    def listed(side: Side) -> bool:  # a new token reaches Kafka's broker through its metadata
        return bool(side.conn().call(DESCRIBE_TOKEN, 3, owners=None).tokens)

    wait_for(lambda: all(users.writer.both(listed)), 30, "the writer's token on both")
    users.writer.call(
        "DescribeDelegationToken as writer: its own token",
        DESCRIBE_TOKEN,
        3,
        masked=[
            f"tokens.*.{k}"
            for k in ("issue_timestamp", "expiry_timestamp", "max_timestamp", "token_id", "hmac")
        ],
        owners=None,
    )


# ----------------------------------------------------------------------------- ACL admin


def acl(
    resource_type: int = Resource.TOPIC,
    name: str = "sec-acl",
    pattern: int = Pattern.LITERAL,
    principal: str = "User:acl-user",
    host: str = "*",
    operation: int = Op.READ,
    permission: int = Permission.ALLOW,
) -> dict[str, Any]:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission_type": permission,
    }


@pytest.mark.parametrize(
    ("what", "binding"),
    [
        ("a principal without a type", acl(principal="acl-user")),
        ("an empty principal", acl(principal="")),
        ("a principal of another type", acl(principal="Group:acl-group")),
        ("the wildcard principal", acl(principal="User:*", name="sec-acl-wild")),
        ("resource type ANY", acl(resource_type=Resource.ANY)),
        ("resource type UNKNOWN", acl(resource_type=Resource.UNKNOWN)),
        ("resource type 42", acl(resource_type=42)),
        ("pattern type MATCH", acl(pattern=Pattern.MATCH)),
        ("pattern type ANY", acl(pattern=Pattern.ANY)),
        ("pattern type UNKNOWN", acl(pattern=Pattern.UNKNOWN)),
        ("operation ANY", acl(operation=Op.ANY)),
        ("operation UNKNOWN", acl(operation=Op.UNKNOWN)),
        ("operation 99", acl(operation=99)),
        ("permission ANY", acl(permission=Permission.ANY)),
        ("an empty resource name", acl(name="")),
        (
            "a cluster resource not named kafka-cluster",
            acl(resource_type=Resource.CLUSTER, name="other", operation=Op.ALTER),
        ),
        ("an empty host", acl(host="")),
        ("a host name", acl(host="example.com", name="sec-acl-host")),
        ("a prefixed wildcard", acl(pattern=Pattern.PREFIXED, name="*")),
        (
            "an operation foreign to the resource",
            acl(
                resource_type=Resource.TRANSACTIONAL_ID,
                name="sec-acl-tx",
                operation=Op.CREATE_TOKENS,
            ),
        ),
        (
            "a DENY on a user resource",
            acl(
                resource_type=Resource.USER,
                name="User:acl-user",
                operation=Op.CREATE_TOKENS,
                permission=Permission.DENY,
            ),
        ),
    ],
)
def test_create_acls(users: Principals, what: str, binding: dict[str, Any]) -> None:
    b = builder(CREATE_ACLS, 3)
    users.admin.call(f"CreateAcls: {what}", CREATE_ACLS, 3, creations=(b.AclCreation(**binding),))


def test_create_acls_unprivileged(users: Principals) -> None:
    b = builder(CREATE_ACLS, 3)
    users.writer.call(
        "CreateAcls as writer (no CLUSTER ALTER)",
        CREATE_ACLS,
        3,
        masked=KAFKA_REQUEST_TEXT,
        creations=(b.AclCreation(**acl()),),
    )


def acl_filter(
    resource_type: int = Resource.ANY,
    name: str | None = None,
    pattern: int = Pattern.ANY,
    principal: str | None = None,
    host: str | None = None,
    operation: int = Op.ANY,
    permission: int = Permission.ANY,
) -> dict[str, Any]:
    return {
        "resource_type_filter": resource_type,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": host,
        "operation": operation,
        "permission_type": permission,
    }


ACL_SORT = ["resources", "resources.*.acls", "filter_results.*.matching_acls"]


def acls_call(
    pair: Pair, case: str, api_key: int, masked: list[str] | None = None, **fields: Any
) -> None:
    """`pair.call` of an ACL API: an ACL's host is compared (diff masks "host" fields, the
    brokers' addresses, everywhere else)."""

    def hosts_kept(node: Any) -> Any:
        if isinstance(node, dict):
            return {("acl_host" if k == "host" else k): hosts_kept(v) for k, v in node.items()}
        if isinstance(node, list):
            return [hosts_kept(v) for v in node]
        return node

    kafka, rafka = pair.send(api_key, 3, **fields)
    pair.compare(
        case,
        hosts_kept(diff.plain(kafka)),
        hosts_kept(diff.plain(rafka)),
        masked=masked or [],
        sort=ACL_SORT,
    )


@pytest.mark.parametrize(
    ("what", "filter_"),
    [
        ("everything", acl_filter()),
        ("a LITERAL topic", acl_filter(Resource.TOPIC, OPEN, Pattern.LITERAL)),
        (
            "MATCH of a topic under a prefix",
            acl_filter(Resource.TOPIC, "sec-mine-x", Pattern.MATCH),
        ),
        ("MATCH of a named topic", acl_filter(Resource.TOPIC, OPEN, Pattern.MATCH)),
        ("a PREFIXED topic", acl_filter(Resource.TOPIC, "sec-mine-", Pattern.PREFIXED)),
        ("PREFIXED that no binding has", acl_filter(Resource.TOPIC, "sec-mi", Pattern.PREFIXED)),
        ("ANY pattern of a name", acl_filter(Resource.ANY, "sec-mine-", Pattern.ANY)),
        ("groups", acl_filter(Resource.GROUP)),
        ("a principal and an operation", acl_filter(principal="User:writer", operation=Op.WRITE)),
        ("DENY only", acl_filter(permission=Permission.DENY)),
        ("a host", acl_filter(host="example.com")),
        ("resource type UNKNOWN", acl_filter(Resource.UNKNOWN)),
        ("pattern type UNKNOWN", acl_filter(pattern=Pattern.UNKNOWN)),
        ("operation UNKNOWN", acl_filter(operation=Op.UNKNOWN)),
        ("MATCH without a name", acl_filter(Resource.TOPIC, None, Pattern.MATCH)),
    ],
)
def test_describe_acls(users: Principals, what: str, filter_: dict[str, Any]) -> None:
    acls_call(users.admin, f"DescribeAcls: {what}", DESCRIBE_ACLS, **filter_)


def test_describe_acls_not_admin(users: Principals) -> None:
    acls_call(
        users.writer, "DescribeAcls as writer (CLUSTER DESCRIBE)", DESCRIBE_ACLS, **acl_filter()
    )
    acls_call(
        users.reader,
        "DescribeAcls as reader (no CLUSTER DESCRIBE)",
        DESCRIBE_ACLS,
        masked=KAFKA_REQUEST_TEXT,
        **acl_filter(),
    )


def test_delete_acls(users: Principals) -> None:
    b = builder(CREATE_ACLS, 3)
    gone = "User:gone"
    users.admin.call(
        "CreateAcls: bindings to delete",
        CREATE_ACLS,
        3,
        creations=(
            b.AclCreation(**acl(name="sec-del", principal=gone)),
            b.AclCreation(**acl(name="sec-del", pattern=Pattern.PREFIXED, principal=gone)),
            b.AclCreation(**acl(name="sec-del-2", principal=gone, operation=Op.WRITE)),
            b.AclCreation(**acl(resource_type=Resource.GROUP, name="sec-del", principal=gone)),
        ),
    )
    d = builder(DELETE_ACLS, 3)
    acls_call(
        users.admin,
        "DeleteAcls: LITERAL, MATCH and no-match filters in one request",
        DELETE_ACLS,
        filters=(
            d.DeleteAclsFilter(**acl_filter(Resource.TOPIC, "sec-del", Pattern.LITERAL, gone)),
            d.DeleteAclsFilter(**acl_filter(Resource.TOPIC, "sec-del-2", Pattern.MATCH, gone)),
            d.DeleteAclsFilter(**acl_filter(Resource.TOPIC, "sec-nothing", Pattern.LITERAL)),
        ),
    )
    acls_call(
        users.admin,
        "DeleteAcls: pattern type UNKNOWN",
        DELETE_ACLS,
        filters=(d.DeleteAclsFilter(**acl_filter(pattern=Pattern.UNKNOWN)),),
    )
    acls_call(
        users.admin,
        "DeleteAcls: ANY of a principal",
        DELETE_ACLS,
        filters=(d.DeleteAclsFilter(**acl_filter(principal=gone)),),
    )
    users.writer.call(
        "DeleteAcls as writer (no CLUSTER ALTER)",
        DELETE_ACLS,
        3,
        masked=KAFKA_REQUEST_TEXT,
        filters=(d.DeleteAclsFilter(**acl_filter(principal=gone)),),
    )


# --------------------------------------------------------------------------- SCRAM admin

SCRAM_SORT = ["results", "results.*.credential_infos"]


def describe_scram(pair: Pair, case: str, users_: list[str] | None) -> None:
    b = builder(DESCRIBE_SCRAM, 0)
    pair.call(
        case,
        DESCRIBE_SCRAM,
        0,
        sort=SCRAM_SORT,
        users=None if users_ is None else tuple(b.UserName(name=u) for u in users_),
    )


def test_describe_scram(users: Principals) -> None:
    describe_scram(users.admin, "DescribeUserScramCredentials: every user", None)
    describe_scram(
        users.admin, "DescribeUserScramCredentials: a user and an unknown one", ["writer", "nobody"]
    )
    describe_scram(
        users.admin, "DescribeUserScramCredentials: a user named twice", ["writer", "writer"]
    )
    describe_scram(users.admin, "DescribeUserScramCredentials: an empty list", [])
    describe_scram(
        users.reader, "DescribeUserScramCredentials as reader (no CLUSTER DESCRIBE)", None
    )
    describe_scram(
        users.reader,
        "DescribeUserScramCredentials as reader (no CLUSTER DESCRIBE): named users",
        ["writer", "nobody"],
    )


def upsertion(user: str, iterations: int = 4096, mechanism: int = 1, salt: bytes = b"salt") -> Any:
    b = builder(ALTER_SCRAM, 0)
    return b.ScramCredentialUpsertion(
        name=user,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=b"\x01" * 32,
    )


def deletion(user: str, mechanism: int = 1) -> Any:
    return builder(ALTER_SCRAM, 0).ScramCredentialDeletion(name=user, mechanism=mechanism)


@pytest.mark.parametrize(
    ("what", "upsertions", "deletions"),
    [
        ("iterations below 4096", [upsertion("scram-a", 100)], []),
        ("iterations above 16384", [upsertion("scram-a", 20000)], []),
        ("an unknown mechanism", [upsertion("scram-a", mechanism=0)], []),
        ("mechanism 9", [upsertion("scram-a", mechanism=9)], []),
        ("an empty user name", [upsertion("")], []),
        ("an empty salt", [upsertion("scram-a", salt=b"")], []),
        ("a user upserted twice", [upsertion("scram-a"), upsertion("scram-a", mechanism=2)], []),
        ("a user upserted and deleted", [upsertion("scram-a")], [deletion("scram-a")]),
        ("deleting an unknown user", [], [deletion("nobody")]),
        ("deleting a mechanism the user lacks", [], [deletion("writer", 0)]),
        ("a good upsertion, then its deletion", [upsertion("scram-b")], []),
        ("deleting it", [], [deletion("scram-b")]),
    ],
)
def test_alter_scram(users: Principals, what: str, upsertions: list, deletions: list) -> None:
    users.admin.call(
        f"AlterUserScramCredentials: {what}",
        ALTER_SCRAM,
        0,
        sort=["results"],
        deletions=tuple(deletions),
        upsertions=tuple(upsertions),
    )


def test_alter_scram_unprivileged(users: Principals) -> None:
    users.writer.call(
        "AlterUserScramCredentials as writer (no CLUSTER ALTER)",
        ALTER_SCRAM,
        0,
        masked=KAFKA_REQUEST_TEXT,
        deletions=(),
        upsertions=(upsertion("scram-c"),),
    )


# -------------------------------------------------------------------------- client quotas


def quota_entry(entity: dict[str, str | None], **ops: float | None) -> Any:
    """An AlterClientQuotas entry: `ops` set a key to a value, or remove it (None)."""
    b = builder(ALTER_QUOTAS, 1)
    return b.EntryData(
        entity=tuple(b.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
        ops=tuple(
            b.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()
        ),
    )


def alter_quotas(pair: Pair, case: str, *entries: Any, validate_only: bool = False) -> None:
    pair.call(
        case,
        ALTER_QUOTAS,
        1,
        sort=["entries", "entries.*.entity"],  # an entity is a map: its order is Kafka's hash's
        entries=entries,
        validate_only=validate_only,
    )


@pytest.mark.parametrize(
    ("what", "entity", "ops"),
    [
        ("an unknown entity type", {"service": "x"}, {"producer_byte_rate": 1024.0}),
        ("an unknown key", {"user": "u1"}, {"bytes_per_fortnight": 1.0}),
        ("a negative rate", {"user": "u1"}, {"producer_byte_rate": -5.0}),
        ("a zero rate", {"user": "u1"}, {"producer_byte_rate": 0.0}),
        ("a fractional byte rate", {"user": "u1"}, {"producer_byte_rate": 1.5}),
        ("request_percentage 0.5", {"user": "u1"}, {"request_percentage": 0.5}),
        ("a negative request_percentage", {"user": "u1"}, {"request_percentage": -1.0}),
        ("controller_mutation_rate 2.5", {"client-id": "c1"}, {"controller_mutation_rate": 2.5}),
        ("user and client-id", {"user": "u1", "client-id": "c1"}, {"consumer_byte_rate": 2048.0}),
        ("the default user", {"user": None}, {"producer_byte_rate": 1e6}),
        ("an empty entity", {}, {"producer_byte_rate": 1024.0}),
        (
            "ip and user together",
            {"ip": "127.0.0.1", "user": "u1"},
            {"connection_creation_rate": 5.0},
        ),
        ("a bad ip", {"ip": "not-an-ip"}, {"connection_creation_rate": 5.0}),
        ("an ip with a byte rate", {"ip": "127.0.0.1"}, {"producer_byte_rate": 5.0}),
        (
            "an ip's connection_creation_rate",
            {"ip": "127.0.0.1"},
            {"connection_creation_rate": 5.0},
        ),
        ("a user's connection_creation_rate", {"user": "u1"}, {"connection_creation_rate": 5.0}),
        ("removing a key never set", {"user": "u1"}, {"producer_byte_rate": None}),
        (
            "a key set and removed at once",
            {"user": "u1"},
            {"producer_byte_rate": 1.0, "consumer_byte_rate": None},
        ),
    ],
)
def test_alter_quotas_validation(
    users: Principals, what: str, entity: dict[str, str | None], ops: dict[str, float | None]
) -> None:
    alter_quotas(
        users.admin,
        f"AlterClientQuotas (validate only): {what}",
        quota_entry(entity, **ops),
        validate_only=True,
    )


def test_alter_quotas_duplicate_entity(users: Principals) -> None:
    entry = quota_entry({"user": "u1"}, producer_byte_rate=1024.0)
    alter_quotas(
        users.admin, "AlterClientQuotas: one entity twice", entry, entry, validate_only=True
    )


def test_alter_quotas_unprivileged(users: Principals) -> None:
    alter_quotas(
        users.writer,
        "AlterClientQuotas as writer (no CLUSTER ALTER_CONFIGS)",
        quota_entry({"user": "writer"}, producer_byte_rate=1e9),
    )


def describe_quotas(
    pair: Pair, case: str, strict: bool = False, **components: tuple[int, str | None]
) -> None:
    b = builder(DESCRIBE_QUOTAS, 1)
    pair.call(
        case,
        DESCRIBE_QUOTAS,
        1,
        sort=["entries", "entries.*.entity", "entries.*.values"],
        components=tuple(
            b.ComponentData(entity_type=t.replace("_", "-"), match_type=m, match=n)
            for t, (m, n) in components.items()
        ),
        strict=strict,
    )


EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def test_describe_quotas(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: quotas to describe",
        quota_entry({"user": "q-user"}, producer_byte_rate=1e6, request_percentage=50.0),
        quota_entry({"user": "q-user", "client-id": "q-client"}, consumer_byte_rate=2e6),
        quota_entry({"user": None}, controller_mutation_rate=100.0),
    )
    wait_for(partial(quota_listed, users.admin, "q-user"), 30, "the quotas on both")
    describe_quotas(users.admin, "DescribeClientQuotas: a user, exact", user=(EXACT, "q-user"))
    describe_quotas(
        users.admin, "DescribeClientQuotas: a user, strict", strict=True, user=(EXACT, "q-user")
    )
    describe_quotas(users.admin, "DescribeClientQuotas: the default user", user=(DEFAULT, None))
    describe_quotas(
        users.admin,
        "DescribeClientQuotas: any user with a client id",
        user=(SPECIFIED, None),
        client_id=(SPECIFIED, None),
    )
    describe_quotas(
        users.admin, "DescribeClientQuotas: an unknown entity type", service=(EXACT, "x")
    )
    describe_quotas(users.admin, "DescribeClientQuotas: match type 7", user=(7, "q-user"))
    describe_quotas(users.admin, "DescribeClientQuotas: exact without a name", user=(EXACT, None))
    describe_quotas(
        users.admin, "DescribeClientQuotas: default with a name", user=(DEFAULT, "q-user")
    )
    describe_quotas(users.admin, "DescribeClientQuotas: an ip", ip=(SPECIFIED, None))
    describe_quotas(
        users.writer,
        "DescribeClientQuotas as writer (no CLUSTER DESCRIBE_CONFIGS)",
        user=(SPECIFIED, None),
    )


def quota_listed(pair: Pair, user: str) -> bool:
    b = builder(DESCRIBE_QUOTAS, 1)
    component = b.ComponentData(entity_type="user", match_type=EXACT, match=user)

    def listed(side: Side) -> bool:
        return bool(
            side.conn().call(DESCRIBE_QUOTAS, 1, components=(component,), strict=True).entries
        )

    return all(pair.both(listed))


def throttled(
    pair: Pair, case: str, client_id: str, api_key: int, version: int, what: Callable[[int], dict]
) -> None:
    """Sends the request (`what(attempt)` gives its fields) as `client_id` on each broker until
    one answer carries a throttle (the quota reaches a broker's enforcement a moment after
    AlterClientQuotas); compares that both throttle, within an order of magnitude."""
    throttles = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=side.security) as c:
            c.client_id = client_id.encode()
            attempt = iter(range(1_000_000))

            def throttle(c: KafkaConnection = c, attempt: Iterator[int] = attempt) -> int:
                answer = c.call(api_key, version, **what(next(attempt)))
                return int(answer.throttle_time.total_seconds() * 1000)

            throttles.append(wait_for(throttle, 30, f"{side.name} throttling {client_id}"))
    kafka, rafka = throttles
    found = [] if max(throttles) <= 10 * min(throttles) else [f"throttle_time_ms {throttles}"]
    record(case, f"throttle_time_ms {kafka}", f"throttle_time_ms {rafka}", found)


def test_produce_throttled(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: producer_byte_rate of a client id",
        quota_entry({"client-id": "sec-slow-producer"}, producer_byte_rate=1024.0),
    )
    b = builder(PRODUCE, 11)
    batch = make_batch([b"x" * 4000] * 4, timestamps=[int(time.time() * 1000)] * 4)
    data = (
        b.TopicProduceData(
            name=OPEN, partition_data=(b.PartitionProduceData(index=0, records=batch),)
        ),
    )
    throttled(
        users.admin,
        "Produce over producer_byte_rate is throttled",
        "sec-slow-producer",
        PRODUCE,
        11,
        lambda _: {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": data},
    )


def test_fetch_throttled(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: consumer_byte_rate of a client id",
        quota_entry({"client-id": "sec-slow-consumer"}, consumer_byte_rate=1024.0),
    )
    batch = make_batch([b"y" * 4000] * 4, timestamps=[int(time.time() * 1000)] * 4)
    produce(users.admin, "Produce as the super user: data to fetch", OPEN, batch=batch)
    b = builder(FETCH, 12)
    topics = (
        b.FetchTopic(
            topic=OPEN,
            partitions=(
                b.FetchPartition(
                    partition=0,
                    current_leader_epoch=-1,
                    fetch_offset=0,
                    log_start_offset=-1,
                    partition_max_bytes=1 << 20,
                ),
            ),
        ),
    )
    throttled(
        users.admin,
        "Fetch over consumer_byte_rate is throttled",
        "sec-slow-consumer",
        FETCH,
        12,
        lambda _: {
            "replica_id": -1,
            "max_wait": datetime.timedelta(0),
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": topics,
            "forgotten_topics_data": (),
            "rack_id": "",
        },
    )


def test_request_percentage_throttled(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: request_percentage of a client id",
        # so small that one Metadata overshoots it on both, whose throttle is then bounded by
        # one quota window (a handler's time is the implementation's own)
        quota_entry({"client-id": "sec-busy"}, request_percentage=0.0001),
    )
    throttled(
        users.admin,
        "Requests over request_percentage are throttled",
        "sec-busy",
        METADATA,
        12,
        lambda _: ALL_TOPICS,
    )


def test_produce_over_request_percentage_throttled(users: Principals) -> None:
    """Kafka's Produce answer carries the larger of its byte-rate and request-time throttles
    (KafkaApis.handleProduceRequest)."""
    alter_quotas(
        users.admin,
        "AlterClientQuotas: request_percentage of a producer's client id",
        quota_entry({"client-id": "sec-busy-producer"}, request_percentage=0.0001),
    )
    b = builder(PRODUCE, 11)
    batch = make_batch([b"z" * 100], timestamps=[int(time.time() * 1000)])
    data = (
        b.TopicProduceData(
            name=OPEN, partition_data=(b.PartitionProduceData(index=0, records=batch),)
        ),
    )
    throttled(
        users.admin,
        "Produce over request_percentage is throttled",
        "sec-busy-producer",
        PRODUCE,
        11,
        lambda _: {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": data},
    )


def test_controller_mutation_rate(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: controller_mutation_rate of a client id",
        # the user's own (the default user's quota of test_describe_quotas comes before a
        # client id's alone)
        quota_entry({"user": "admin", "client-id": "sec-mutator"}, controller_mutation_rate=1.0),
    )
    b = builder(CREATE_TOPICS, 7)

    def create(name: str) -> dict:
        topic = b.CreatableTopic(
            name=name, num_partitions=10, replication_factor=1, assignments=(), configs=()
        )
        return {"topics": (topic,), "timeout": TIMEOUT, "validate_only": False}

    throttled(
        users.admin,
        "CreateTopics over controller_mutation_rate is throttled",
        "sec-mutator",
        CREATE_TOPICS,
        7,
        lambda n: create(f"sec-mutation-{n}"),
    )
    answers = []
    for side in users.admin.sides:  # at once, on a new connection (the old one is muted)
        with KafkaConnection.to_any(side.bootstrap, security=side.security) as c:
            c.client_id = b"sec-mutator"
            answers.append(c.call(CREATE_TOPICS, 7, **create("sec-mutation-refused")))
    kafka, rafka = answers
    users.admin.compare(
        "CreateTopics v7 while over controller_mutation_rate: THROTTLING_QUOTA_EXCEEDED",
        kafka,
        rafka,
        masked=["topics.*.configs"],
    )
    record(
        "CreateTopics refused by the mutation quota carries a throttle",
        str(kafka.throttle_time),
        str(rafka.throttle_time),
        [] if all(a.throttle_time.total_seconds() > 0 for a in answers) else ["no throttle"],
    )


# ------------------------------------------------------------------- sessions and tokens


def test_reauthentication_as_the_same_user(users: Principals) -> None:
    """KIP-368: a connection re-authenticates with the same principal; the new session's
    lifetime is connections.max.reauth.ms again."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=security("writer")) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
            token = b"\0writer\0" + PASSWORDS["writer"].encode()
            a = c.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
            m = c.call(METADATA, 12, **ALL_TOPICS)
            lifetime = int(a.session_lifetime.total_seconds() * 1000)
            answers.append([diff.plain(a), lifetime == REAUTH_MS, len(m.brokers)])
    pair.compare("SaslAuthenticate: re-authentication as the same user", *answers)


def test_session_expiry_closes_the_connection(users: Principals) -> None:
    """A SCRAM-SHA-512 session lives SHORT_SESSION_MS (the mechanism's own
    connections.max.reauth.ms); a request after it, without re-authenticating, closes the
    connection on both."""
    outcomes = []
    for side in users.pair("reader", "SCRAM-SHA-512").sides:
        with side.fresh() as c:
            lifetime = c.session_lifetime_ms

            def closed(c: KafkaConnection = c) -> bool:
                return call_or_closed(c, METADATA, 12, **ALL_TOPICS) == "<connection closed>"

            wait_for(closed, 30, f"{side.name} closing an expired session", interval=0.2)
            outcomes.append(f"lifetime {lifetime} ms, closed once expired")
    expected = f"lifetime {SHORT_SESSION_MS} ms, closed once expired"
    kafka, rafka = outcomes
    record(
        "SCRAM-SHA-512 session of the mechanism's connections.max.reauth.ms, then closed",
        kafka,
        rafka,
        [] if outcomes == [expected, expected] else [str(outcomes)],
    )


def test_token_authenticated_connection(users: Principals) -> None:
    """A connection that logged in with a delegation token (SCRAM, tokenauth=true) may not
    manage tokens (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""
    pair = users.pair("writer")
    for side in pair.sides:
        created = side.conn().call(
            CREATE_TOKEN,
            3,
            owner_principal_type=None,
            owner_principal_name=None,
            renewers=(),
            max_lifetime=datetime.timedelta(hours=1),
        )
        assert created.error_code == ErrorCode.none, created
        side.reset()
        side.security = ClientSecurity(
            PROTOCOL,
            "SCRAM-SHA-256",
            created.token_id,
            base64.b64encode(created.hmac).decode(),
            tokenauth=True,
        )
        wait_for(partial(logs_in, side.security, side), 30, f"{side.name} taking the token")
    call_decoded(
        pair,
        "CreateDelegationToken on a token-authenticated connection",
        CREATE_TOKEN_RESPONSE,
        CREATE_TOKEN,
        3,
        owner_principal_type=None,
        owner_principal_name=None,
        renewers=(),
        max_lifetime=datetime.timedelta(hours=1),
    )
    call_decoded(
        pair,
        "RenewDelegationToken on a token-authenticated connection",
        EXPIRY_RESPONSE,
        RENEW_TOKEN,
        2,
        hmac=b"whatever",
        renew_period=datetime.timedelta(hours=1),
    )
    pair.close()


def test_group_and_topic_authorized_operations(users: Principals) -> None:
    users.writer.call(
        "ConsumerGroupDescribe as writer: groups with and without DESCRIBE, authorized ops",
        69,
        1,
        sort=["groups"],
        group_ids=(GROUP, OTHER_GROUP),
        include_authorized_operations=True,
    )
    b = builder(75, 0)
    users.writer.call(
        "DescribeTopicPartitions as writer: topics with and without DESCRIBE, authorized ops",
        75,
        0,
        masked=["topics.*.partitions.*.leader_epoch"],
        sort=["topics"],
        topics=tuple(b.TopicRequest(name=t) for t in (OPEN, DESCRIBED, CLOSED, MISSING)),
        response_partition_limit=2000,
        cursor=None,
    )
