"""ACLs end to end on a PLAINTEXT listener (principal User:ANONYMOUS) with the StandardAuthorizer
on: CreateAcls/DescribeAcls/DeleteAcls through confluent-kafka's AdminClient, and the checks
produce, metadata and the group APIs make. allow.everyone.if.no.acl.found=true lets the
anonymous principal create its first ACLs; a resource some ACL covers is then closed to anyone
no ACL allows. The multi-principal SASL/TLS scenarios are in the security client tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from tests.integration.conftest import running_cluster
from tests.integration.kafka_wire import WireClient, builder

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME = "User:ANONYMOUS"
METADATA, FIND_COORDINATOR, JOIN_GROUP, DESCRIBE_ACLS, CREATE_ACLS = 3, 10, 11, 29, 30

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


def binding(
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    pattern: ResourcePatternType = LITERAL,
    principal: str = ME,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def topic_filter(
    name: str, pattern: ResourcePatternType, perm: AclPermissionType = AclPermissionType.ANY
) -> AclBindingFilter:
    """The bindings of topic pattern `name` for every principal and host (None: Kafka's
    null, which confluent-kafka's type hints do not admit)."""
    anyone: str = None  # type: ignore[assignment]
    return AclBindingFilter(
        ResourceType.TOPIC, name, pattern, anyone, anyone, AclOperation.ANY, perm
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("acls"),
        brokers=1,
        metas=1,
        authorizer_class_name=AUTHORIZER,
        allow_everyone_if_no_acl_found="true",
        auto_create_topics_enable="false",
    ) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        # the cluster stays open to the anonymous principal: it may create topics and ACLs
        for f in admin.create_acls(
            [binding(ResourceType.BROKER, "kafka-cluster", AclOperation.ALL)]
        ).values():
            f.result(30)
        for f in admin.create_topics(
            [NewTopic("app-orders", 1, 1), NewTopic("secret", 1, 1), NewTopic("hidden", 1, 1)]
        ).values():
            f.result(30)
        yield c


def produce(cluster: LocalCluster, topic: str) -> None:
    """Produce one record; raises KafkaException with the broker's error."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "message.timeout.ms": 10000})
    errors = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer.produce(topic, b"v", on_delivery=delivered)
    producer.flush(15)
    if errors:
        raise KafkaException(errors[0])


def test_acls_grant_and_deny_produce(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    write_app = binding(ResourceType.TOPIC, "app-", AclOperation.WRITE, pattern=PREFIXED)
    deny_secret = binding(
        ResourceType.TOPIC, "secret", AclOperation.WRITE, DENY, principal="User:*"
    )
    see_secret = binding(ResourceType.TOPIC, "secret", AclOperation.DESCRIBE)
    for f in admin.create_acls([write_app, deny_secret, see_secret]).values():
        f.result(30)

    produce(cluster, "app-orders")
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        produce(cluster, "secret")

    # MATCH: every binding that applies to the name, prefixed ones included
    match = topic_filter("app-orders", ResourcePatternType.MATCH)
    assert admin.describe_acls(match).result(30) == [write_app]

    (deleted,) = admin.delete_acls([topic_filter("secret", LITERAL, DENY)]).values()
    assert deleted.result(30) == [deny_secret]
    # an ACL still covers the topic and none allows WRITE: no allow.everyone fallback
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        produce(cluster, "secret")
    (deleted,) = admin.delete_acls([topic_filter("secret", LITERAL)]).values()
    assert deleted.result(30) == [see_secret]
    produce(cluster, "secret")  # no ACL covers it any more: open to all


def test_metadata_hides_what_may_not_be_described(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    hide = binding(ResourceType.TOPIC, "hidden", AclOperation.DESCRIBE, DENY)
    for f in admin.create_acls([hide]).values():
        f.result(30)
    with WireClient(cluster.nodes["broker-1"].port) as w:
        everything = w.call(
            METADATA,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        names = {t.name for t in everything.topics}
        assert "app-orders" in names
        assert "hidden" not in names
        named = w.call(
            METADATA,
            12,
            topics=(builder(METADATA, 12).MetadataRequestTopic(name="hidden", topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        assert [t.error_code for t in named.topics] == [ErrorCode.topic_authorization_failed]


def test_group_read_is_checked(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    block = binding(ResourceType.GROUP, "blocked", AclOperation.READ, DENY)
    for f in admin.create_acls([block]).values():
        f.result(30)
    with WireClient(cluster.nodes["broker-1"].port) as w:
        r = w.call(
            JOIN_GROUP,
            5,
            group_id="blocked",
            session_timeout=10000,
            rebalance_timeout=10000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(builder(JOIN_GROUP, 5).JoinGroupRequestProtocol(name="r", metadata=b""),),
        )
        assert r.error_code == ErrorCode.group_authorization_failed


def test_share_coordinator_keys_need_cluster_action(cluster: LocalCluster) -> None:
    """FindCoordinator's share keys are for brokers: CLUSTER_ACTION on the cluster, as in
    Kafka; a group key needs DESCRIBE on the group only."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    cluster_action = (ResourceType.BROKER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
    deny = binding(*cluster_action, DENY)
    for f in admin.create_acls([deny]).values():
        f.result(30)
    try:
        with WireClient(cluster.nodes["broker-1"].port) as w:

            def find(key_type: int, key: str) -> int:
                r = w.call(FIND_COORDINATOR, 6, key_type=key_type, coordinator_keys=(key,))
                return r.coordinators[0].error_code

            assert find(2, "g:AAAAAAAAAAAAAAAAAAAAAA:0") == ErrorCode.cluster_authorization_failed
            assert find(0, "g") == ErrorCode.none
    finally:
        rtype, name, op = cluster_action
        undeny = AclBindingFilter(rtype, name, LITERAL, ME, "*", op, DENY)
        (deleted,) = admin.delete_acls([undeny]).values()
        assert deleted.result(30) == [deny]


def test_invalid_acl_requests_are_refused(cluster: LocalCluster) -> None:
    creation = builder(CREATE_ACLS, 3).AclCreation
    with WireClient(cluster.nodes["broker-1"].port) as w:
        r = w.call(
            CREATE_ACLS,
            3,
            creations=(
                creation(  # CLUSTER, under another name than kafka-cluster
                    resource_type=4,
                    resource_name="other",
                    resource_pattern_type=3,
                    principal=ME,
                    host="*",
                    operation=2,
                    permission_type=3,
                ),
                creation(  # MATCH: only for filters
                    resource_type=2,
                    resource_name="t",
                    resource_pattern_type=2,
                    principal=ME,
                    host="*",
                    operation=3,
                    permission_type=3,
                ),
            ),
        )
        assert [c.error_code for c in r.results] == [ErrorCode.invalid_request] * 2
        d = w.call(
            DESCRIBE_ACLS,
            3,
            resource_type_filter=99,  # no such resource type
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        assert d.error_code == ErrorCode.invalid_request


def test_acl_apis_without_an_authorizer(tmp_path_factory: pytest.TempPathFactory) -> None:
    with running_cluster(tmp_path_factory.mktemp("noauth"), brokers=1, metas=1) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        acl = binding(ResourceType.TOPIC, "t", AclOperation.READ)
        (f,) = admin.create_acls([acl]).values()
        with pytest.raises(KafkaException, match="SECURITY_DISABLED"):
            f.result(30)
