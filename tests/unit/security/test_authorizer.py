"""The StandardAuthorizer's decisions over a set of ACLs (Kafka's StandardAuthorizerData)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from dataplane.config import BrokerConfig
from dataplane.connection import Connection
from dataplane.security.authorizer import Authorizer, AuthorizerConfigError
from meta.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


@dataclass
class FakeCache:
    """What the authorizer reads of the metadata cache."""

    acls: tuple[AclBinding, ...] = ()
    acl_version: int = 0

    def set(self, *acls: AclBinding) -> None:
        self.acls = acls
        self.acl_version += 1


def acl(
    name: str,
    op: AclOperation = Op.READ,
    perm: AclPermissionType = ALLOW,
    pattern: PatternType = LIT,
    rtype: ResourceType = T,
    principal: str = "User:alice",
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def make(*acls: AclBinding, **settings: object) -> tuple[Authorizer, FakeCache]:
    cache = FakeCache()
    cache.set(*acls)
    config = BrokerConfig.load(overrides={"authorizer.class.name": STANDARD, **settings})
    return Authorizer(config, cache), cache  # type: ignore[arg-type]


def conn(principal: str = "User:alice", host: str = "10.0.0.1") -> Connection:
    return Connection(peer=f"{host}:5000", host=host, principal=principal)


ALICE, BOB = conn(), conn("User:bob")


def test_off_without_a_class_name_allows_everything() -> None:
    cache = FakeCache()
    cache.set(acl("orders", perm=DENY))
    auth = Authorizer(BrokerConfig.load(), cache)  # type: ignore[arg-type]
    assert not auth.enabled
    assert auth.authorize(ALICE, Op.READ, T, "orders")
    assert auth.denied(ALICE, Op.READ, T, ["orders"]) == frozenset()
    assert auth.authorize_any(ALICE, Op.WRITE, T)
    assert auth.authorized_operations(ALICE, G, "g") == sum(
        1 << op for op in SUPPORTED_OPERATIONS[G]
    )


def test_an_unknown_class_name_refuses_to_start() -> None:
    with pytest.raises(AuthorizerConfigError, match="not supported"):
        make(**{"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(AuthorizerConfigError, match=r"super\.users"):
        make(**{"super.users": "admin"})
    auth, _ = make(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert auth.enabled


def test_literal_prefixed_and_wildcard_patterns() -> None:
    auth, _ = make(
        acl("orders"),
        acl("pay-", pattern=PRE),
        acl("*", op=Op.WRITE),
        acl("log", pattern=PRE, rtype=G),
    )
    assert auth.authorize(ALICE, Op.READ, T, "orders")
    assert not auth.authorize(ALICE, Op.READ, T, "orders2")  # a literal is not a prefix
    assert auth.authorize(ALICE, Op.READ, T, "pay-eu")
    assert auth.authorize(ALICE, Op.READ, T, "pay-")
    assert not auth.authorize(ALICE, Op.READ, T, "pay")
    assert auth.authorize(ALICE, Op.WRITE, T, "anything")  # "*" covers every topic
    assert not auth.authorize(ALICE, Op.READ, T, "anything")
    assert auth.authorize(ALICE, Op.READ, G, "logs")
    assert not auth.authorize(ALICE, Op.READ, T, "logs")  # another resource type


def test_principal_must_match_or_be_the_wildcard() -> None:
    auth, _ = make(acl("orders"), acl("public", principal="User:*"))
    assert not auth.authorize(BOB, Op.READ, T, "orders")
    assert auth.authorize(BOB, Op.READ, T, "public")
    assert auth.authorize(ALICE, Op.READ, T, "public")


def test_host_must_match_or_be_the_wildcard() -> None:
    auth, _ = make(acl("orders", host="10.0.0.1"))
    assert auth.authorize(conn(host="10.0.0.1"), Op.READ, T, "orders")
    assert not auth.authorize(conn(host="10.0.0.2"), Op.READ, T, "orders")


def test_deny_wins_over_any_allow() -> None:
    auth, _ = make(
        acl("*", op=Op.ALL),
        acl("secret-", pattern=PRE, perm=DENY),
        acl("orders", op=Op.WRITE, perm=DENY, host="10.0.0.9"),
    )
    assert auth.authorize(ALICE, Op.READ, T, "orders")
    assert not auth.authorize(ALICE, Op.READ, T, "secret-plans")
    assert auth.authorize(ALICE, Op.WRITE, T, "secret-plans")  # the DENY is for READ only
    assert not auth.authorize(conn(host="10.0.0.9"), Op.WRITE, T, "orders")
    assert auth.authorize(ALICE, Op.WRITE, T, "orders")


def test_a_deny_of_all_denies_every_operation() -> None:
    auth, _ = make(
        acl("orders", op=Op.ALL), acl("orders", op=Op.ALL, perm=DENY, principal="User:bob")
    )
    for op in SUPPORTED_OPERATIONS[T]:
        assert auth.authorize(ALICE, op, T, "orders")
        assert not auth.authorize(BOB, op, T, "orders")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_describe_is_implied(granted: AclOperation) -> None:
    auth, _ = make(acl("orders", op=granted))
    assert auth.authorize(ALICE, Op.DESCRIBE, T, "orders")


def test_implication_rules() -> None:
    auth, _ = make(acl("orders", op=Op.ALTER_CONFIGS), acl("other", op=Op.CREATE))
    assert auth.authorize(ALICE, Op.DESCRIBE_CONFIGS, T, "orders")
    assert not auth.authorize(ALICE, Op.DESCRIBE, T, "orders")
    assert not auth.authorize(ALICE, Op.DESCRIBE, T, "other")  # CREATE implies nothing
    assert not auth.authorize(ALICE, Op.READ, T, "orders")  # nothing implies READ
    # a DENY implies nothing: denying READ does not deny DESCRIBE
    auth, _ = make(acl("orders", op=Op.WRITE), acl("orders", perm=DENY))
    assert auth.authorize(ALICE, Op.DESCRIBE, T, "orders")
    assert not auth.authorize(ALICE, Op.READ, T, "orders")


def test_super_users_may_do_anything() -> None:
    auth, _ = make(
        acl("*", op=Op.ALL, perm=DENY, principal="User:*"),
        **{"super.users": "User:admin; User:CN=broker,O=rafka"},
    )
    assert auth.authorize(conn("User:admin"), Op.ALTER, C, "kafka-cluster")
    assert auth.authorize(conn("User:CN=broker,O=rafka"), Op.READ, T, "orders")
    assert not auth.authorize(ALICE, Op.READ, T, "orders")
    assert auth.authorize_any(conn("User:admin"), Op.WRITE, T)


def test_allow_everyone_if_no_acl_found() -> None:
    auth, _ = make(acl("orders", principal="User:bob"))
    assert not auth.authorize(ALICE, Op.READ, T, "free")  # default: deny
    auth, _ = make(
        acl("orders", principal="User:bob"), **{"allow.everyone.if.no.acl.found": "true"}
    )
    assert auth.authorize(ALICE, Op.READ, T, "free")  # no ACL covers it
    # some ACL covers "orders" (even one for someone else): no fallback
    assert not auth.authorize(ALICE, Op.READ, T, "orders")


def test_acl_changes_take_effect() -> None:
    auth, cache = make()
    assert not auth.authorize(ALICE, Op.READ, T, "orders")
    cache.set(acl("orders"))
    assert auth.authorize(ALICE, Op.READ, T, "orders")
    cache.set()
    assert not auth.authorize(ALICE, Op.READ, T, "orders")


def test_denied_and_authorized_operations() -> None:
    auth, _ = make(acl("a"), acl("b", op=Op.ALL), acl("c", op=Op.DESCRIBE, perm=DENY))
    assert auth.denied(ALICE, Op.READ, T, ["a", "b", "c", "a"]) == {"c"}
    bits = auth.authorized_operations(ALICE, T, "a")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert auth.authorized_operations(ALICE, T, "b") == sum(
        1 << op for op in SUPPORTED_OPERATIONS[T]
    )
    assert auth.authorized_operations(ALICE, T, "c") == 0


def test_authorize_any_resource_of_a_type() -> None:
    auth, _ = make(acl("orders", op=Op.WRITE))
    assert auth.authorize_any(ALICE, Op.WRITE, T)
    assert not auth.authorize_any(BOB, Op.WRITE, T)
    assert not auth.authorize_any(ALICE, Op.READ, T)
    # an ALLOW a DENY covers (same literal, or a prefix of it) does not count
    auth, _ = make(acl("orders", op=Op.WRITE), acl("ord", op=Op.WRITE, perm=DENY, pattern=PRE))
    assert not auth.authorize_any(ALICE, Op.WRITE, T)
    auth, _ = make(acl("pay-", op=Op.WRITE, pattern=PRE), acl("orders", op=Op.WRITE, perm=DENY))
    assert auth.authorize_any(ALICE, Op.WRITE, T)
    auth, _ = make(acl("pay-", op=Op.ALL, pattern=PRE), acl("*", op=Op.WRITE, perm=DENY))
    assert not auth.authorize_any(ALICE, Op.WRITE, T)


def test_denials_are_logged_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    auth, _ = make()
    with caplog.at_level(logging.INFO, logger="rafka.authorizer"):
        for _ in range(3):
            auth.authorize(ALICE, Op.WRITE, T, "orders")
        auth.authorize(ALICE, Op.READ, T, "hidden", log_denied=False)
    denials = [r.getMessage() for r in caplog.records if "Denied" in r.getMessage()]
    assert len(denials) == 1
    assert "User:alice" in denials[0]
    assert "WRITE" in denials[0]
    assert "TOPIC:orders" in denials[0]
    assert "10.0.0.1" in denials[0]
