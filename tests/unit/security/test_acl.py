"""DescribeAcls/DeleteAcls filters against bindings (Kafka's AclBindingFilter.matches)."""

from __future__ import annotations

import pytest

from meta.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    enum_code,
    filter_matches,
)

T, G = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE = AclOperation.READ, AclOperation.WRITE


def binding(
    name: str = "orders",
    pattern: PatternType = LIT,
    rtype: ResourceType = T,
    principal: str = "User:alice",
    host: str = "*",
    op: AclOperation = READ,
    perm: AclPermissionType = ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def filt(
    name: str | None = None,
    pattern: PatternType = PatternType.ANY,
    rtype: ResourceType = ResourceType.ANY,
    principal: str | None = None,
    host: str | None = None,
    op: AclOperation = AclOperation.ANY,
    perm: AclPermissionType = AclPermissionType.ANY,
) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, pattern, principal, host, op, perm)


def test_the_any_filter_matches_everything() -> None:
    for b in (binding(), binding("ord", PRE), binding("*"), binding("g", rtype=G, op=WRITE)):
        assert filter_matches(filt(), b)


@pytest.mark.parametrize(
    ("b", "expected"),
    [
        (binding("orders", LIT), True),
        (binding("orders", PRE), True),  # ANY: every pattern type, by the exact name
        (binding("ord", PRE), False),
        (binding("*", LIT), False),
    ],
)
def test_any_pattern_type_matches_the_exact_name(b: AclBinding, expected: bool) -> None:
    assert filter_matches(filt("orders"), b) is expected


@pytest.mark.parametrize(
    ("b", "expected"),
    [
        (binding("orders", LIT), True),
        (binding("*", LIT), True),  # the wildcard applies to every name
        (binding("ord", PRE), True),
        (binding("orders", PRE), True),
        (binding("orders-eu", PRE), False),
        (binding("ord", LIT), False),
        (binding("x", PRE), False),
    ],
)
def test_match_selects_what_applies_to_the_name(b: AclBinding, expected: bool) -> None:
    assert filter_matches(filt("orders", PatternType.MATCH), b) is expected


def test_a_concrete_pattern_type_only_matches_its_own() -> None:
    assert filter_matches(filt("ord", PRE), binding("ord", PRE))
    assert not filter_matches(filt("ord", LIT), binding("ord", PRE))
    assert not filter_matches(filt(None, LIT), binding("ord", PRE))
    assert filter_matches(filt(None, PRE), binding("ord", PRE))
    # a literal filter does not expand "*"
    assert not filter_matches(filt("orders", LIT), binding("*", LIT))


def test_entry_fields_filter_exactly() -> None:
    b = binding(principal="User:alice", host="10.0.0.1", op=WRITE, perm=DENY)
    assert filter_matches(filt(principal="User:alice", host="10.0.0.1", op=WRITE, perm=DENY), b)
    assert not filter_matches(filt(principal="User:bob"), b)
    assert not filter_matches(filt(principal="User:*"), b)  # no wildcard expansion in filters
    assert not filter_matches(filt(host="*"), b)
    assert not filter_matches(filt(op=READ), b)
    assert not filter_matches(filt(op=AclOperation.ALL), b)
    assert not filter_matches(filt(perm=ALLOW), b)
    assert not filter_matches(filt(rtype=G), b)
    assert filter_matches(filt(rtype=T), b)


def test_unknown_wire_codes_become_unknown() -> None:
    assert enum_code(ResourceType, 2) is ResourceType.TOPIC
    assert enum_code(ResourceType, 99) is ResourceType.UNKNOWN
    assert enum_code(AclOperation, -1) is AclOperation.UNKNOWN
    assert enum_code(PatternType, 4) is PatternType.PREFIXED


def test_supported_operations_are_kafkas() -> None:
    ops = SUPPORTED_OPERATIONS[T]
    assert sum(1 << op for op in ops) == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    assert AclOperation.IDEMPOTENT_WRITE in SUPPORTED_OPERATIONS[ResourceType.CLUSTER]
