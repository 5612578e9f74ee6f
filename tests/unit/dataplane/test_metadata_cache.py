"""The broker's metadata cache applies the meta service's snapshots and watch events: the
security metadata (ACLs, SCRAM credentials, delegation tokens) and broker endpoints. Events are
made by the meta service's own code (``meta.wire``) from a state driven by commands."""

from __future__ import annotations

from dataplane.metadata_cache import MetadataCache
from meta import wire
from meta.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from meta.commands import (
    AlterScramCredentials,
    Body,
    CreateAcls,
    CreateDelegationToken,
    DeleteAcls,
    ExpireDelegationToken,
    InitCluster,
    RegisterBroker,
    RenewDelegationToken,
    UnregisterBroker,
)
from meta.model import DelegationToken, Endpoint, ScramCredential
from tests.unit.meta.machine import NOW, Machine
from tests.unit.meta.test_security_state import acl_filter


def binding(name: str, operation: AclOperation = AclOperation.READ) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        name,
        PatternType.LITERAL,
        "User:alice",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


KEYS = ScramCredential(b"salt", b"stored", b"server", 4096)
TOKEN = DelegationToken("t1", b"hmac", "User:alice", "User:alice", (), NOW, NOW + 100, NOW + 500)


class Fed:
    """A meta state and a cache fed by the events of each command, as a Watch stream feeds it."""

    def __init__(self) -> None:
        self.machine = Machine()
        self.machine.run(InitCluster("c"))
        self.cache = MetadataCache()
        self.cache.apply(wire.snapshot_event(self.machine.state))

    def run(self, body: Body) -> object:
        before = len(self.machine.changes)
        result = self.machine.run(body)
        for change in self.machine.changes[before:]:
            self.cache.apply(wire.change_event(self.machine.state, change))
        return result

    def snapshot_cache(self) -> MetadataCache:
        cache = MetadataCache()
        cache.apply(wire.snapshot_event(self.machine.state))
        return cache


def test_acls_follow_creations_and_deletions() -> None:
    fed = Fed()
    assert fed.cache.acls == ()
    assert fed.cache.acl_version == 0
    fed.run(CreateAcls((binding("a"), binding("b"), binding("c"))))
    assert fed.cache.acls == (binding("a"), binding("b"), binding("c"))
    assert fed.cache.acl_version == 1
    fed.run(DeleteAcls((acl_filter("b"),)))
    fed.run(CreateAcls((binding("d"), binding("a"))))  # "a" is there already
    assert fed.cache.acls == (binding("a"), binding("c"), binding("d"))
    assert fed.cache.acl_version == 3
    assert fed.cache.offset == fed.machine.state.offset
    snapshot = fed.snapshot_cache()
    assert snapshot.acls == fed.cache.acls
    assert snapshot.acl_version == 1


def test_a_snapshot_replaces_the_acls_and_moves_the_version_only_on_a_change() -> None:
    fed = Fed()
    fed.run(CreateAcls((binding("a"),)))
    fed.cache.apply(wire.snapshot_event(fed.machine.state))  # e.g. after a reconnection
    assert fed.cache.acl_version == 1
    fed.machine.run(CreateAcls((binding("b"),)))  # missed by the cache
    fed.cache.apply(wire.snapshot_event(fed.machine.state))
    assert fed.cache.acls == (binding("a"), binding("b"))
    assert fed.cache.acl_version == 2


def test_scram_credentials_follow_upserts_and_deletions() -> None:
    fed = Fed()
    fed.run(AlterScramCredentials((("alice", "SCRAM-SHA-256", KEYS),), ()))
    fed.run(AlterScramCredentials((("bob", "SCRAM-SHA-512", KEYS),), ()))
    assert fed.cache.scram_credentials == {
        ("alice", "SCRAM-SHA-256"): KEYS,
        ("bob", "SCRAM-SHA-512"): KEYS,
    }
    fed.run(AlterScramCredentials((), (("alice", "SCRAM-SHA-256"),)))
    assert fed.cache.scram_credentials == {("bob", "SCRAM-SHA-512"): KEYS}
    assert fed.snapshot_cache().scram_credentials == fed.cache.scram_credentials


def test_delegation_tokens_follow_creation_renewal_and_expiry() -> None:
    fed = Fed()
    fed.run(CreateDelegationToken(TOKEN))
    assert fed.cache.delegation_tokens == {"t1": TOKEN}
    fed.run(RenewDelegationToken(b"hmac", "User:alice", 300, NOW + 50))
    assert fed.cache.delegation_tokens["t1"].expiry_ms == NOW + 350
    assert fed.snapshot_cache().delegation_tokens == fed.cache.delegation_tokens
    fed.run(ExpireDelegationToken(b"hmac", "User:alice", -1, NOW + 60))
    assert fed.cache.delegation_tokens == {}


def test_broker_endpoints_by_listener_name() -> None:
    fed = Fed()
    endpoints = (
        Endpoint("INTERNAL", "10.0.0.1", 9092, "PLAINTEXT"),
        Endpoint("SASL_SSL", "kafka.example", 9093, "SASL_SSL"),
    )
    fed.run(RegisterBroker(1, "10.0.0.1", 9092, None, "", b"one", False, endpoints))
    fed.run(RegisterBroker(2, "h2", 9094, None, "", b"two", False))  # an older broker
    assert fed.cache.brokers[1].endpoints == {
        "INTERNAL": ("10.0.0.1", 9092),
        "SASL_SSL": ("kafka.example", 9093),
    }
    assert fed.cache.brokers[2].endpoints == {"PLAINTEXT": ("h2", 9094)}
    assert fed.snapshot_cache().brokers == fed.cache.brokers


def test_an_unregistered_broker_leaves_the_cache_and_its_listeners_hear_it() -> None:
    fed = Fed()
    fed.run(RegisterBroker(1, "h1", 9092, None, "", b"one", False))
    fed.run(RegisterBroker(2, "h2", 9092, None, "", b"two", False))
    heard: list[tuple[object, object]] = []
    fed.cache.broker_listeners.append(lambda old, new: heard.append((old, new)))
    gone = fed.cache.brokers[2]
    fed.run(UnregisterBroker(2, False))
    assert list(fed.cache.brokers) == [1]
    assert heard == [(gone, None)]
    assert fed.snapshot_cache().brokers == fed.cache.brokers
