"""What the modules of tests/compat/security share: the principals and the names of the
topics, groups and transactional ids their ACLs are about, the API keys, and the request helpers
of more than one concern.
"""

from __future__ import annotations

import datetime
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.client_security import ClientSecurity
from cluster.kafka_client import AuthenticationError, KafkaConnection, builder
from common import dev_ca
from dataplane.protocol.message_codec import Message
from meta.acl import AclOperation as Op
from meta.acl import AclPermissionType as Permission
from meta.acl import PatternType as Pattern
from meta.acl import ResourceType as Resource
from tests.compat.pair import Pair, Side
from tests.integration.secured_cluster import PASSWORDS
from tests.peers.apache_kafka import ApacheKafka
from tests.unit.log.batches import make_batch

PROTOCOL = "SASL_PLAINTEXT"
REAUTH_MS = 3_600_000
SHORT_SESSION_MS = 3000  # SCRAM-SHA-512's own connections.max.reauth.ms

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


ALL_TOPICS = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
}


def logs_in(sec: ClientSecurity, side: Side) -> bool:
    try:
        with KafkaConnection.to_any(side.bootstrap, security=sec):
            return True
    except AuthenticationError:
        return False


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
