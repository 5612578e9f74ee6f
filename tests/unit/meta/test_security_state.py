"""The security metadata of the replicated state: ACL bindings, SCRAM credentials, delegation
tokens, broker endpoints. Commands applied to plain data, without Raft."""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import pytest

from meta import entity_proto
from meta.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from meta.commands import (
    AclDeleteOutcome,
    AlterScramCredentials,
    Body,
    CreateAcls,
    CreateDelegationToken,
    DeleteAcls,
    ExpireDelegationToken,
    Outcome,
    RegisterBroker,
    RemoveExpiredTokens,
    RenewDelegationToken,
    ScramOutcome,
    TokenOutcome,
)
from meta.model import DelegationToken, Endpoint, ScramCredential
from meta.protocol import ErrorCode
from meta.state import MetaState

from .machine import NOW, Machine


def run(machine: Machine, body: Body, request_id: str = "") -> Any:
    return machine.run(body, request_id)


ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
READ, WRITE = AclOperation.READ, AclOperation.WRITE


def acl(
    name: str = "orders",
    pattern: PatternType = LITERAL,
    principal: str = "User:alice",
    operation: AclOperation = READ,
    permission: AclPermissionType = ALLOW,
    resource: ResourceType = TOPIC,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def acl_filter(
    name: str | None = None,
    pattern: PatternType = PatternType.ANY,
    principal: str | None = None,
    operation: AclOperation = AclOperation.ANY,
    permission: AclPermissionType = AclPermissionType.ANY,
    resource: ResourceType = ResourceType.ANY,
    host: str | None = None,
) -> AclBindingFilter:
    return AclBindingFilter(resource, name, pattern, principal, host, operation, permission)


# ---------------------------------------------------------------- ACLs


def test_create_acls_validates_each_binding_as_kafka() -> None:
    machine = Machine()
    bindings = (
        acl(),
        acl(resource=ResourceType.ANY),
        acl(resource=ResourceType.UNKNOWN),
        acl(pattern=MATCH),
        acl(pattern=PatternType.ANY),
        acl(operation=AclOperation.ANY),
        acl(operation=AclOperation.UNKNOWN),
        acl(permission=AclPermissionType.ANY),
        acl(name=""),
        acl(resource=ResourceType.CLUSTER, name="my-cluster"),
        acl(principal="alice"),
        acl(host=""),
        acl(name="", pattern=MATCH),  # the broker's name check comes first
        acl(resource=ResourceType.CLUSTER, name="kafka-cluster", operation=AclOperation.ALTER),
    )
    outcomes = run(machine, CreateAcls(bindings))
    invalid = ErrorCode.INVALID_REQUEST
    assert outcomes == [
        Outcome(),
        Outcome(invalid, "Invalid resourceType ANY"),
        Outcome(invalid, "Invalid resourceType UNKNOWN"),
        Outcome(invalid, "Invalid patternType MATCH"),
        Outcome(invalid, "Invalid patternType ANY"),
        Outcome(invalid, "Invalid operation ANY"),
        Outcome(invalid, "Invalid operation UNKNOWN"),
        Outcome(invalid, "Invalid permissionType ANY"),
        Outcome(invalid, "Invalid empty resource name"),
        Outcome(invalid, "The only valid name for the CLUSTER resource is kafka-cluster"),
        Outcome(
            invalid,
            "Could not parse principal from `alice` (no colon is present separating the "
            "principal type from the principal name)",
        ),
        Outcome(invalid, "Host pattern cannot be null or empty"),
        Outcome(invalid, "Invalid empty resource name"),
        Outcome(),
    ]
    assert list(machine.state.acls) == [bindings[0], bindings[-1]]
    [change] = machine.changes  # one offset for the whole request
    assert (change.offset, change.kind) == (1, "acls")
    assert change.acls_added == (bindings[0], bindings[-1])
    assert change.acls_removed == ()


def test_an_acl_already_present_succeeds_without_a_change() -> None:
    machine = Machine()
    run(machine, CreateAcls((acl(),)))
    assert run(machine, CreateAcls((acl(), acl()))) == [Outcome(), Outcome()]
    assert list(machine.state.acls) == [acl()]
    assert machine.state.offset == 1
    assert len(machine.changes) == 1


def test_delete_acls_by_filters() -> None:
    machine = Machine()
    stored = (
        acl("orders"),  # 0
        acl("ord", PREFIXED),  # 1
        acl("*"),  # 2: the literal wildcard
        acl("payments", principal="User:bob", operation=WRITE, permission=DENY),  # 3
        acl("orders", resource=GROUP),  # 4
        acl("orders", PREFIXED, host="10.0.0.1"),  # 5
    )
    run(machine, CreateAcls(stored))
    outcomes = run(
        machine,
        DeleteAcls(
            (
                acl_filter("orders", MATCH, resource=TOPIC),  # what applies to topic "orders"
                acl_filter("orders", LITERAL),  # exactly literal "orders", any resource type
                acl_filter(principal="User:bob", permission=DENY),
            )
        ),
    )
    assert outcomes == [
        AclDeleteOutcome(deleted=(stored[0], stored[1], stored[2], stored[5])),
        AclDeleteOutcome(deleted=(stored[0], stored[4])),  # stored[0] is reported twice
        AclDeleteOutcome(deleted=(stored[3],)),
    ]
    assert machine.state.acls == {}
    [_, change] = machine.changes
    assert change.kind == "acls"
    assert set(change.acls_removed) == set(stored)
    assert len(change.acls_removed) == len(stored)


def test_delete_acls_prefixed_and_any_filters() -> None:
    machine = Machine()
    stored = (acl("ord", PREFIXED), acl("orders", PREFIXED), acl("ord"), acl("orders"))
    run(machine, CreateAcls(stored))
    [prefixed, any_pattern, nothing] = run(
        machine,
        DeleteAcls(
            (
                acl_filter("ord", PREFIXED),  # a PREFIXED filter matches the prefix exactly
                acl_filter("orders", PatternType.ANY, host="*", operation=READ, permission=ALLOW),
                acl_filter(principal="User:nobody"),
            )
        ),
    )
    assert prefixed.deleted == (stored[0],)
    assert any_pattern.deleted == (stored[1], stored[3])
    assert nothing == AclDeleteOutcome()
    assert list(machine.state.acls) == [stored[2]]


def test_delete_acls_refuses_unknown_filters_and_a_no_op_changes_nothing() -> None:
    machine = Machine()
    run(machine, CreateAcls((acl(),)))
    outcomes = run(
        machine,
        DeleteAcls(
            (
                acl_filter(resource=ResourceType.UNKNOWN),
                acl_filter(pattern=PatternType.UNKNOWN),
                acl_filter(operation=AclOperation.UNKNOWN),
                acl_filter(permission=AclPermissionType.UNKNOWN),
                acl_filter(principal="User:bob"),
            )
        ),
    )
    bad = ErrorCode.INVALID_REQUEST
    assert outcomes == [
        AclDeleteOutcome(bad, "Unknown patternFilter."),
        AclDeleteOutcome(bad, "Unknown patternFilter."),
        AclDeleteOutcome(bad, "Unknown entryFilter."),
        AclDeleteOutcome(bad, "Unknown entryFilter."),
        AclDeleteOutcome(),
    ]
    assert list(machine.state.acls) == [acl()]
    assert machine.state.offset == 1


# ---------------------------------------------------------------- SCRAM credentials

KEYS = ScramCredential(b"salt", b"stored-key", b"server-key", 4096)
SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"


def test_scram_upsert_replace_and_delete() -> None:
    machine = Machine()
    results = run(
        machine, AlterScramCredentials((("alice", SHA256, KEYS), ("alice", SHA512, KEYS)), ())
    )
    assert results == [ScramOutcome("alice")]  # one result per user
    assert machine.state.scram_credentials == {("alice", SHA256): KEYS, ("alice", SHA512): KEYS}
    stronger = replace(KEYS, iterations=8192)
    run(machine, AlterScramCredentials((("alice", SHA256, stronger),), (("alice", SHA512),)))
    assert machine.state.scram_credentials == {("alice", SHA256): stronger}
    assert [(c.kind, c.key) for c in machine.changes] == [
        ("scram", ("alice", SHA256)),
        ("scram", ("alice", SHA512)),
        ("scram", ("alice", SHA512)),  # deletions first, as Kafka
        ("scram", ("alice", SHA256)),
    ]
    assert [c.offset for c in machine.changes] == [1, 2, 3, 4]


def test_scram_errors_as_kafka() -> None:
    machine = Machine()
    run(machine, AlterScramCredentials((("carol", SHA256, KEYS),), ()))
    upserts = (
        ("alice", SHA256, KEYS),
        ("alice", SHA256, KEYS),  # the same user and mechanism twice
        ("bob", "SCRAM-SHA-1", KEYS),
        ("", SHA256, KEYS),
        ("dave", SHA256, replace(KEYS, iterations=4095)),
        ("erin", SHA512, replace(KEYS, iterations=16385)),
        ("carol", SHA512, KEYS),  # refused with carol's deletion of a missing credential
        ("frank", SHA512, KEYS),
    )
    deletions = (("carol", SHA512), ("gina", SHA256))
    results = run(machine, AlterScramCredentials(upserts, deletions))
    unacceptable = ErrorCode.UNACCEPTABLE_CREDENTIAL
    missing = (
        ErrorCode.RESOURCE_NOT_FOUND,
        "Attempt to delete a user credential that does not exist",
    )
    assert results == [
        ScramOutcome("carol", *missing),
        ScramOutcome("gina", *missing),
        ScramOutcome(
            "alice",
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        ScramOutcome("bob", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ScramOutcome("", unacceptable, "Username must not be empty"),
        ScramOutcome("dave", unacceptable, "Too few iterations"),
        ScramOutcome("erin", unacceptable, "Too many iterations"),
        ScramOutcome("frank"),
    ]
    assert machine.state.scram_credentials == {("carol", SHA256): KEYS, ("frank", SHA512): KEYS}
    assert machine.state.offset == 2


def test_credentials_keep_their_keys_out_of_logs() -> None:
    assert "stored-key" not in repr(KEYS)
    assert "4096" in repr(KEYS)


# ---------------------------------------------------------------- delegation tokens


def token(
    token_id: str = "t1", expiry_ms: int = NOW + 1000, max_ms: int = NOW + 5000
) -> DelegationToken:
    return DelegationToken(
        token_id,
        f"hmac-{token_id}".encode(),
        owner="User:alice",
        requester="User:admin",
        renewers=("User:bob",),
        issue_ms=NOW,
        expiry_ms=expiry_ms,
        max_ms=max_ms,
    )


def test_create_a_token_once() -> None:
    machine = Machine()
    assert run(machine, CreateDelegationToken(token())) == TokenOutcome(expiry_ms=NOW + 1000)
    again = run(machine, CreateDelegationToken(token()))
    assert again.error_code == ErrorCode.INVALID_REQUEST
    assert machine.state.delegation_tokens == {"t1": token()}
    assert [(c.kind, c.key) for c in machine.changes] == [("token", "t1")]
    assert "hmac-t1" not in repr(token())


@pytest.mark.parametrize("principal", ["User:alice", "User:admin", "User:bob"])
def test_owner_requester_and_renewers_may_renew_never_past_max(principal: str) -> None:
    machine = Machine()
    run(machine, CreateDelegationToken(token()))
    renewed = run(machine, RenewDelegationToken(b"hmac-t1", principal, 2000, NOW + 500))
    assert renewed == TokenOutcome(expiry_ms=NOW + 2500)
    capped = run(machine, RenewDelegationToken(b"hmac-t1", principal, 10_000, NOW + 1000))
    assert capped == TokenOutcome(expiry_ms=NOW + 5000)  # max_ms
    assert machine.state.delegation_tokens["t1"].expiry_ms == NOW + 5000
    assert [c.key for c in machine.changes] == ["t1"] * 3


def test_renew_and_expire_refusals() -> None:
    machine = Machine()
    run(machine, CreateDelegationToken(token()))
    for body in (
        RenewDelegationToken(b"hmac-t1", "User:mallory", 1000, NOW),
        ExpireDelegationToken(b"hmac-t1", "User:mallory", -1, NOW),
    ):
        outcome = run(machine, body)
        assert outcome.error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        assert "User:mallory" in outcome.error_message
    outcome = run(machine, RenewDelegationToken(b"unknown", "User:alice", 1000, NOW))
    assert outcome.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert machine.state.delegation_tokens == {"t1": token()}
    # Past its expiry: refused, and removed from the state.
    outcome = run(machine, ExpireDelegationToken(b"hmac-t1", "User:alice", 0, NOW + 1001))
    assert outcome.error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert machine.state.delegation_tokens == {}
    assert machine.changes[-1].key == "t1"
    outcome = run(machine, RenewDelegationToken(b"hmac-t1", "User:alice", 1000, NOW + 1002))
    assert outcome.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_expire_now_or_later() -> None:
    machine = Machine()
    run(machine, CreateDelegationToken(token("t1")))
    run(machine, CreateDelegationToken(token("t2")))
    later = run(machine, ExpireDelegationToken(b"hmac-t1", "User:bob", 200, NOW + 100))
    assert later == TokenOutcome(expiry_ms=NOW + 300)
    capped = run(machine, ExpireDelegationToken(b"hmac-t1", "User:bob", 99_999, NOW + 100))
    assert capped == TokenOutcome(expiry_ms=NOW + 5000)
    now = run(machine, ExpireDelegationToken(b"hmac-t2", "User:alice", -1, NOW + 100))
    assert now == TokenOutcome(expiry_ms=NOW + 100)  # KRaft answers now
    assert list(machine.state.delegation_tokens) == ["t1"]


def test_expired_tokens_are_removed() -> None:
    machine = Machine()
    for t in (token("a", NOW + 100), token("b", NOW + 200), token("c", NOW + 300)):
        run(machine, CreateDelegationToken(t))
    assert run(machine, RemoveExpiredTokens(NOW + 200)) == 1  # "b" expires at, not before, 200
    assert list(machine.state.delegation_tokens) == ["b", "c"]
    assert run(machine, RemoveExpiredTokens(NOW + 201)) == 1
    assert run(machine, RemoveExpiredTokens(NOW + 201)) == 0
    assert [c.key for c in machine.changes[3:]] == ["a", "b"]


# ---------------------------------------------------------------- brokers and old data


def test_a_registration_carries_its_endpoints() -> None:
    machine = Machine()
    endpoints = (
        Endpoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),
        Endpoint("SASL_SSL", "h", 9093, "SASL_SSL"),
    )
    run(machine, RegisterBroker(1, "h", 9092, None, "h:9392", b"one", False, endpoints))
    assert machine.state.brokers[1].endpoints == endpoints
    machine.register(2)  # without: as before listeners were registered
    assert machine.state.brokers[2].endpoints == ()


def test_a_retried_security_write_is_applied_once() -> None:
    machine = Machine()
    run(machine, CreateDelegationToken(token()))
    first = run(machine, ExpireDelegationToken(b"hmac-t1", "User:alice", -1, NOW), "r1")
    run(machine, CreateDelegationToken(token()))
    assert run(machine, ExpireDelegationToken(b"hmac-t1", "User:alice", -1, NOW), "r1") == first
    assert "t1" in machine.state.delegation_tokens


def test_a_pickled_dump_from_before_security_metadata_loads() -> None:
    machine = Machine()
    machine.register(1)
    del machine.state.brokers[1].__dict__["endpoints"]
    for name in ("acls", "scram_credentials", "delegation_tokens"):
        del machine.state.__dict__[name]
    loaded: MetaState = pickle.loads(pickle.dumps(machine.state))
    assert loaded.acls == {}
    assert loaded.scram_credentials == {}
    assert loaded.delegation_tokens == {}
    assert loaded.brokers[1].endpoints == ()


def test_the_wire_keeps_null_filter_fields_and_reads_unknown_codes_as_unknown() -> None:
    f = acl_filter(name="", principal=None, host="*")
    assert (
        entity_proto.acl_filter_from_proto(entity_proto.acl_filter_to_proto(f)) == f
    )  # "" is not None
    odd = entity_proto.acl_to_proto(acl())
    odd.operation = 99  # a code of a newer Kafka
    binding = entity_proto.acl_from_proto(odd)
    assert binding.operation == AclOperation.UNKNOWN
    [outcome] = run(Machine(), CreateAcls((binding,)))
    assert outcome == Outcome(ErrorCode.INVALID_REQUEST, "Invalid operation UNKNOWN")
