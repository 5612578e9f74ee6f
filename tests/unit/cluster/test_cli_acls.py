"""`rafka acls` option handling (cluster/cli_security.py): kafka-acls.sh's options -> ACL
bindings and filters."""

from __future__ import annotations

import pytest
import typer

from cluster.cli_security import acl_bindings, acl_filters, acl_resources
from meta.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def test_resources_from_options() -> None:
    assert acl_resources(["t"], ["g1", "g2"], None, None, True) == [
        (ResourceType.TOPIC, "t"),
        (ResourceType.GROUP, "g1"),
        (ResourceType.GROUP, "g2"),
        (ResourceType.CLUSTER, CLUSTER_NAME),
    ]


def test_add_is_every_principal_host_operation_and_resource() -> None:
    got = acl_bindings(
        [(ResourceType.TOPIC, "orders-")],
        "Prefixed",
        ["User:alice"],
        ["User:mallory"],
        [],
        ["Write", "describe-configs"],
    )
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    assert set(got) == {
        AclBinding(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, p, "*", op, perm)
        for p, perm in (("User:alice", allow), ("User:mallory", deny))
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE_CONFIGS)
    }
    assert len(got) == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([], "literal", ["User:a"], [], [], ["Read"]), "needs a resource"),
        (([(ResourceType.TOPIC, "t")], "literal", ["User:a"], [], [], ["Reed"]), "operation"),
        (([(ResourceType.TOPIC, "t")], "any", ["User:a"], [], [], ["Read"]), "literal or"),
        (([(ResourceType.TOPIC, "t")], "literal", ["alice"], [], [], ["Read"]), "Type:name"),
    ],
)
def test_add_refuses_what_kafka_acls_refuses(args: tuple, message: str) -> None:
    with pytest.raises(typer.BadParameter, match=message):
        acl_bindings(*args)


def test_filters_leave_unset_fields_open() -> None:
    assert acl_filters([], "any", [], [], []) == [
        AclBindingFilter(
            ResourceType.ANY,
            None,
            PatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ]
    (f,) = acl_filters([(ResourceType.GROUP, "g")], "match", ["User:bob"], ["10.0.0.1"], ["read"])
    assert (f.resource_type, f.resource_name, f.pattern_type) == (
        ResourceType.GROUP,
        "g",
        PatternType.MATCH,
    )
    assert (f.principal, f.host, f.operation) == ("User:bob", "10.0.0.1", AclOperation.READ)
