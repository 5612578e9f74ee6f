"""The ACL admin APIs (CreateAcls, DescribeAcls, DeleteAcls): invalid bindings and filters,
pattern matching, and callers without CLUSTER ALTER or DESCRIBE."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.kafka_client import builder
from meta.acl import AclOperation as Op
from meta.acl import AclPermissionType as Permission
from meta.acl import PatternType as Pattern
from meta.acl import ResourceType as Resource
from tests.compat import diff
from tests.compat.pair import Pair
from tests.compat.security.support import (
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    KAFKA_REQUEST_TEXT,
    OPEN,
    Principals,
    acl,
    acl_filter,
)


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
