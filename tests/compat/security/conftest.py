"""Apache Kafka 4.4 and Rafka both secured the same way, started once for the whole package
(package-scoped fixtures, shared by its modules), whose answers the modules compare field by field.

One broker each with a SASL_PLAINTEXT listener (PLAIN users in the listener's JAAS config,
SCRAM-SHA-256/512 users made with AlterUserScramCredentials, delegation tokens on) and an SSL
listener with client certificates (PEM stores from a development CA; `CN=<user>` maps to
`User:<user>`), the StandardAuthorizer with `User:admin` as super user and
`allow.everyone.if.no.acl.found=false`. Principals: `admin` (super user), `writer` (the ACLs of
`ACLS`, made by the admin through CreateAcls on both) and `reader` (no ACL at all). Each case
sends the same request as the same principal to both.

The modules run in name order, and some cases see what earlier ones left on both brokers:
test_acls' DescribeAcls lists test_access's CLUSTER CREATE binding, and test_access's ListOffsets
runs before test_quotas produces until throttled (a different number of times on each broker).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from cluster import admin
from cluster.kafka_client import builder
from cluster.local import free_base_port
from cluster.polling import wait_for
from tests.compat.conftest import SAME_SETTINGS
from tests.compat.security.support import (
    ACLS,
    ADMIN,
    CLOSED,
    CREATE_ACLS,
    DENIED,
    DESCRIBED,
    OPEN,
    PROTOCOL,
    REAUTH_MS,
    SHORT_SESSION_MS,
    Certificates,
    Principals,
    acls_in_force,
    coordinators_ready,
    produce,
)
from tests.integration.secured_cluster import (
    AUTHORIZER,
    PASSWORDS,
    PLAIN_MODULE,
    SCRAM,
    SUPER_USER,
    secured_cluster,
)
from tests.peers.apache_kafka import ApacheKafka

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


@pytest.fixture(scope="package")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates(tmp_path_factory.mktemp("compat-tls"))


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
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
